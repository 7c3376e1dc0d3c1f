"""If, Loop, Scan, the sequence and optional ops, and the signal ops against onnxruntime and numpy, on what ONNX's
suite leaves out: data-dependent conditions, scan axes and directions, negative positions, DFT lengths and axes."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")
import onnx_models
from onnx import TensorProto, helper, numpy_helper
from onnx_models import info, model, ort_run

from zeptograd.onnx import OnnxError, OnnxRunner
from zeptograd.onnx.backend import ZeptogradBackend

# ONNX ops' graphs: the IR round trip of every graph built (conftest) is the IR tests' job
pytestmark = pytest.mark.no_roundtrip

F, I64, BOOL = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
seq_info = helper.make_tensor_sequence_value_info


@pytest.fixture
def stand_ins(monkeypatch):
    onnx_models.install(monkeypatch, 17)


def _both(m, feeds, rtol=1e-5, atol=1e-6):
    """The backend's outputs (numpy, sequences as lists) against onnxruntime's."""
    want = ort_run(m, feeds)
    got = ZeptogradBackend.run_model(m, [feeds[i.name] for i in m.graph.input])
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        if isinstance(w, list):
            assert isinstance(g, list) and len(g) == len(w)
            for a, b in zip(g, w, strict=True):
                assert a.dtype == b.dtype
                np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)
        else:
            assert g.dtype == w.dtype and g.shape == w.shape
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


# control flow


def test_if_on_data_sees_the_enclosing_scope():
    then = helper.make_graph([helper.make_node("Add", ["x", "x"], ["t"])], "then", [], [info("t", F, [3])])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [], [info("e", F, [3])])
    m = model([helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)],
              [info("c", BOOL, []), info("x", F, [3])], [info("y", F, [3])])  # fmt: skip
    x = np.array([1.0, -2.0, 3.0], np.float32)
    for c in (True, False):
        _both(m, {"c": np.array(c), "x": x})


def _counting_loop(trip: bool, cond: bool) -> object:
    """acc += x while acc[0] < limit (the body's condition, from data), counting iterations as a scan output."""
    body = helper.make_graph(
        [helper.make_node("Add", ["acc", "x"], ["acc_out"]), helper.make_node("Gather", ["acc_out", "zero"], ["a0"]),
         helper.make_node("Less", ["a0", "limit"], ["c_out"]), helper.make_node("Identity", ["i"], ["i_out"])],
        "body", [info("i", I64, []), info("c", BOOL, []), info("acc", F, [2])],
        [info("c_out", BOOL, []), info("acc_out", F, [2]), info("i_out", I64, [])],
    )  # fmt: skip
    zero = numpy_helper.from_array(np.array(0, np.int64), "zero")
    node = helper.make_node("Loop", ["M" if trip else "", "cond" if cond else "", "acc0"], ["acc", "steps"], body=body)
    inputs = [info("M", I64, [])] * trip + [info("cond", BOOL, [])] * cond
    inputs += [info("acc0", F, [2]), info("x", F, [2]), info("limit", F, [])]
    return model([node], inputs, [info("acc", F, [2]), info("steps", I64, [None])], [zero])


@pytest.mark.parametrize("trip, cond", [(True, True), (False, True), (True, False)])
def test_loop_with_a_data_dependent_condition(stand_ins, trip, cond):
    m = _counting_loop(trip, cond)
    for limit, start in ((4.5, True), (0.5, True), (100.0, True), (4.5, False)):
        feeds = {"M": np.array(6), "cond": np.array(start), "acc0": np.zeros(2, np.float32),
                 "x": np.array([1.0, 2.0], np.float32), "limit": np.array(limit, np.float32)}  # fmt: skip
        feeds = {k: v for k, v in feeds.items() if k in {i.name for i in m.graph.input}}
        _both(m, feeds)


def test_a_loop_that_never_ends_is_refused():
    body = helper.make_graph(
        [helper.make_node("Identity", ["c"], ["c_out"]), helper.make_node("Neg", ["v"], ["v_out"])], "body",
        [info("i", I64, []), info("c", BOOL, []), info("v", F, [1])], [info("c_out", BOOL, []), info("v_out", F, [1])],
    )  # fmt: skip
    m = model([helper.make_node("Loop", ["", "", "v0"], ["v"], body=body)], [info("v0", F, [1])], [info("v", F, [1])])
    with pytest.raises(OnnxError, match=r"Loop, opset 17\): a Loop with no trip count whose body passes"):
        OnnxRunner(m)({"v0": np.ones(1, np.float32)})


def test_a_loop_without_trip_count_or_condition_runs_until_its_body_says_stop(stand_ins):
    m = _counting_loop(False, False)
    feeds = {"acc0": np.zeros(2, np.float32), "x": np.array([1.0, 2.0], np.float32), "limit": np.array(3.5, np.float32)}
    _both(m, feeds)


def _scan_model(opset: int, **attrs) -> object:
    """Scan: state s += x_t * y_t (two scan inputs), scan outputs s and x_t."""
    body = helper.make_graph(
        [helper.make_node("Mul", ["xt", "yt"], ["p"]), helper.make_node("Add", ["s", "p"], ["s_out"]),
         helper.make_node("Identity", ["s_out"], ["o1"]), helper.make_node("Identity", ["xt"], ["o2"])],
        "body", [info("s", F, [3]), info("xt", F, [3]), info("yt", F, [3])],
        [info("s_out", F, [3]), info("o1", F, [3]), info("o2", F, [3])],
    )  # fmt: skip
    if opset == 8:
        node = helper.make_node("Scan", ["", "s0", "x", "y"], ["s", "out1", "out2"], body=body, num_scan_inputs=2,
                                **attrs)  # fmt: skip
        shapes = {"s0": [2, 3], "x": [2, 4, 3], "y": [2, 4, 3]}
    else:
        node = helper.make_node("Scan", ["s0", "x", "y"], ["s", "out1", "out2"], body=body, num_scan_inputs=2, **attrs)
        shapes = {"s0": [3], "x": [4, 3], "y": [3, 4]}
    outs = [info(n, F, None) for n in ("s", "out1", "out2")]
    return model([node], [info(n, F, s) for n, s in shapes.items()], outs, opset=opset), shapes


@pytest.mark.parametrize(
    "attrs",
    [
        {"scan_input_axes": [0, 1]},
        {"scan_input_axes": [0, -1], "scan_input_directions": [1, 0], "scan_output_directions": [0, 1]},
        {"scan_input_axes": [0, 1], "scan_output_axes": [1, -1], "scan_output_directions": [1, 0]},
    ],
)
def test_scan_axes_and_directions(stand_ins, attrs):
    m, shapes = _scan_model(11, **attrs)
    rng = np.random.default_rng(0)
    _both(m, {n: rng.standard_normal(s).astype(np.float32) for n, s in shapes.items()})


def test_scan_8_batches_and_directions(stand_ins):
    m, shapes = _scan_model(8, directions=[1, 0])
    rng = np.random.default_rng(1)
    _both(m, {n: rng.standard_normal(s).astype(np.float32) for n, s in shapes.items()})


# sequences and optionals


def test_sequence_ops_with_negative_positions():
    pos = {n: numpy_helper.from_array(np.array(v, np.int64), n) for n, v in (("m1", -1), ("m2", -2), ("one", 1))}
    nodes = [
        helper.make_node("SplitToSequence", ["x"], ["parts"], axis=1),  # 3 pieces of [2, 1]
        helper.make_node("SequenceInsert", ["parts", "extra", "m1"], ["ins"]),  # before the last
        helper.make_node("SequenceErase", ["ins", "one"], ["era"]),
        helper.make_node("SequenceAt", ["era", "m2"], ["at"]),
        helper.make_node("SequenceLength", ["era"], ["n"]),
        helper.make_node("ConcatFromSequence", ["era"], ["cat"], axis=-1),
        helper.make_node("ConcatFromSequence", ["era"], ["stacked"], axis=-3, new_axis=1),
        helper.make_node("SequenceErase", ["era"], ["last_gone"]),
    ]
    m = model(nodes, [info("x", F, [2, 3]), info("extra", F, [2, 1])],
              [info("at", F, None), info("n", I64, []), info("cat", F, None), info("stacked", F, None),
               seq_info("last_gone", F, None), seq_info("ins", F, None)], list(pos.values()))  # fmt: skip
    _both(m, {"x": np.arange(6, dtype=np.float32).reshape(2, 3), "extra": np.full((2, 1), 9.0, np.float32)})


@pytest.mark.parametrize("split, keepdims", [(None, 0), (None, 1), (2, 1), ([1, 3], 0)])
def test_split_to_sequence(split, keepdims):
    inits = [] if split is None else [numpy_helper.from_array(np.array(split, np.int64), "split")]
    node = helper.make_node("SplitToSequence", ["x"] + ["split"] * bool(inits), ["s"], axis=-1, keepdims=keepdims)
    m = model([node], [info("x", F, [2, 4])], [seq_info("s", F, None)], inits)
    _both(m, {"x": np.arange(8, dtype=np.float32).reshape(2, 4)})


def test_sequence_map_with_a_tensor_input():
    body = helper.make_graph(
        [helper.make_node("Add", ["a", "b"], ["c"]), helper.make_node("Neg", ["a"], ["d"])],
        "body",
        [info("a", F, None), info("b", F, [1])],
        [info("c", F, None), info("d", F, None)],
    )
    nodes = [helper.make_node("SplitToSequence", ["x", "sizes"], ["s"]),
             helper.make_node("SequenceMap", ["s", "b"], ["sum", "neg"], body=body)]  # fmt: skip
    sizes = numpy_helper.from_array(np.array([1, 3, 2], np.int64), "sizes")
    m = model(nodes, [info("x", F, [6]), info("b", F, [1])], [seq_info("sum", F, None), seq_info("neg", F, None)],
              [sizes])  # fmt: skip
    _both(m, {"x": np.arange(6, dtype=np.float32), "b": np.array([10.0], np.float32)})


def test_optionals():
    t = helper.make_tensor_type_proto(F, [2])
    nodes = [helper.make_node("Optional", ["x"], ["full"]), helper.make_node("Optional", [], ["empty"], type=t),
             helper.make_node("OptionalHasElement", ["full"], ["has_full"]),
             helper.make_node("OptionalHasElement", ["empty"], ["has_empty"]),
             helper.make_node("OptionalGetElement", ["full"], ["got"])]  # fmt: skip
    m = model(nodes, [info("x", F, [2])], [info("has_full", BOOL, []), info("has_empty", BOOL, []),
                                           info("got", F, [2])], opset=18)  # fmt: skip
    _both(m, {"x": np.array([1.5, -2.0], np.float32)})


def test_optional_get_element_of_an_empty_optional_names_the_node():
    t = helper.make_tensor_type_proto(F, [2])
    nodes = [helper.make_node("Optional", [], ["e"], type=t), helper.make_node("OptionalGetElement", ["e"], ["y"],
                                                                               name="get")]  # fmt: skip
    run = OnnxRunner(model(nodes, [], [info("y", F, [2])], opset=18))
    with pytest.raises(OnnxError, match=r"node 'get' \(OptionalGetElement, opset 18\): the optional input is empty"):
        run({})


# signal processing


def _dft_model(opset: int, length: int | None, axis: int, **attrs):
    inits = [] if length is None else [numpy_helper.from_array(np.array(length, np.int64), "n")]
    names = ["x", "n" if inits else ""]
    if opset >= 20:
        inits.append(numpy_helper.from_array(np.array(axis, np.int64), "axis"))
        names.append("axis")
    else:
        attrs["axis"] = axis
    node = helper.make_node("DFT", names, ["y"], **attrs)
    return model([node], [info("x", F, None)], [info("y", F, None)], inits, opset=opset)


@pytest.mark.parametrize("opset", [17, 20])
@pytest.mark.parametrize("length", [None, 5, 11])
@pytest.mark.parametrize("inverse", [0, 1])
def test_dft_complex_input_matches_numpy(opset, length, inverse):
    rng = np.random.default_rng(2)
    z = rng.standard_normal((3, 8, 2)) + 1j * rng.standard_normal((3, 8, 2))
    x = np.stack([z.real, z.imag], -1).astype(np.float32)
    want = (np.fft.ifft if inverse else np.fft.fft)(z.astype(np.complex128), n=length, axis=1)
    got = OnnxRunner(_dft_model(opset, length, 1, inverse=inverse))({"x": x})["y"].numpy()
    np.testing.assert_allclose(got[..., 0] + 1j * got[..., 1], want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("length", [None, 7, 12])
def test_rfft_and_irfft_match_numpy(length):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 10, 3, 1)).astype(np.float32)
    got = OnnxRunner(_dft_model(20, length, -3, onesided=1))({"x": x})["y"].numpy()
    want = np.fft.rfft(x[..., 0].astype(np.float64), n=length, axis=1)
    np.testing.assert_allclose(got[..., 0] + 1j * got[..., 1], want, rtol=1e-4, atol=1e-5)
    back = OnnxRunner(_dft_model(20, length, 1, onesided=1, inverse=1))({"x": got})["y"].numpy()
    np.testing.assert_allclose(back[..., 0], np.fft.irfft(want, n=length, axis=1), rtol=1e-4, atol=1e-5)


def test_dft_on_the_complex_axis_is_refused():
    run = OnnxRunner(_dft_model(20, None, -1))
    with pytest.raises(OnnxError, match=r"DFT, opset 20\): axis 2 is out of range for an input of shape"):
        run({"x": np.zeros((2, 4, 1), np.float32)})


@pytest.mark.parametrize("window, onesided", [(False, 1), (True, 1), (True, 0)])
def test_stft_matches_numpy(window, onesided):
    rng = np.random.default_rng(4)
    signal = rng.standard_normal((2, 40, 1)).astype(np.float32)
    win = np.hanning(9).astype(np.float32)
    inits = [
        numpy_helper.from_array(np.array(5, np.int64), "step"),
        numpy_helper.from_array(np.array(9, np.int64), "len"),
    ]
    names = ["signal", "step", "window" if window else "", "len"]
    inputs = [info("signal", F, [2, 40, 1])] + [info("window", F, [9])] * window
    m = model([helper.make_node("STFT", names, ["y"], onesided=onesided)], inputs, [info("y", F, None)], inits)
    feeds = {"signal": signal, "window": win} if window else {"signal": signal}
    got = OnnxRunner(m)(feeds)["y"].numpy()
    frames = np.stack([signal[:, f * 5 : f * 5 + 9, 0] for f in range(1 + (40 - 9) // 5)], 1)
    spectrum = (np.fft.rfft if onesided else np.fft.fft)(frames.astype(np.float64) * (win if window else 1), axis=-1)
    np.testing.assert_allclose(got[..., 0] + 1j * got[..., 1], spectrum, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("op", ["HannWindow", "HammingWindow", "BlackmanWindow"])
@pytest.mark.parametrize("periodic", [0, 1])
@pytest.mark.parametrize("size", [1, 2, 7])
def test_windows_match_onnxruntime(op, periodic, size):
    size_init = numpy_helper.from_array(np.array(size, np.int64), "size")
    m = model([helper.make_node(op, ["size"], ["w"], periodic=periodic, output_datatype=TensorProto.DOUBLE)], [],
              [info("w", TensorProto.DOUBLE, None)], [size_init])  # fmt: skip
    (want,) = ort_run(m, {})
    got = OnnxRunner(m)({})["w"].numpy()
    assert got.dtype == want.dtype == np.float64
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)  # NaN where onnxruntime has NaN


@pytest.mark.parametrize("mels, length, rate, low, high", [(8, 16, 8192, 0.0, 4096.0), (10, 64, 16000, 60.0, 7600.0)])
def test_mel_weight_matrix_matches_onnxruntime(mels, length, rate, low, high):
    values = {"mels": (mels, np.int64), "length": (length, np.int64), "rate": (rate, np.int64),
              "low": (low, np.float32), "high": (high, np.float32)}  # fmt: skip
    inits = [numpy_helper.from_array(np.array(v, t), n) for n, (v, t) in values.items()]
    m = model([helper.make_node("MelWeightMatrix", list(values), ["w"])], [], [info("w", F, None)], inits)
    (want,) = ort_run(m, {})
    np.testing.assert_allclose(OnnxRunner(m)({})["w"].numpy(), want, rtol=1e-6, atol=1e-7)
