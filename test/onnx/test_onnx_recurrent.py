"""RNN, GRU and LSTM against onnxruntime on what ONNX's suite leaves out: sequence_lens, initial states, clip,
other activations with alpha/beta, linear_before_reset, input_forget, layout, both directions, older opsets."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")
from onnx import TensorProto, helper
from onnx_models import info, model, ort_run

from zeptograd.onnx import OnnxError, OnnxRunner

# ONNX ops' graphs: the IR round trip of every graph built (conftest) is the IR tests' job
pytestmark = pytest.mark.no_roundtrip

F = TensorProto.FLOAT
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
# an unrolled GRU's or LSTM's graph takes tens of seconds to round-trip through pyrender after the test; the RNN
# cases round-trip the same kinds of nodes
big_graph = pytest.mark.no_roundtrip
KINDS = ["RNN", pytest.param("GRU", marks=big_graph), pytest.param("LSTM", marks=big_graph)]


def _case(kind: str, *, seq=4, batch=3, inp=2, hidden=3, dirs=1, lens=None, layout=0, initial=False, peep=False,
          seed=0, **attrs):  # fmt: skip
    """A one-node model of `kind` with its inputs (random), the feeds, and the output names."""
    rng = np.random.default_rng(seed)
    g = GATES[kind]
    feeds = {
        "X": rng.standard_normal((batch, seq, inp) if layout else (seq, batch, inp)).astype(np.float32),
        "W": rng.standard_normal((dirs, g * hidden, inp)).astype(np.float32) * 0.7,
        "R": rng.standard_normal((dirs, g * hidden, hidden)).astype(np.float32) * 0.7,
        "B": rng.standard_normal((dirs, 2 * g * hidden)).astype(np.float32) * 0.3,
    }
    names = ["X", "W", "R", "B", "", ""]
    if lens is not None:
        feeds["sequence_lens"] = np.array(lens, np.int32)
        names[4] = "sequence_lens"
    state_shape = (batch, dirs, hidden) if layout else (dirs, batch, hidden)
    if initial:
        feeds["initial_h"] = rng.standard_normal(state_shape).astype(np.float32)
        names[5] = "initial_h"
        if kind == "LSTM":
            feeds["initial_c"] = rng.standard_normal(state_shape).astype(np.float32)
            names.append("initial_c")
    if peep:
        names += [""] * (7 - len(names)) + ["P"]
        feeds["P"] = rng.standard_normal((dirs, 3 * hidden)).astype(np.float32)
    outputs = ["Y", "Y_h", "Y_c"][: 3 if kind == "LSTM" else 2]
    node = helper.make_node(kind, names, outputs, hidden_size=hidden, layout=layout, **attrs)
    elem = {"sequence_lens": TensorProto.INT32}
    inputs = [info(n, elem.get(n, F), list(v.shape)) for n, v in feeds.items()]
    return model([node], inputs, [info(o, F, None) for o in outputs], opset=14), feeds


def _check(m, feeds, rtol=1e-4, atol=1e-5):
    want = ort_run(_seq_major(m), _seq_major_feeds(feeds)) if _layout(m) else ort_run(m, feeds)
    if _layout(m):  # onnxruntime has no batch-major layout: its sequence-major results, transposed
        want = [want[0].transpose(2, 0, 1, 3)] + [w.transpose(1, 0, 2) for w in want[1:]]
    got = OnnxRunner(m)(feeds)
    for out, w in zip(m.graph.output, want, strict=True):
        np.testing.assert_allclose(got[out.name].numpy(), w, rtol=rtol, atol=atol, err_msg=out.name)


def _layout(m) -> int:
    return next((a.i for a in m.graph.node[0].attribute if a.name == "layout"), 0)


def _seq_major(m):
    """The same model with layout 0 and sequence-major inputs."""
    m = type(m).FromString(m.SerializeToString())
    node = m.graph.node[0]
    next(a for a in node.attribute if a.name == "layout").i = 0
    for value in m.graph.input:
        dims = value.type.tensor_type.shape.dim
        if value.name in ("X", "initial_h", "initial_c"):
            first, second = dims[0].dim_value, dims[1].dim_value
            dims[0].dim_value, dims[1].dim_value = second, first
    return m


def _seq_major_feeds(feeds: dict) -> dict:
    swap = ("X", "initial_h", "initial_c")
    return {k: (np.ascontiguousarray(v.swapaxes(0, 1)) if k in swap else v) for k, v in feeds.items()}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_sequence_lens_and_initial_states(kind, direction):
    dirs = 2 if direction == "bidirectional" else 1
    _check(*_case(kind, dirs=dirs, direction=direction, lens=[4, 2, 1], initial=True))


@pytest.mark.parametrize("kind", KINDS)
def test_layout_1_bidirectional_with_lengths(kind):
    _check(*_case(kind, dirs=2, direction="bidirectional", layout=1, lens=[3, 4, 2], initial=True))


@pytest.mark.parametrize("kind", KINDS)
def test_clip(kind):
    _check(*_case(kind, clip=0.4, initial=True, seed=3))


def test_rnn_activations_with_alpha_and_beta_per_direction():
    m, feeds = _case("RNN", dirs=2, direction="bidirectional", activations=["LeakyRelu", "HardSigmoid"],
                     activation_alpha=[0.3, 0.25], activation_beta=[0.4])  # fmt: skip
    _check(m, feeds)


@big_graph
@pytest.mark.parametrize("acts", [["Relu", "Affine"], ["Softsign", "ScaledTanh"], ["ThresholdedRelu", "Elu"]])
def test_gru_activations(acts):
    m, feeds = _case("GRU", activations=acts, activation_alpha=[0.5, 0.8], activation_beta=[0.2, 0.7], seed=5)
    _check(m, feeds)


@big_graph
def test_gru_linear_before_reset_bidirectional_with_lengths():
    _check(*_case("GRU", dirs=2, direction="bidirectional", linear_before_reset=1, lens=[2, 4, 3], initial=True))


@big_graph
def test_lstm_peepholes_input_forget_and_softplus():
    m, feeds = _case("LSTM", peep=True, input_forget=1, activations=["Sigmoid", "Softplus", "Tanh"], initial=True)
    _check(m, feeds)


@big_graph
def test_lstm_opset_7_without_layout():
    m, feeds = _case("LSTM", direction="reverse")
    del m.graph.node[0].attribute[[a.name for a in m.graph.node[0].attribute].index("layout")]
    m.opset_import[0].version = 7
    _check(m, feeds)


def test_layout_is_refused_before_opset_14():
    m, _ = _case("GRU")
    m.opset_import[0].version = 13
    with pytest.raises(OnnxError, match=r"GRU, opset 13\): unsupported attribute layout"):
        OnnxRunner(m)


def test_an_unknown_activation_names_it():
    m, feeds = _case("RNN", activations=["Swish"])
    with pytest.raises(OnnxError, match=r"RNN, opset 14\): activation 'Swish' is not supported"):
        OnnxRunner(m)(feeds)
