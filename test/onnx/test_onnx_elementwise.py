"""The elementwise, reduction, cast, quantization and random ONNX ops where ONNX's node suite does not reach: the
opsets before 7 (their broadcast/axis attributes), attribute-axis reductions, casts of every source type into
the fp8 formats, per-row quantized matrix products, and the random ops' shapes, ranges and seeds.

The oracles are onnx's reference evaluator, numpy (where the reference has no implementation or disagrees with
the specification) and, for the random ops, exact properties and frequencies.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

pytest.importorskip("onnx")
import ml_dtypes
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from zeptograd.onnx import OnnxError
from zeptograd.onnx.backend import ZeptogradBackend

# ONNX ops' graphs: the IR round trip of every graph built (conftest) is the IR tests' job
pytestmark = pytest.mark.no_roundtrip


def _model(op: str, inputs: list[np.ndarray], attrs: dict, opset: int, out_types: list[int]) -> object:
    """A one-node model of `op` over inputs i0, i1, ... with outputs o0, o1, ... of the given element types."""
    ins = [
        helper.make_tensor_value_info(f"i{k}", helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
        for k, a in enumerate(inputs)
    ]
    outs = [helper.make_tensor_value_info(f"o{k}", t, None) for k, t in enumerate(out_types)]
    node = helper.make_node(op, [f"i{k}" for k in range(len(inputs))], [f"o{k}" for k in range(len(outs))], **attrs)
    graph = helper.make_graph([node], op, ins, outs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)


def _run(op: str, inputs: list[np.ndarray], attrs: dict, opset: int, out_types: list[int]) -> list[np.ndarray]:
    return ZeptogradBackend.run_model(_model(op, inputs, attrs, opset, out_types), inputs)


def _against_reference(op: str, inputs: list[np.ndarray], attrs: dict, opset: int, n_out: int = 1, rtol=1e-6):
    """zeptograd's outputs equal onnx's reference evaluator's: same dtype, same shape, same values (NaN where it
    has NaN; floats to `rtol`)."""
    untyped = _model(op, inputs, attrs, opset, [TensorProto.UNDEFINED] * n_out)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = ReferenceEvaluator(untyped).run(None, {f"i{k}": a for k, a in enumerate(inputs)})
    got = _run(op, inputs, attrs, opset, [helper.np_dtype_to_tensor_dtype(np.asarray(w).dtype) for w in want])
    for w, g in zip(want, got, strict=True):
        w = np.asarray(w)
        assert (g.dtype, g.shape) == (w.dtype, w.shape)
        if w.dtype.kind in "iub":
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol, equal_nan=True)


_RNG = np.random.default_rng(0)
_X = (_RNG.standard_normal((2, 3, 4, 5)) * 3).astype(np.float32)

# *** opsets 1-6: B broadcasts into A from `axis` (numpy's rule when no axis) ***


@pytest.mark.parametrize("op,fn", [("Add", np.add), ("Sub", np.subtract), ("Mul", np.multiply), ("Div", np.divide)])
@pytest.mark.parametrize("opset", [1, 6])
def test_legacy_broadcast_from_axis(op, fn, opset):
    b = _RNG.standard_normal((3, 4)).astype(np.float32)
    (got,) = _run(op, [_X, b], {"broadcast": 1, "axis": 1}, opset, [TensorProto.FLOAT])
    np.testing.assert_allclose(got, fn(_X, b.reshape(3, 4, 1)), rtol=1e-6)
    tail = _RNG.standard_normal((5,)).astype(np.float32)
    (got,) = _run(op, [_X, tail], {"broadcast": 1}, opset, [TensorProto.FLOAT])
    np.testing.assert_allclose(got, fn(_X, tail), rtol=1e-6)


def test_legacy_comparison_broadcast_from_axis():
    b = _RNG.standard_normal((4,)).astype(np.float32)
    (got,) = _run("Greater", [_X, b], {"broadcast": 1, "axis": 2}, 1, [TensorProto.BOOL])
    np.testing.assert_array_equal(got, _X > b.reshape(4, 1))


def test_legacy_shapes_differ_without_broadcast():
    with pytest.raises(OnnxError, match=r"broadcast=1"):
        _run("Add", [_X, _X[0]], {}, 6, [TensorProto.FLOAT])


# *** opsets the suite does not reach, against the reference ***


@pytest.mark.parametrize(
    "op,inputs,attrs,opset",
    [
        ("Clip", [_X], {"min": -1.0, "max": 2.0}, 6),
        ("Clip", [_X.astype(np.int32), np.array(-2, np.int32)], {}, 13),  # max absent
        ("Selu", [_X], {}, 6),
        ("ReduceSum", [_X], {"axes": [1, -1], "keepdims": 0}, 11),
        ("ReduceMean", [_X], {"axes": [0, 2]}, 13),
        ("ReduceMax", [_X.astype(np.int64)], {"axes": [3], "keepdims": 0}, 13),
        ("ReduceMin", [_X[:, :0]], {"axes": [1]}, 13),  # nothing to reduce: the dtype's highest value
        ("ReduceMax", [_X.astype(np.int32)[:, :0]], {"axes": [1]}, 13),  # nothing: the dtype's lowest
        ("ReduceL2", [_X], {"axes": [2]}, 13),
        ("ReduceLogSumExp", [_X * 30], {"axes": [3]}, 13),  # exp(90) overflows float32
        ("ReduceSumSquare", [_X, np.array([], np.int64)], {"noop_with_empty_axes": 1}, 18),
        ("ReduceL1", [_X, np.array([], np.int64)], {"noop_with_empty_axes": 1}, 18),
        ("ReduceProd", [_X.astype(np.int64) % 3 + 1, np.array([-1], np.int64)], {"keepdims": 0}, 18),
        ("ArgMax", [np.floor(_X)], {"axis": 2, "keepdims": 0}, 11),
        ("ArgMin", [np.floor(_X)], {"axis": -1, "select_last_index": 1}, 13),
        ("CumSum", [_X.astype(np.int64), np.array(-2, np.int64)], {"exclusive": 1, "reverse": 1}, 14),
        ("CumProd", [_X % 2 + 0.5, np.array(1, np.int32)], {"exclusive": 1}, 26),
        ("IsInf", [np.array([np.inf, -np.inf, 1.0, np.nan], np.float32)], {"detect_positive": 0}, 20),
        (
            "BitShift",
            [np.array([-8, 7, -1, 1], np.int32), np.array([1, 2, 31, 33], np.int32)],
            {"direction": "RIGHT"},
            28,
        ),
        ("Mod", [np.array([-7, 7, -7, 7], np.int32), np.array([3, -3, -3, 3], np.int32)], {}, 13),
        ("Mod", [np.array([-7.5, 7.5], np.float64), np.array([2.0, -2.0], np.float64)], {"fmod": 1}, 13),
        ("Div", [np.array([-7, 7, -7, 7], np.int64), np.array([2, -2, -2, 2], np.int64)], {}, 14),
        ("Round", [np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5], np.float16)], {}, 22),
    ],
)
def test_matches_reference(op, inputs, attrs, opset):
    _against_reference(op, inputs, attrs, opset, rtol=1e-5)


def test_integer_base_to_integral_float_power_is_exact():
    # a float64 pow lands a few ulps below 729, which truncation would make 728
    x, y = np.array([1, 2, 3, 2], np.int32), np.array([4.0, 5.0, 6.0, 0.5], np.float32)
    (got,) = _run("Pow", [x, y], {}, 15, [TensorProto.INT32])
    np.testing.assert_array_equal(got, [1, 32, 729, 1])


# *** casts into fp8: saturating and not, from every source type ***

_CAST_VALUES = [0, 1, -1, 0.5, 2.5, 3.3, -100, 200, 448, 464, 465, 500, 1000, 57344, 61440, 70000, 1e-3, 1e-9]


@pytest.mark.parametrize("to", [TensorProto.FLOAT8E4M3FN, TensorProto.FLOAT8E5M2])
@pytest.mark.parametrize("saturate", [0, 1])
@pytest.mark.parametrize(
    "src", [np.float32, np.float16, np.float64, ml_dtypes.bfloat16, ml_dtypes.float8_e5m2, np.int32, np.uint16]
)
def test_cast_to_fp8(src, to, saturate):
    values = np.array(_CAST_VALUES + ([np.nan, np.inf, -np.inf] if np.dtype(src).kind not in "iu" else []))
    if np.dtype(src).kind in "iu":
        info = np.iinfo(src)
        values = values[(values == np.trunc(values)) & (values >= info.min) & (values <= info.max)]
    _against_reference("Cast", [values.astype(src)], {"to": to, "saturate": saturate}, 21)


def test_cast_to_a_type_zeptograd_lacks_names_it():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    nodes = [helper.make_node("Cast", ["x"], ["t"], to=TensorProto.FLOAT4E2M1)]
    nodes.append(helper.make_node("Cast", ["t"], ["y"], to=1))
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y]), opset_imports=[helper.make_opsetid("", 21)])
    with pytest.raises(OnnxError, match=r"Cast.*FLOAT4E2M1"):
        ZeptogradBackend.run_model(model, [np.array([1.0, 2.0], np.float32)])


# *** quantization: blocks, and the per-row zero points and scales of A (the reference broadcasts them wrongly) ***


def test_blocked_quantization_with_a_partial_block():
    scale = (_RNG.random((2, 2, 4, 5)) + 0.2).astype(np.float32)  # blocks of 2 along an axis of 3
    zero = _RNG.integers(-5, 5, (2, 2, 4, 5)).astype(np.int8)
    _against_reference("QuantizeLinear", [_X * 10, scale, zero], {"axis": 1, "block_size": 2}, 21)
    q = (_X * 10).astype(np.int8)
    _against_reference("DequantizeLinear", [q, scale, zero], {"axis": 1, "block_size": 2}, 21)


def test_matmul_integer_per_row_and_column_zero_points():
    a = _RNG.integers(0, 255, (3, 5)).astype(np.uint8)
    b = _RNG.integers(-128, 127, (5, 4)).astype(np.int8)
    za, zb = np.array([1, 2, 3], np.uint8), np.array([1, -2, 3, 4], np.int8)
    (got,) = _run("MatMulInteger", [a, b, za, zb], {}, 10, [TensorProto.INT32])
    want = (a.astype(np.int32) - za.reshape(3, 1).astype(np.int32)) @ (b.astype(np.int32) - zb.astype(np.int32))
    np.testing.assert_array_equal(got, want)


def test_qlinear_matmul_per_row_and_column_scales():
    a = _RNG.integers(0, 100, (3, 5)).astype(np.uint8)
    b = _RNG.integers(0, 100, (5, 4)).astype(np.uint8)
    sa, za = np.array([0.05, 0.06, 0.07], np.float32), np.array([7, 8, 9], np.uint8)
    sb, zb = np.array([0.02, 0.03, 0.04, 0.05], np.float32), np.array([9, 1, 2, 3], np.uint8)
    sy, zy = np.array(0.3, np.float32), np.array(5, np.uint8)
    (got,) = _run("QLinearMatMul", [a, sa, za, b, sb, zb, sy, zy], {}, 21, [TensorProto.UINT8])
    acc = (a.astype(np.int32) - za.reshape(3, 1)) @ (b.astype(np.int32) - zb)
    want = np.clip(np.rint(acc * (sa.reshape(3, 1) * sb / sy).astype(np.float64) + 5), 0, 255).astype(np.uint8)
    np.testing.assert_array_equal(got, want)


# *** random draws ***


def test_random_uniform_range_shape_dtype_and_seed():
    attrs = {"shape": [200, 50], "low": -2.0, "high": 3.0, "dtype": TensorProto.DOUBLE, "seed": 5.0}
    (a,) = _run("RandomUniform", [], attrs, 22, [TensorProto.DOUBLE])
    (b,) = _run("RandomUniform", [], attrs, 22, [TensorProto.DOUBLE])
    (c,) = _run("RandomUniform", [], dict(attrs, seed=6.0), 22, [TensorProto.DOUBLE])
    assert a.shape == (200, 50) and a.dtype == np.float64
    assert a.min() >= -2.0 and a.max() < 3.0
    assert abs(a.mean() - 0.5) < 0.1 and abs(a.std() - 5 / np.sqrt(12)) < 0.1
    np.testing.assert_array_equal(a, b)  # one seed, one draw
    assert not np.array_equal(a, c)


def test_random_normal_like_moments_and_dtype():
    x = np.zeros((100, 100), np.float16)
    (y,) = _run("RandomNormalLike", [x], {"mean": 2.0, "scale": 0.5}, 22, [TensorProto.FLOAT16])
    assert y.shape == x.shape and y.dtype == np.float16
    assert abs(float(y.astype(np.float64).mean()) - 2.0) < 0.03
    assert abs(float(y.astype(np.float64).std()) - 0.5) < 0.03
    (z,) = _run("RandomUniformLike", [x], {"dtype": TensorProto.FLOAT}, 22, [TensorProto.FLOAT])
    assert z.dtype == np.float32 and z.shape == x.shape and 0 <= z.min() and z.max() < 1


def test_bernoulli_extremes_and_frequency():
    p = np.concatenate([np.zeros(100), np.ones(100), np.full(10000, 0.3)])
    (y,) = _run("Bernoulli", [p], {}, 22, [TensorProto.DOUBLE])
    assert y.dtype == np.float64 and set(np.unique(y)) <= {0.0, 1.0}
    assert (y[:100] == 0).all() and (y[100:200] == 1).all()
    assert abs(y[200:].mean() - 0.3) < 0.03
    (b,) = _run("Bernoulli", [p.astype(np.float32)], {"dtype": TensorProto.BOOL}, 22, [TensorProto.BOOL])
    assert b.dtype == np.bool_ and not b[:100].any() and b[100:200].all()
