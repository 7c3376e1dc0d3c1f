"""OnnxRunner: what it refuses before running (ops, attributes, dtypes, undefined values), how it takes inputs and
models, and that a model with shape arithmetic runs under TinyJit reading nothing back, checked against
onnxruntime and numpy."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")
import onnx
import onnx_models
from onnx import TensorProto, helper, numpy_helper
from onnx_models import info, model, ort_run

from zeptograd import Tensor, TinyJit
from zeptograd.onnx import OnnxError, OnnxRunner
from zeptograd.onnx.backend import ZeptogradBackend

# ONNX ops' graphs: the IR round trip of every graph built (conftest) is the IR tests' job
pytestmark = pytest.mark.no_roundtrip

OPSET = 17
F, I64 = TensorProto.FLOAT, TensorProto.INT64


# refused at construction


def test_unsupported_op_names_node_op_and_opset():
    # SequenceMap exists from opset 17: at opset 16 no implementation serves it
    m = model(
        [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("SequenceMap", ["s"], ["y"], name="mapper",
                                                                   body=helper.make_graph([], "b", [], []))],
        [info("x", F, [2]), helper.make_tensor_sequence_value_info("s", F, None)],
        [helper.make_tensor_sequence_value_info("y", F, None)],
        opset=16,
    )  # fmt: skip
    with pytest.raises(OnnxError, match=r"node 'mapper' \(SequenceMap, opset 16\).*does not implement"):
        OnnxRunner(m)


def test_unknown_op_in_a_subgraph_is_refused_before_running():
    branch = helper.make_graph([helper.make_node("NoSuchOp", ["x"], ["z"], name="inner")], "b", [], [info("z", F, [2])])
    m = model(
        [helper.make_node("If", ["c"], ["y"], then_branch=branch, else_branch=branch)],
        [info("c", TensorProto.BOOL, []), info("x", F, [2])],
        [info("y", F, [2])],
    )
    with pytest.raises(OnnxError, match=r"node 'inner' \(NoSuchOp, opset 17\)"):
        OnnxRunner(m)


def test_unknown_attribute_names_node_op_and_attribute():
    m = model([helper.make_node("Relu", ["x"], ["y"], name="r", alpha=0.5)], [info("x", F, [2])], [info("y", F, [2])])
    with pytest.raises(OnnxError, match=r"node 'r' \(Relu, opset 17\): unsupported attribute alpha"):
        OnnxRunner(m)


def test_a_nameless_node_is_named_by_its_outputs():
    m = model([helper.make_node("Relu", ["x"], ["out"], beta=1)], [info("x", F, [2])], [info("out", F, [2])])
    with pytest.raises(OnnxError, match=r"node making out \(Relu"):
        OnnxRunner(m)


@pytest.mark.parametrize(
    "elem, name",
    [(TensorProto.STRING, "STRING"), (TensorProto.COMPLEX64, "COMPLEX64"), (TensorProto.FLOAT4E2M1, "FLOAT4E2M1")],
)
def test_an_input_of_a_missing_dtype_is_refused_by_name(elem, name):
    m = model([helper.make_node("Identity", ["x"], ["y"])], [info("x", elem, [2])], [info("y", elem, [2])])
    with pytest.raises(OnnxError, match=rf"'x'.*{name}"):
        OnnxRunner(m)


@pytest.mark.parametrize(
    "tensor, name",
    [
        (helper.make_tensor("w", TensorProto.STRING, [1], [b"a"]), "STRING"),
        (helper.make_tensor("w", TensorProto.FLOAT4E2M1, [2], [1.0, -2.0]), "FLOAT4E2M1"),
        (helper.make_tensor("w", TensorProto.COMPLEX128, [1], [1 + 2j]), "COMPLEX128"),
    ],
)
def test_an_initializer_of_a_missing_dtype_is_refused_by_name(tensor, name):
    m = model([helper.make_node("Identity", ["w"], ["y"])], [], [info("y", tensor.data_type, [None])], [tensor])
    with pytest.raises(OnnxError, match=rf"initializer 'w'.*{name}"):
        OnnxRunner(m)


def test_a_sequence_input_of_a_missing_dtype_is_refused_by_name():
    seq = helper.make_tensor_sequence_value_info("s", TensorProto.STRING, None)
    m = model([helper.make_node("SequenceLength", ["s"], ["n"])], [seq], [info("n", I64, [])])
    with pytest.raises(OnnxError, match=r"'s'.*STRING"):
        OnnxRunner(m)


def test_an_undefined_value_is_refused_at_construction():
    m = model([helper.make_node("Add", ["x", "nowhere"], ["y"], name="add")], [info("x", F, [2])], [info("y", F, [2])])
    with pytest.raises(OnnxError, match=r"node 'add' \(Add\): input 'nowhere' is not"):
        OnnxRunner(m)


# inputs


def _relu_model() -> onnx.ModelProto:
    return model([helper.make_node("Relu", ["x"], ["y"])], [info("x", F, [3])], [info("y", F, [3])])


def test_inputs_as_numpy_or_tensor_match_onnxruntime():
    m, x = _relu_model(), np.array([-1.5, 0.0, 2.5], np.float32)
    (want,) = ort_run(m, {"x": x})
    run = OnnxRunner(m)
    np.testing.assert_array_equal(run({"x": x})["y"].numpy(), want)
    np.testing.assert_array_equal(run({"x": Tensor(x)})["y"].numpy(), want)
    np.testing.assert_array_equal(run(x=x)["y"].numpy(), want)


def test_missing_unknown_and_mistyped_inputs_say_what_is_wrong():
    run = OnnxRunner(_relu_model())
    with pytest.raises(OnnxError, match="missing input x"):
        run({})
    with pytest.raises(OnnxError, match=r"unknown input z; the model's inputs are \['x'\]"):
        run({"x": np.zeros(3, np.float32), "z": np.zeros(3, np.float32)})
    with pytest.raises(OnnxError, match="input 'x' must be float32, got int64"):
        run({"x": np.zeros(3, np.int64)})
    with pytest.raises(OnnxError, match=r"input 'x' must have rank 1, got \(3, 1\)"):
        run({"x": np.zeros((3, 1), np.float32)})
    with pytest.raises(OnnxError, match="input 'x' is a tensor, got a list"):
        run({"x": [np.zeros(3, np.float32)]})
    with pytest.raises(OnnxError, match="no dtype for numpy's <U1"):
        run({"x": np.array(["a", "b", "c"])})


def test_a_sequence_input_must_be_a_list():
    seq = helper.make_tensor_sequence_value_info("s", F, None)
    run = OnnxRunner(model([helper.make_node("SequenceLength", ["s"], ["n"])], [seq], [info("n", I64, [])]))
    assert run({"s": [np.zeros(2, np.float32)] * 3})["n"].numpy().tolist() == 3
    with pytest.raises(OnnxError, match="input 's' is a sequence: give a list of tensors"):
        run({"s": np.zeros(2, np.float32)})


def test_a_0d_input_stays_0d():
    m = model([helper.make_node("Neg", ["x"], ["y"])], [info("x", F, [])], [info("y", F, [])])
    (want,) = ort_run(m, {"x": np.array(2.5, np.float32)})
    got = OnnxRunner(m)({"x": np.array(2.5, np.float32)})["y"].numpy()
    assert got.shape == want.shape == ()
    np.testing.assert_array_equal(got, want)


# models


def test_a_path_bytes_and_a_model_proto_all_run(tmp_path):
    m, x = _relu_model(), np.array([-1.0, 2.0, -3.0], np.float32)
    path = tmp_path / "relu.onnx"
    onnx.save(m, path)
    (want,) = ort_run(m, {"x": x})
    for source in (path, str(path), m.SerializeToString(), m):
        np.testing.assert_array_equal(OnnxRunner(source)({"x": x})["y"].numpy(), want)
    with pytest.raises(FileNotFoundError, match="no such file"):
        OnnxRunner(tmp_path / "missing.onnx")
    with pytest.raises(TypeError, match="path, bytes or an onnx.ModelProto, got int"):
        OnnxRunner(3)


# shape arithmetic and TinyJit


@pytest.fixture
def shape_ops(monkeypatch):
    """Shape, Gather, Concat, MatMul in the op table (test-only stand-ins where none is registered)."""
    onnx_models.install(monkeypatch, OPSET)


def _shape_arithmetic_model() -> onnx.ModelProto:
    """x [b, 4] -> relu(x @ W) [b, 6] -> reshape to [b, 2, 3] through Shape -> Gather -> Concat -> Reshape ->
    -(.) + bias, and a Loop adding x's column sums b times (its trip count from the shape too)."""
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(rng.standard_normal((4, 6)).astype(np.float32), "W"),
        numpy_helper.from_array(rng.standard_normal(3).astype(np.float32), "bias"),
        numpy_helper.from_array(np.array([0], np.int64), "zero"),
        numpy_helper.from_array(np.array([2, 3], np.int64), "tail"),
    ]
    body = helper.make_graph(
        [helper.make_node("Identity", ["c"], ["c_out"]), helper.make_node("Add", ["acc", "row"], ["acc_out"]),
         helper.make_node("Neg", ["acc_out"], ["neg"])],
        "body",
        [info("i", I64, []), info("c", TensorProto.BOOL, []), info("acc", F, [4])],
        [info("c_out", TensorProto.BOOL, []), info("acc_out", F, [4]), info("neg", F, [4])],
    )  # fmt: skip
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["xw"]),
        helper.make_node("Relu", ["xw"], ["h"]),
        helper.make_node("Shape", ["h"], ["hs"]),
        helper.make_node("Gather", ["hs", "zero"], ["b"], axis=0),
        helper.make_node("Concat", ["b", "tail"], ["new_shape"], axis=0),
        helper.make_node("Reshape", ["h", "new_shape"], ["h3"]),
        helper.make_node("Neg", ["h3"], ["n3"]),
        helper.make_node("Add", ["n3", "bias"], ["y"]),
        helper.make_node("Gather", ["hs", "zero_scalar"], ["trips"], axis=0),
        helper.make_node("Gather", ["x", "zero_scalar"], ["row"], axis=0),
        helper.make_node("Loop", ["trips", "", "row"], ["total", "partials"], body=body),
    ]
    inits.append(numpy_helper.from_array(np.array(0, np.int64), "zero_scalar"))
    return model(nodes, [info("x", F, ["b", 4])], [info("y", F, ["b", 2, 3]), info("total", F, [4]),
                                                    info("partials", F, [None, 4])], inits)  # fmt: skip


def test_shape_arithmetic_matches_onnxruntime_for_each_batch_size(shape_ops):
    m = _shape_arithmetic_model()
    run = OnnxRunner(m)
    rng = np.random.default_rng(1)
    for batch in (2, 5, 2, 1):
        x = rng.standard_normal((batch, 4)).astype(np.float32)
        want = ort_run(m, {"x": x})
        got = run({"x": x})
        for name, w in zip(("y", "total", "partials"), want, strict=True):
            np.testing.assert_allclose(got[name].numpy(), w, rtol=1e-5, atol=1e-6, err_msg=f"{name}, batch {batch}")


def test_shape_arithmetic_under_tinyjit_reads_nothing_back(shape_ops):
    m = _shape_arithmetic_model()
    run = OnnxRunner(m)

    @TinyJit
    def step(x: Tensor) -> tuple[Tensor, ...]:
        out = run({"x": x})
        return out["y"], out["total"], out["partials"]

    rng = np.random.default_rng(2)
    for _ in range(5):  # the second call captures (a read back would be a JitError), the later ones replay
        x = rng.standard_normal((3, 4)).astype(np.float32)
        want = ort_run(m, {"x": x})
        got = step(Tensor(x))
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g.numpy(), w, rtol=1e-5, atol=1e-6)
    assert step.captured and step.kernel_count > 0


def test_an_initializer_given_as_an_input_is_not_taken_for_a_constant():
    shape = numpy_helper.from_array(np.array([2, 3], np.int64), "shape")
    m = model([helper.make_node("Reshape", ["x", "shape"], ["y"])], [info("x", F, [6])], [info("y", F, None)],
              [shape])  # fmt: skip
    run = OnnxRunner(m)
    x = np.arange(6, dtype=np.float32)
    assert run({"x": x})["y"].shape == (2, 3)
    np.testing.assert_array_equal(run({"x": x, "shape": np.array([3, 2])})["y"].numpy(), x.reshape(3, 2))
    assert run({"x": x})["y"].shape == (2, 3)


# the backend


def test_backend_returns_sequences_as_lists_and_empty_optionals_as_none():
    seq = helper.make_tensor_sequence_value_info
    opt = helper.make_tensor_type_proto(F, [2])
    m = model(
        [helper.make_node("SplitToSequence", ["x"], ["parts"], axis=0, keepdims=0),
         helper.make_node("Optional", [], ["none"], type=opt)],
        [info("x", F, [3, 2])],
        [seq("parts", F, None), helper.make_value_info("none", helper.make_optional_type_proto(opt))],
    )  # fmt: skip
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    parts, none = ZeptogradBackend.run_model(m, [x])
    assert none is None
    assert isinstance(parts, list) and len(parts) == 3
    for got, want in zip(parts, ort_run(model(m.graph.node[:1], m.graph.input, m.graph.output[:1]), {"x": x})[0]):
        np.testing.assert_array_equal(got, want)
