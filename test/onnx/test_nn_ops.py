"""The ONNX convolution, pooling, normalization, attention, loss and resizing ops against onnxruntime, in
configurations ONNX's node suite leaves out (asymmetric pads, ceil_mode with indices, column-major indices, GQA with
a cache and a mask...), and their registration against ONNX's own schemas."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402

import zeptograd.onnx.ops  # noqa: E402, F401 (registers the ops)
from zeptograd.onnx.dtypes import to_numpy  # noqa: E402
from zeptograd.onnx.registry import OnnxError, lookup  # noqa: E402
from zeptograd.onnx.runner import OnnxRunner  # noqa: E402

# ONNX ops' graphs: the IR round trip of every graph built (conftest) is the IR tests' job
pytestmark = pytest.mark.no_roundtrip

OPS = [
    "Conv",
    "ConvTranspose",
    "ConvInteger",
    "QLinearConv",
    "DeformConv",
    "AveragePool",
    "MaxPool",
    "LpPool",
    "GlobalAveragePool",
    "GlobalMaxPool",
    "GlobalLpPool",
    "MaxUnpool",
    "BatchNormalization",
    "LayerNormalization",
    "GroupNormalization",
    "InstanceNormalization",
    "RMSNormalization",
    "LRN",
    "LpNormalization",
    "MeanVarianceNormalization",
    "Softmax",
    "LogSoftmax",
    "Hardmax",
    "Gemm",
    "MatMul",
    "Einsum",
    "Dropout",
    "Attention",
    "RotaryEmbedding",
    "NegativeLogLikelihoodLoss",
    "SoftmaxCrossEntropyLoss",
    "Resize",
    "GridSample",
    "AffineGrid",
    "RoiAlign",
    "Col2Im",
    "NonMaxSuppression",
]
_NP = {
    np.float32: TensorProto.FLOAT,
    np.int64: TensorProto.INT64,
    np.float16: TensorProto.FLOAT16,
    np.bool_: TensorProto.BOOL,
}


@pytest.mark.parametrize("op", OPS)
def test_every_opset_version_is_registered_with_its_attributes(op):
    versions = [s for s in onnx.defs.get_all_schemas_with_history() if s.name == op and s.domain == ""]
    assert versions
    for schema in versions:
        impl = lookup("", op, schema.since_version)
        assert impl is not None, f"{op}-{schema.since_version} is not registered"
        assert set(schema.attributes) <= impl.attributes, f"{op}-{schema.since_version} lacks attributes"


def _model(node, inputs: dict[str, np.ndarray], outputs: list[str], opset: int):
    infos = [helper.make_tensor_value_info(k, _NP[v.dtype.type], v.shape) for k, v in inputs.items()]
    outs = [helper.make_empty_tensor_value_info(o) for o in outputs]
    model = helper.make_model(
        helper.make_graph([node], "g", infos, outs), opset_imports=[helper.make_opsetid("", opset)]
    )
    model.ir_version = 10
    return model


def _check(
    op: str,
    inputs: dict[str, np.ndarray],
    outputs: list[str],
    opset: int,
    rtol=1e-5,
    atol=1e-5,
    oracle: str = "onnxruntime",
    **attrs,
):
    node = helper.make_node(op, list(inputs), outputs, **attrs)
    model = _model(node, inputs, outputs, opset)
    if oracle == "onnxruntime":
        want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, inputs)
    else:  # ONNX's reference implementation
        from onnx.reference import ReferenceEvaluator

        want = ReferenceEvaluator(model).run(None, inputs)
    got = OnnxRunner(model)(inputs)
    for name, w in zip(outputs, want):
        g = to_numpy(got[name])
        assert g.dtype == w.dtype and g.shape == w.shape, (name, g.dtype, g.shape, w.dtype, w.shape)
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=name)


rng = np.random.default_rng(0)


def _rand(*shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


def test_conv_asymmetric_pads_groups_strides_dilations():
    x, w, b = _rand(2, 4, 9, 8), _rand(6, 2, 3, 2), _rand(6)
    _check("Conv", {"x": x, "w": w, "b": b}, ["y"], 17, group=2, strides=[2, 1], dilations=[1, 2], pads=[1, 0, 2, 1])


@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER", "VALID"])
@pytest.mark.parametrize("spatial", [(11,), (6, 7, 5)])
def test_conv_auto_pad_1d_3d(auto_pad, spatial):
    n = len(spatial)
    x, w = _rand(1, 3, *spatial), _rand(4, 3, *(3,) * n)
    _check("Conv", {"x": x, "w": w}, ["y"], 17, auto_pad=auto_pad, strides=[2] * n)


@pytest.mark.parametrize(
    "attrs",
    [
        {"pads": [1, 0, 0, 2], "strides": [2, 3]},
        {"pads": [1, 1, 1, 1], "strides": [2, 2], "output_padding": [1, 1], "dilations": [2, 1]},
        {"output_shape": [8, 6], "strides": [2, 2]},
        {"auto_pad": "SAME_UPPER", "strides": [2, 3]},
        {"auto_pad": "SAME_LOWER", "strides": [2, 2]},
    ],
)
def test_conv_transpose_padding_forms(attrs):
    x, w, b = _rand(1, 4, 4, 3), _rand(4, 3, 3, 3), _rand(6)
    _check("ConvTranspose", {"x": x, "w": w, "b": b}, ["y"], 17, group=2, **attrs)


@pytest.mark.parametrize("storage_order", [0, 1])
@pytest.mark.parametrize(
    "attrs",
    [
        {"kernel_shape": [3, 2], "pads": [1, 0, 0, 1], "strides": [2, 2], "ceil_mode": 1},
        {"kernel_shape": [2, 2], "dilations": [2, 1], "strides": [1, 2]},
        {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "strides": [2, 2]},
        {"kernel_shape": [2, 3], "auto_pad": "SAME_UPPER", "strides": [2, 2]},
    ],
)
def test_max_pool_values_and_indices(attrs, storage_order):
    x = _rand(2, 3, 7, 6)
    _check("MaxPool", {"x": x}, ["y", "i"], 12, storage_order=storage_order, **attrs)


@pytest.mark.parametrize("count_include_pad", [0, 1])
@pytest.mark.parametrize(
    "attrs",
    [
        {"kernel_shape": [3, 3], "pads": [1, 2, 0, 1], "strides": [2, 2], "ceil_mode": 1},
        {"kernel_shape": [2, 2], "pads": [1, 1, 1, 1], "strides": [2, 2]},
        {"kernel_shape": [3, 2], "auto_pad": "SAME_LOWER", "strides": [2, 1]},
    ],
)
def test_average_pool_divisors(attrs, count_include_pad):
    x = _rand(1, 2, 7, 8)
    _check("AveragePool", {"x": x}, ["y"], 19, count_include_pad=count_include_pad, **attrs)


def test_lp_pool_p3():
    x = _rand(1, 2, 6, 6)
    _check("LpPool", {"x": x}, ["y"], 18, kernel_shape=[2, 3], p=3, pads=[0, 1, 1, 0], strides=[2, 2], rtol=1e-4)


def test_layer_normalization_axis_with_statistics():
    x, s, b = _rand(2, 3, 4, 5), _rand(4, 5), _rand(4, 5)
    _check("LayerNormalization", {"x": x, "s": s, "b": b}, ["y", "m", "inv"], 17, axis=2, epsilon=1e-3, rtol=1e-4)


def test_softmax_before_13_coerces_to_2d():
    x = _rand(2, 3, 4)
    _check("Softmax", {"x": x}, ["y"], 11, axis=1)
    _check("LogSoftmax", {"x": x}, ["y"], 11, axis=2)
    _check("Hardmax", {"x": x}, ["y"], 11, axis=1)


def test_gemm_transposes_and_broadcast_c():
    a, b, c = _rand(4, 3), _rand(5, 4), _rand(1, 5)
    _check("Gemm", {"a": a, "b": b, "c": c}, ["y"], 13, transA=1, transB=1, alpha=0.5, beta=2.0)


def test_matmul_one_dim_operands():
    _check("MatMul", {"a": _rand(3), "b": _rand(2, 3, 4)}, ["y"], 13)
    _check("MatMul", {"a": _rand(2, 1, 5, 3), "b": _rand(3)}, ["y"], 13)


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
def test_softmax_cross_entropy_ignore_index_and_weights(reduction):
    x, y, w = _rand(3, 5, 2), rng.integers(0, 5, (3, 2)).astype(np.int64), np.abs(_rand(5))
    y[0, 1] = -1
    _check(
        "SoftmaxCrossEntropyLoss",
        {"x": x, "y": y, "w": w},
        ["loss", "logp"],
        13,
        reduction=reduction,
        ignore_index=-1,
        rtol=1e-5,
    )
    _check("NegativeLogLikelihoodLoss", {"x": x, "y": y, "w": w}, ["loss"], 13, reduction=reduction, ignore_index=-1)


@pytest.mark.parametrize(
    "attrs",
    [
        {"mode": "linear", "antialias": 1},
        {"mode": "cubic", "coordinate_transformation_mode": "align_corners"},
        {"mode": "nearest", "nearest_mode": "round_prefer_ceil", "coordinate_transformation_mode": "asymmetric"},
        {"mode": "cubic", "exclude_outside": 1, "cubic_coeff_a": -0.5},
    ],
)
def test_resize_to_sizes(attrs):
    x = _rand(1, 2, 7, 9)
    sizes = np.array([1, 2, 4, 13], np.int64)
    node = helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], **attrs)
    inputs = {"x": x, "sizes": sizes}
    model = _model(node, inputs, ["y"], 19)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, inputs)[0]
    np.testing.assert_allclose(to_numpy(OnnxRunner(model)(inputs)["y"]), want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
def test_grid_sample_modes(mode, padding_mode):
    # against ONNX's reference: onnxruntime's bicubic border sampling differs from it (and from the spec)
    x, grid = _rand(1, 2, 5, 6), rng.uniform(-1.3, 1.3, (1, 4, 3, 2)).astype(np.float32)
    _check(
        "GridSample",
        {"x": x, "grid": grid},
        ["y"],
        20,
        mode=mode,
        padding_mode=padding_mode,
        rtol=1e-4,
        atol=1e-4,
        oracle="reference",
    )


def test_attention_3d_gqa_with_cache_and_mask():
    q, k, v = _rand(2, 3, 8), _rand(2, 3, 4), _rand(2, 3, 4)
    past_k, past_v = _rand(2, 2, 2, 2), _rand(2, 2, 2, 2)
    mask = _rand(3, 5)
    inputs = {"q": q, "k": k, "v": v, "mask": mask, "pk": past_k, "pv": past_v}
    _check(
        "Attention", inputs, ["y", "present_k", "present_v"], 23, q_num_heads=4, kv_num_heads=2, rtol=1e-4, atol=1e-5
    )


def test_bad_attribute_values_name_the_node():
    x, w = _rand(1, 1, 4, 4), _rand(1, 1, 2, 2)
    node = helper.make_node("Conv", ["x", "w"], ["y"], name="c1", auto_pad="SOMETIMES")
    with pytest.raises(OnnxError, match=r"'c1' \(Conv.*auto_pad"):
        OnnxRunner(_model(node, {"x": x, "w": w}, ["y"], 17))({"x": x, "w": w})
    node = helper.make_node("Resize", ["x", "", "s"], ["y"], name="r1", mode="nearest", antialias=1)
    s = np.array([1, 1, 2, 2], np.float32)
    with pytest.raises(OnnxError, match=r"'r1' \(Resize.*antialias"):
        OnnxRunner(_model(node, {"x": x, "s": s}, ["y"], 19))({"x": x, "s": s})


def test_training_dropout_scales_the_kept_and_keeps_the_ratio():
    # the suite's training cases expect one draw of numpy's generator; this checks what Dropout promises instead
    x = np.full((200, 100), 3.0, np.float32)
    inputs = {"x": x, "ratio": np.array(0.25, np.float32), "training_mode": np.array(True)}
    model = _model(helper.make_node("Dropout", list(inputs), ["y", "mask"]), inputs, ["y", "mask"], 13)
    out = OnnxRunner(model)(inputs)
    y, mask = out["y"].numpy(), out["mask"].numpy()
    assert mask.dtype == np.bool_ and y.dtype == np.float32
    np.testing.assert_allclose(y, np.where(mask, 3.0 / 0.75, 0.0), rtol=1e-6)
    assert abs(mask.mean() - 0.75) < 0.02  # 20,000 draws: the kept fraction's standard deviation is 0.003
