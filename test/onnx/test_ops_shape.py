"""The shape, indexing, creation and sorting ONNX ops at the opsets and on the edge cases that ONNX's conformance
suite leaves out (old attribute forms, negative steps, clamped bounds, uneven splits, pad modes...), each checked
against onnx's reference implementation, onnxruntime or numpy."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from zeptograd.onnx.dtypes import to_numpy  # noqa: E402
from zeptograd.onnx.registry import OnnxError  # noqa: E402
from zeptograd.onnx.runner import OnnxRunner  # noqa: E402

# ONNX ops' graphs: the IR round trip of every graph built (conftest) is the IR tests' job
pytestmark = pytest.mark.no_roundtrip

I64_MAX, I64_MIN = np.iinfo(np.int64).max, np.iinfo(np.int64).min


def _model(op: str, inputs: dict[str, np.ndarray | None], n_outputs: int, opset: int, **attrs) -> onnx.ModelProto:
    names = [name if value is not None else "" for name, value in inputs.items()]
    node = helper.make_node(op, names, [f"y{i}" for i in range(n_outputs)], **attrs)
    given = [
        helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
        for name, v in inputs.items()
        if v is not None
    ]
    outs = [onnx.ValueInfoProto(name=f"y{i}") for i in range(n_outputs)]  # the types are left to inference
    graph = helper.make_graph([node], "g", given, outs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def _run(model: onnx.ModelProto, inputs: dict[str, np.ndarray | None]) -> list[np.ndarray]:
    given = {k: v for k, v in inputs.items() if v is not None}
    out = OnnxRunner(model)(given)
    return [to_numpy(out[o.name]) for o in model.graph.output]


def _check(op: str, inputs: dict, opset: int, n_outputs: int = 1, oracle: str = "reference", **attrs) -> None:
    model = _model(op, inputs, n_outputs, opset, **attrs)
    given = {k: v for k, v in inputs.items() if v is not None}
    if oracle == "reference":
        want = ReferenceEvaluator(model).run(None, given)
    else:
        import onnxruntime

        sess = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        want = sess.run(None, given)
    got = _run(model, inputs)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        w = np.asarray(w)
        assert g.dtype == w.dtype, (g.dtype, w.dtype)
        assert g.shape == w.shape, (g.shape, w.shape)
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=1e-6, atol=1e-6)


def _i64(*v) -> np.ndarray:
    return np.array(v, dtype=np.int64)


X3 = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
X2 = np.arange(20, dtype=np.float32).reshape(4, 5)


@pytest.mark.parametrize(
    "starts, ends, axes, steps",
    [
        ([0, 3], [-1, I64_MAX], [0, 1], [1, 1]),
        ([-1], [I64_MIN], [1], [-1]),  # from the end back through index 0
        ([10], [-10], [0], [-2]),  # clamped both ways, walking backwards
        ([3, -100], [0, 100], [1, -1], [-1, 2]),  # negative axis, clamped bounds
        ([1], [1], [2], [1]),  # empty
        ([2], [I64_MAX], None, None),  # default axes and steps
    ],
)
def test_slice_inputs(starts, ends, axes, steps):
    inputs = {"x": X3, "starts": _i64(*starts), "ends": _i64(*ends)}
    inputs["axes"] = None if axes is None else _i64(*axes)
    inputs["steps"] = None if steps is None else _i64(*steps)
    _check("Slice", inputs, 13)


def test_slice_attributes_opset1():
    _check("Slice", {"x": X3}, 1, starts=[1, -3], ends=[1000, -1], axes=[1, 2])
    _check("Slice", {"x": X3}, 1, starts=[0, 1], ends=[1, 3])


@pytest.mark.parametrize("opset", [2, 11])
def test_split_attribute(opset):
    _check("Split", {"x": X2}, opset, n_outputs=2, axis=1, split=[2, 3])
    _check("Split", {"x": X2}, opset, n_outputs=2, axis=0)


def test_split_opset1_input_and_attribute():
    # onnx's reference has no Split-1: the pieces are numpy's
    for inputs, attrs in (({"x": X2, "s": _i64(1, 4)}, {"axis": 1}), ({"x": X2}, {"axis": 1, "split": [3, 2]})):
        got = _run(_model("Split", inputs, 2, 1, **attrs), inputs)
        np.testing.assert_array_equal(got[0], X2[:, : 1 if "s" in inputs else 3])
        np.testing.assert_array_equal(got[1], X2[:, 1 if "s" in inputs else 3 :])


def test_split_opset13_input_and_opset18_uneven():
    _check("Split", {"x": X2, "s": _i64(3, 1, 1)}, 13, n_outputs=3, axis=-1)
    _check("Split", {"x": X2, "s": None}, 13, n_outputs=2, axis=0)
    _check("Split", {"x": X2, "s": None}, 18, n_outputs=3, axis=1, num_outputs=3)
    _check("Split", {"x": X2, "s": None}, 18, n_outputs=3, axis=0, num_outputs=3)


def test_split_unequal_without_sizes_is_an_error():
    inputs = {"x": X2, "s": None}
    with pytest.raises(OnnxError, match="Split, opset 13.*cannot split axis 1 of size 5 into 2"):
        _run(_model("Split", inputs, 2, 13, axis=1), inputs)


@pytest.mark.parametrize("opset", [1, 11])
def test_squeeze_unsqueeze_attributes(opset):
    x = np.zeros((1, 3, 1, 2), np.float32)
    _check("Squeeze", {"x": x}, opset, axes=[0, -2])
    _check("Squeeze", {"x": x}, opset)
    _check("Unsqueeze", {"x": X2}, opset, axes=[-1, 0])


def test_squeeze_unsqueeze_inputs():
    x = np.zeros((1, 3, 1, 2), np.float32)
    _check("Squeeze", {"x": x, "axes": _i64(2)}, 13)
    _check("Squeeze", {"x": x, "axes": None}, 13)
    _check("Unsqueeze", {"x": X2, "axes": _i64(3, 1)}, 13)


def test_squeeze_of_a_size_other_than_1_is_an_error():
    inputs = {"x": X2, "axes": _i64(0)}
    with pytest.raises(OnnxError, match="Squeeze.*axes \\[0\\] of shape \\(4, 5\\)"):
        _run(_model("Squeeze", inputs, 1, 13), inputs)


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
def test_pad_modes_with_axes(mode):
    _check("Pad", {"x": X2, "pads": _i64(1, 2, 2, 1), "value": None, "axes": _i64(-1, 0)}, 19, mode=mode)
    _check("Pad", {"x": X2, "pads": _i64(2, 0, 1, 3), "value": None, "axes": None}, 19, mode=mode)


def test_pad_constant_value_and_negative_pads():
    value = np.array(-2.5, np.float32)
    _check("Pad", {"x": X2, "pads": _i64(1, 0, 2, 1), "value": value}, 11)
    want = np.pad(X2[1:, :-2], ((0, 2), (3, 0)), constant_values=-2.5)
    inputs = {"x": X2, "pads": _i64(-1, 3, 2, -2), "value": value}
    np.testing.assert_array_equal(_run(_model("Pad", inputs, 1, 18), inputs)[0], want)


def test_pad_attributes_opset2():
    _check("Pad", {"x": X2}, 2, pads=[0, 1, 2, 0], value=1.5)
    _check("Pad", {"x": X2}, 2, pads=[1, 1, 1, 1], mode="edge")


@pytest.mark.parametrize("shape", [[3, 1, 5], [1], [2, 1, 1], [4, 1]])
def test_expand_broadcasts_both_ways(shape):
    _check("Expand", {"x": np.arange(5, dtype=np.int32).reshape(1, 5), "shape": _i64(*shape)}, 13)


_FLOAT_RANGES = [(1.5, 7.0, 0.75), (10.0, 2.0, -3.0), (3.0, 3.0, 1.0), (5.0, 1.0, 2.0), (-1.0, 1.0, 0.3)]
_INT_RANGES = [(10, 2, -3), (3, 3, 1), (5, 1, 2), (-4, 9, 4)]


@pytest.mark.parametrize(
    "start, limit, delta, dt",
    [(*r, dt) for r in _FLOAT_RANGES for dt in (np.float16, np.float32, np.float64)]
    + [(*r, dt) for r in _INT_RANGES for dt in (np.int16, np.int32, np.int64)],
)
def test_range(start, limit, delta, dt):
    _check("Range", {"s": np.array(start, dt), "l": np.array(limit, dt), "d": np.array(delta, dt)}, 11)


def test_constant_attribute_forms():
    for attrs in ({"value_float": 2.5}, {"value_floats": [1.0, -2.0]}, {"value_int": -3}, {"value_ints": [4, 5, 6]}):
        _check("Constant", {}, 13, **attrs)
    _check("Constant", {}, 1, value=numpy_helper.from_array(np.array([[1, 2]], np.int16)))


def test_constant_sparse_value():
    values = numpy_helper.from_array(np.array([1.5, -2.0], np.float32))
    indices = numpy_helper.from_array(_i64(1, 5))
    sparse = helper.make_sparse_tensor(values, indices, [2, 3])
    (got,) = _run(_model("Constant", {}, 1, 13, sparse_value=sparse), {})
    np.testing.assert_array_equal(got, np.array([[0, 1.5, 0], [0, 0, -2.0]], np.float32))


def test_constant_of_shape_and_shape_size_are_int64():
    _check("ConstantOfShape", {"s": _i64(2, 3)}, 9, value=numpy_helper.from_array(np.array([7], np.int32)))
    _check("ConstantOfShape", {"s": _i64(2, 0)}, 20)
    _check("Shape", {"x": X3}, 15, start=-2, end=100)
    _check("Shape", {"x": X3}, 1)
    _check("Size", {"x": X3}, 13)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_gather_negative_indices(axis):
    _check("Gather", {"x": X3, "i": np.array([[0, -1], [-2, 1]], np.int64)}, 13, axis=axis)
    _check("Gather", {"x": X3, "i": np.array(-1, np.int32)}, 1, axis=axis)


def test_gather_elements_and_nd():
    _check("GatherElements", {"x": X2, "i": np.array([[-1, 0, 2, 0, 1], [1, -4, 3, 3, -3]], np.int64)}, 13, axis=0)
    idx = np.array([[1, -1], [0, 2], [3, 3], [-5, 0]], np.int64)  # narrower than data on the other axis
    (got,) = _run(_model("GatherElements", {"x": X2, "i": idx}, 1, 11, axis=1), {"x": X2, "i": idx})
    np.testing.assert_array_equal(got, np.take_along_axis(X2, idx % 5, 1))
    _check("GatherND", {"x": X3, "i": np.array([[[1, -1], [0, 2]]], np.int64)}, 13)
    _check("GatherND", {"x": X3, "i": np.array([[[2, 3]], [[-1, 0]]], np.int64)}, 13, batch_dims=1)


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatter_reductions(reduction):
    data = np.arange(12, dtype=np.float32).reshape(3, 4)
    idx = np.array([[1, -1], [0, 2]], np.int64)
    upd = np.array([[10.0, -5.0], [3.0, 7.0]], np.float32)
    _check("ScatterElements", {"x": data, "i": idx, "u": upd}, 18, axis=1, reduction=reduction)
    nd_idx = np.array([[2], [0]], np.int64)
    nd_upd = np.arange(8, dtype=np.float32).reshape(2, 4) - 3
    _check("ScatterND", {"x": data, "i": nd_idx, "u": nd_upd}, 18, reduction=reduction)


def test_scatter_opset9():
    # onnx's reference has no Scatter (ScatterElements' former name): numpy's put_along_axis is the oracle
    inputs = {
        "x": np.zeros((3, 3), np.int32),
        "i": np.array([[1, 0, -1]], np.int64),
        "u": np.array([[4, 5, 6]], np.int32),
    }
    want = inputs["x"].copy()
    np.put_along_axis(want, inputs["i"] % 3, inputs["u"], 0)
    np.testing.assert_array_equal(_run(_model("Scatter", inputs, 1, 9), inputs)[0], want)


@pytest.mark.parametrize("mode", ["linear", "circular"])
def test_tensor_scatter(mode):
    cache = np.arange(2 * 5 * 3, dtype=np.float32).reshape(2, 5, 3)
    update = -np.arange(2 * 2 * 3, dtype=np.float32).reshape(2, 2, 3) - 1
    _check("TensorScatter", {"c": cache, "u": update, "w": _i64(3, 1)}, 24, axis=1, mode=mode)
    _check("TensorScatter", {"c": cache, "u": update, "w": None}, 24, axis=-2, mode=mode)


def test_tile_and_flatten_and_transpose():
    _check("Tile", {"x": X2, "r": _i64(2, 3)}, 13)
    _check("Flatten", {"x": X3}, 13, axis=0)
    _check("Flatten", {"x": X3}, 9, axis=-1)
    _check("Transpose", {"x": X3}, 1)
    _check("Transpose", {"x": X3}, 13, perm=[1, 2, 0])


def test_tile_opset1():
    inputs = {"x": X2, "t": np.array(3, np.int64), "a": np.array(1, np.int64)}
    np.testing.assert_array_equal(_run(_model("Tile", inputs, 1, 1), inputs)[0], np.tile(X2, (1, 3)))


def test_concat_opset1_default_axis():
    inputs = {"a": X2, "b": X2 + 1}
    np.testing.assert_array_equal(_run(_model("Concat", inputs, 1, 1), inputs)[0], np.concatenate([X2, X2 + 1], 1))


@pytest.mark.parametrize("opset", [1, 10, 11])
def test_top_k(opset):
    x = np.array([[3.0, 1.0, 3.0, 2.0], [0.0, 5.0, 5.0, -1.0]], np.float32)
    if opset == 1:
        _check("TopK", {"x": x}, 1, n_outputs=2, k=2)
    else:
        _check("TopK", {"x": x, "k": _i64(3)}, opset, n_outputs=2, axis=1)
    if opset == 11:
        _check("TopK", {"x": x, "k": _i64(2)}, 11, n_outputs=2, axis=0, largest=0)


def test_trilu_and_eye_like():
    x = np.arange(3 * 4 * 5, dtype=np.int64).reshape(3, 4, 5)
    for upper in (0, 1):
        _check("Trilu", {"x": x, "k": np.array(-1, np.int64)}, 14, upper=upper)
        _check("Trilu", {"x": x, "k": None}, 14, upper=upper)
    _check("EyeLike", {"x": X2}, 9, k=2, dtype=TensorProto.INT32)
    _check("EyeLike", {"x": X2}, 22, k=-3)


def test_one_hot():
    _check("OneHot", {"i": np.array([[1.0, -2.0], [7.0, 0.0]], np.float32), "d": np.array(5), "v": _i64(-1, 4)}, 11)
    inputs = {"i": _i64(0, -1, 2), "d": _i64(3), "v": np.array([0.5, 2.0], np.float32)}  # depth as a 1-element vector
    want = np.where(np.arange(3)[None, :] == np.array([0, 2, 2])[:, None], 2.0, 0.5).astype(np.float32)
    np.testing.assert_array_equal(_run(_model("OneHot", inputs, 1, 11), inputs)[0], want)
    _check("OneHot", {"i": _i64(3, -1), "d": np.array(3.0, np.float32), "v": np.array([0, 1], np.int8)}, 9, axis=0)


def test_compress_nonzero_unique():
    cond = np.array([True, False, True, True], bool)
    _check("Compress", {"x": X2, "c": cond}, 11, axis=0)
    _check("Compress", {"x": X2, "c": cond[:3]}, 11)
    _check("NonZero", {"x": np.array([[0, 2, 0], [1, 0, 3]], np.int32)}, 13)
    x = np.array([2.0, 1.0, 2.0, 5.0, 1.0, 1.0], np.float32)
    _check("Unique", {"x": x}, 11, n_outputs=4, sorted=0)
    _check("Unique", {"x": np.array([[1, 0], [2, 3], [1, 0]], np.int64)}, 11, n_outputs=4, axis=0)


def test_depth_space_round_trip():
    x = np.arange(2 * 8 * 2 * 3, dtype=np.float32).reshape(2, 8, 2, 3)
    for mode in ("DCR", "CRD"):
        _check("DepthToSpace", {"x": x}, 13, blocksize=2, mode=mode)
        up = _run(_model("DepthToSpace", {"x": x}, 1, 13, blocksize=2, mode=mode), {"x": x})[0]
        (back,) = _run(_model("SpaceToDepth", {"x": up}, 1, 28, blocksize=2, mode=mode), {"x": up})
        np.testing.assert_array_equal(back, x)
    _check("SpaceToDepth", {"x": np.arange(2 * 2 * 4 * 6, dtype=np.float32).reshape(2, 2, 4, 6)}, 13, blocksize=2)


def test_reverse_sequence_and_center_crop_pad():
    x = np.arange(4 * 3 * 2, dtype=np.float32).reshape(4, 3, 2)
    _check("ReverseSequence", {"x": x, "l": _i64(4, 1, 2)}, 10)
    _check("ReverseSequence", {"x": x, "l": _i64(3, 0, 2, 1)}, 10, batch_axis=0, time_axis=1)
    _check("CenterCropPad", {"x": X3, "s": _i64(5, 1, 7)}, 18)
    _check("CenterCropPad", {"x": X3, "s": _i64(2, 6)}, 18, axes=[-1, 1])


def test_det_with_pivoting_and_singular_matrices():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 4, 4)).astype(np.float32)
    x[1, 0, 0] = 0.0  # the first pivot must come from another row
    x[2, 3] = x[2, 1] * 2  # singular
    (got,) = _run(_model("Det", {"x": x}, 1, 22), {"x": x})
    np.testing.assert_allclose(got, np.linalg.det(x.astype(np.float64)), rtol=1e-5, atol=1e-5)
    assert got.dtype == np.float32


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_upsample(mode):
    x = np.arange(2 * 3, dtype=np.float32).reshape(1, 1, 2, 3)
    scales = np.array([1.0, 1.0, 2.0, 1.5], np.float32)
    _check("Upsample", {"x": x, "s": scales}, 9, oracle="onnxruntime", mode=mode)
    _check("Upsample", {"x": x}, 7, oracle="onnxruntime", mode=mode, scales=[1.0, 1.0, 3.0, 2.0])


def test_reshape_errors_name_the_node():
    inputs = {"x": X2, "s": _i64(3, -1)}
    with pytest.raises(OnnxError, match="Reshape, opset 14.*cannot reshape data of shape \\(4, 5\\) to \\[3, -1\\]"):
        _run(_model("Reshape", inputs, 1, 14), inputs)
    _check("Reshape", {"x": X3, "s": _i64(0, -1)}, 14)
    _check("Reshape", {"x": np.zeros((0, 3), np.float32), "s": _i64(3, 0)}, 14, allowzero=1)


def test_slice_of_an_empty_axis_backwards():
    x = np.zeros((0, 3), np.float32)
    _check("Slice", {"x": x, "s": _i64(-1, 2), "e": _i64(I64_MIN, 0), "a": _i64(0, 1), "t": _i64(-1, -1)}, 13)


OPS = [
    "Constant",
    "ConstantOfShape",
    "Shape",
    "Size",
    "Reshape",
    "Flatten",
    "Transpose",
    "Squeeze",
    "Unsqueeze",
    "Concat",
    "Split",
    "Slice",
    "Gather",
    "GatherElements",
    "GatherND",
    "Scatter",
    "ScatterElements",
    "ScatterND",
    "TensorScatter",
    "Expand",
    "Tile",
    "Range",
    "Pad",
    "Identity",
    "Trilu",
    "OneHot",
    "Compress",
    "NonZero",
    "Unique",
    "TopK",
    "DepthToSpace",
    "SpaceToDepth",
    "EyeLike",
    "ReverseSequence",
    "CenterCropPad",
    "Det",
    "Upsample",
]


def test_every_opset_of_these_ops_is_served_with_its_attributes_and_inputs():
    import inspect

    from zeptograd.onnx.registry import lookup

    for schema in onnx.defs.get_all_schemas_with_history():
        if schema.domain or schema.name not in OPS:
            continue
        impl = lookup("", schema.name, schema.since_version)
        assert impl is not None, (schema.name, schema.since_version)
        assert set(schema.attributes) <= impl.attributes, (schema.name, schema.since_version)
        params = inspect.signature(impl.fn).parameters.values()
        positional = [p for p in params if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD]
        variadic = any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params)
        assert variadic or len(positional) >= len(schema.inputs), (schema.name, schema.since_version)


@pytest.mark.parametrize("mode", ["reflect", "wrap", "edge"])
@pytest.mark.parametrize("n", [1, 2, 3])
def test_pad_wider_than_the_axis(mode, n):
    # numpy's np.pad reflects and wraps as many times as it takes (onnx's reference pads with it)
    x = np.arange(2 * n, dtype=np.float32).reshape(2, n)
    _check("Pad", {"x": x, "pads": _i64(1, 5, 0, 7), "value": None}, 19, mode=mode)


def test_shape_arithmetic_replays_under_tinyjit():
    # attention's head split as exporters write it: the target shape is computed from Shape, Gather, Unsqueeze and
    # Concat, so the runner reads it once per input shape and TinyJit replays the kernels with new inputs
    from zeptograd import Tensor, TinyJit

    def const(name: str, value: np.ndarray) -> onnx.NodeProto:
        return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(value))

    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        const("zero", np.array(0, np.int64)),
        const("one", np.array(1, np.int64)),
        const("heads", _i64(4, -1)),
        helper.make_node("Gather", ["shape", "zero"], ["batch"]),
        helper.make_node("Gather", ["shape", "one"], ["seq"]),
        const("axes", _i64(0)),
        helper.make_node("Unsqueeze", ["batch", "axes"], ["b1"]),
        helper.make_node("Unsqueeze", ["seq", "axes"], ["s1"]),
        helper.make_node("Concat", ["b1", "s1", "heads"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["split"]),
        helper.make_node("Transpose", ["split"], ["t"], perm=[0, 2, 1, 3]),
        helper.make_node("Slice", ["t", "starts", "ends", "slice_axes"], ["y"]),
    ]
    inits = [
        numpy_helper.from_array(_i64(1), "starts"),
        numpy_helper.from_array(_i64(I64_MAX), "ends"),
        numpy_helper.from_array(_i64(2), "slice_axes"),
    ]
    x_info = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", "s", 32])
    y_info = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    graph = helper.make_graph(nodes, "g", [x_info], [y_info], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    reference = ReferenceEvaluator(model)
    runner = OnnxRunner(model)
    step = TinyJit(lambda x: runner({"x": x})["y"])
    rng = np.random.default_rng(0)
    for _ in range(4):  # run, capture, replay twice: each call's input is new
        x = rng.standard_normal((3, 6, 32)).astype(np.float32)
        np.testing.assert_array_equal(step(Tensor(x)).numpy(), reference.run(None, {"x": x})[0])
