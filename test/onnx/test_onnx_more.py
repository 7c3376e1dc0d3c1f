"""The sequence-model, FlexAttention, TfIdfVectorizer and ai.onnx.ml ops against ONNX's reference implementation (and
onnxruntime where the reference departs from the spec), in configurations ONNX's node suite leaves out: numeric
LabelEncoders, min/max/average tree ensembles with missing values, IDF weighting, chunked decoding with the carried
state; and their registration against ONNX's own schemas."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

import zeptograd.onnx.ops  # noqa: E402, F401 (registers the ops)
from zeptograd.onnx.dtypes import to_numpy  # noqa: E402
from zeptograd.onnx.registry import OnnxError, lookup  # noqa: E402
from zeptograd.onnx.runner import OnnxRunner  # noqa: E402

# ONNX ops' graphs: the IR round trip of every graph built (conftest) is the IR tests' job
pytestmark = pytest.mark.no_roundtrip

ML, PREVIEW = "ai.onnx.ml", "ai.onnx.preview"
# (op, domain, the first opset zeptograd registers: LabelEncoder-1 maps strings only)
OPS = [
    ("CausalConvWithState", "", 27),
    ("LinearAttention", "", 27),
    ("FlexAttention", PREVIEW, 1),
    ("TfIdfVectorizer", "", 9),
    ("Binarizer", ML, 1),
    ("ArrayFeatureExtractor", ML, 1),
    ("LabelEncoder", ML, 2),
    ("TreeEnsemble", ML, 5),
]
_NP = {
    np.dtype(np.float32): TensorProto.FLOAT,
    np.dtype(np.float64): TensorProto.DOUBLE,
    np.dtype(np.float16): TensorProto.FLOAT16,
    np.dtype(np.int64): TensorProto.INT64,
    np.dtype(np.int32): TensorProto.INT32,
    np.dtype(np.int16): TensorProto.INT16,
}
_OPSETS = {"": 27, ML: 5, PREVIEW: 1}


@pytest.mark.parametrize("op,domain,first", OPS)
def test_every_opset_version_is_registered_with_its_attributes(op, domain, first):
    versions = [s for s in onnx.defs.get_all_schemas_with_history() if s.name == op and s.domain == domain]
    assert versions
    for schema in versions:
        if schema.since_version < first:
            assert lookup(domain, op, schema.since_version) is None
            continue
        impl = lookup(domain, op, schema.since_version)
        assert impl is not None, f"{op}-{schema.since_version}"
        assert impl.attributes == set(schema.attributes), f"{op}-{schema.since_version}"


def _model(node, inputs: dict[str, np.ndarray], outputs: dict[str, np.dtype], domain_opsets=None):
    opsets = dict(_OPSETS, **(domain_opsets or {}))
    ins = [helper.make_tensor_value_info(n, _NP[v.dtype], v.shape) for n, v in inputs.items()]
    outs = [helper.make_tensor_value_info(n, _NP[np.dtype(dt)], None) for n, dt in outputs.items()]
    graph = helper.make_graph([node], "g", ins, outs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets.items()])


def _check(node, inputs, outputs, rtol=1e-5, atol=1e-6, domain_opsets=None, oracle="reference"):
    """Run `node` on zeptograd and on ONNX's reference (or onnxruntime); the outputs must agree in dtype, shape and
    value."""
    model = _model(node, inputs, outputs, domain_opsets)
    if oracle == "reference":
        want = ReferenceEvaluator(model).run(None, inputs)
    else:
        ort = pytest.importorskip("onnxruntime")
        session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        want = session.run(None, inputs)
    got = OnnxRunner(model)(inputs)
    for (name, dt), w in zip(outputs.items(), want, strict=True):
        g = to_numpy(got[name])
        assert g.dtype == np.dtype(dt) == w.dtype, name
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=name)
    return got


RNG = np.random.default_rng(0)


def test_causal_conv_decoded_in_chunks_with_the_carried_state_matches_one_pass():
    x = RNG.standard_normal((2, 3, 9)).astype(np.float32)
    w = RNG.standard_normal((3, 1, 4)).astype(np.float32)
    b = RNG.standard_normal(3).astype(np.float32)
    node = helper.make_node("CausalConvWithState", ["x", "w", "b"], ["y", "s"], activation="silu")
    full = _check(node, {"x": x, "w": w, "b": b}, {"y": np.float32, "s": np.float32})
    node = helper.make_node("CausalConvWithState", ["x", "w", "b", "p"], ["y", "s"], activation="silu")
    first = _check(node, {"x": x[:, :, :5], "w": w, "b": b, "p": np.zeros((2, 3, 3), np.float32)},
                   {"y": np.float32, "s": np.float32})  # fmt: skip
    second = _check(node, {"x": x[:, :, 5:], "w": w, "b": b, "p": to_numpy(first["s"])},
                    {"y": np.float32, "s": np.float32})  # fmt: skip
    joined = np.concatenate([to_numpy(first["y"]), to_numpy(second["y"])], axis=2)
    np.testing.assert_allclose(joined, to_numpy(full["y"]), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(to_numpy(second["s"]), to_numpy(full["s"]))


def test_causal_conv_bad_input_names_the_problem():
    x, w = np.zeros((1, 2, 4), np.float32), np.zeros((3, 1, 2), np.float32)
    node = helper.make_node("CausalConvWithState", ["x", "w"], ["y", "s"])
    with pytest.raises(OnnxError, match=r"weight \(channels, 1, k\)"):
        OnnxRunner(_model(node, {"x": x, "w": w}, {"y": np.float32, "s": np.float32}))({"x": x, "w": w})
    node = helper.make_node("CausalConvWithState", ["x", "w"], ["y", "s"], activation="gelu")
    w = np.zeros((2, 1, 2), np.float32)
    with pytest.raises(OnnxError, match="activation must be"):
        OnnxRunner(_model(node, {"x": x, "w": w}, {"y": np.float32, "s": np.float32}))({"x": x, "w": w})


@pytest.mark.parametrize("chunk", [64, 2])
@pytest.mark.parametrize("rule", ["linear", "gated", "delta", "gated_delta"])
def test_linear_attention_gqa_with_past_state_per_key_decay_and_float64_state(rule, chunk):
    b, t, hq, hkv, dk, dv = 2, 5, 4, 2, 3, 2
    inputs = {
        "q": RNG.standard_normal((b, t, hq * dk)).astype(np.float32),
        "k": (RNG.standard_normal((b, t, hkv * dk)) / 2).astype(np.float32),
        "v": RNG.standard_normal((b, t, hkv * dv)).astype(np.float32),
        "p": RNG.standard_normal((b, hkv, dk, dv)),  # a float64 state stays float64
    }
    names = ["q", "k", "v", "p", "", ""]
    if rule in ("gated", "gated_delta"):
        inputs["g"] = -RNG.random((b, t, hkv * dk)).astype(np.float32)  # one decay per key dim
        names[4] = "g"
    if rule in ("delta", "gated_delta"):
        inputs["beta"] = RNG.random((b, t, hkv)).astype(np.float32)
        names[5] = "beta"
    node = helper.make_node("LinearAttention", names, ["y", "s"], q_num_heads=hq, kv_num_heads=hkv, update_rule=rule,
                            chunk_size=chunk)  # fmt: skip
    _check(node, inputs, {"y": np.float32, "s": np.float64}, rtol=1e-4, atol=1e-5)


def test_linear_attention_long_prefill_in_chunks_matches_token_by_token():
    b, t, h, d = 1, 40, 2, 8
    k = RNG.standard_normal((b, t, h * d)).astype(np.float32)
    k /= np.linalg.norm(k.reshape(b, t, h, d), axis=-1).repeat(d, -1).reshape(k.shape)  # unit keys, as models use
    inputs = {"q": RNG.standard_normal((b, t, h * d)).astype(np.float32), "k": k,
              "v": RNG.standard_normal((b, t, h * d)).astype(np.float32),
              "g": -RNG.random((b, t, h)).astype(np.float32) / 4,
              "beta": RNG.random((b, t, h)).astype(np.float32)}  # fmt: skip
    node = helper.make_node("LinearAttention", ["q", "k", "v", "", "g", "beta"], ["y", "s"], q_num_heads=h,
                            kv_num_heads=h, chunk_size=16)  # fmt: skip
    _check(node, inputs, {"y": np.float32, "s": np.float32}, rtol=1e-4, atol=1e-5)


def test_linear_attention_inputs_must_fit_the_update_rule():
    x = np.zeros((1, 2, 4), np.float32)
    node = helper.make_node("LinearAttention", ["q", "k", "v", "", "g"], ["y", "s"], q_num_heads=2, kv_num_heads=2,
                            update_rule="linear")  # fmt: skip
    inputs = {"q": x, "k": x, "v": x, "g": np.zeros((1, 2, 2), np.float32)}
    with pytest.raises(OnnxError, match="'linear' takes no decay"):
        OnnxRunner(_model(node, inputs, {"y": np.float32, "s": np.float32}))(inputs)


def test_flex_attention_float16_with_float64_softmax_and_both_mods():
    q = RNG.random((1, 4, 3, 8)).astype(np.float16)
    k, v = RNG.random((1, 2, 5, 8)).astype(np.float16), RNG.random((1, 2, 5, 4)).astype(np.float16)
    f64 = TensorProto.DOUBLE
    score = helper.make_graph(
        [helper.make_node("Mul", ["s", "c"], ["o"])], "score", [helper.make_tensor_value_info("s", f64, None)],
        [helper.make_tensor_value_info("o", f64, None)], [helper.make_tensor("c", f64, [], [2.0])],
    )  # fmt: skip
    prob = helper.make_graph(
        [helper.make_node("Sqrt", ["p"], ["o"])], "prob", [helper.make_tensor_value_info("p", f64, None)],
        [helper.make_tensor_value_info("o", f64, None)],
    )  # fmt: skip
    node = helper.make_node("FlexAttention", ["q", "k", "v"], ["y"], domain=PREVIEW, scale=0.3, softmax_precision=f64,
                            score_mod=score, prob_mod=prob)  # fmt: skip
    _check(node, {"q": q, "k": k, "v": v}, {"y": np.float16}, rtol=1e-3, atol=1e-3)


def _tfidf(x, oracle="reference", **attrs):
    node = helper.make_node("TfIdfVectorizer", ["x"], ["y"], **attrs)
    return _check(node, {"x": x}, {"y": np.float32}, domain_opsets={"": 21}, oracle=oracle)


@pytest.mark.parametrize("mode", ["TF", "IDF", "TFIDF"])
@pytest.mark.parametrize("weighted", [False, True])
def test_tfidf_modes_with_and_without_weights_on_trigrams_with_skips(mode, weighted):
    x = RNG.integers(0, 4, (3, 12)).astype(np.int64)
    pool = [0, 1, 2, 3, 0, 1, 1, 2, 2, 0, 0, 1, 2, 3, 3, 3]  # unigrams 0..3, bigrams (0,1) (1,2) (2,0), trigrams
    attrs = {"mode": mode, "min_gram_length": 1, "max_gram_length": 3, "max_skip_count": 2,
             "ngram_counts": [0, 4, 10], "ngram_indexes": [7, 6, 5, 4, 3, 2, 1, 0, 1], "pool_int64s": pool}  # fmt: skip
    if weighted:
        attrs["weights"] = [0.5, 1.5, 2.0, 0.25, 3.0, 1.0, 0.75, 2.5]
    # ONNX's reference cannot weigh IDF or TFIDF without weights (it takes the length of None): onnxruntime then
    _tfidf(x, oracle="reference" if weighted or mode == "TF" else "onnxruntime", **attrs)


def test_tfidf_only_longer_grams_counts_no_unigrams_one_row():
    x = np.array([5, 6, 5, 6, 6, 5, 7], np.int32)
    _tfidf(x, mode="TF", min_gram_length=2, max_gram_length=2, max_skip_count=3, ngram_counts=[0, 2],
           ngram_indexes=[0, 1, 2, 3, 4], pool_int64s=[5, 6, 5, 6, 6, 5, 5, 7])  # fmt: skip


def test_tfidf_pool_not_whole_grams_is_refused():
    x = np.array([5, 6], np.int64)
    node = helper.make_node("TfIdfVectorizer", ["x"], ["y"], mode="TF", min_gram_length=1, max_gram_length=2,
                            max_skip_count=0, ngram_counts=[0, 2], ngram_indexes=[0, 1, 2],
                            pool_int64s=[5, 6, 5])  # fmt: skip
    with pytest.raises(OnnxError, match="not a whole number"):
        OnnxRunner(_model(node, {"x": x}, {"y": np.float32}))({"x": x})


def test_binarizer_on_integers_compares_with_the_fractional_threshold():
    x = np.array([[0, 1, 2], [3, -1, 1]], np.int32)
    node = helper.make_node("Binarizer", ["x"], ["y"], domain=ML, threshold=0.5)
    _check(node, {"x": x}, {"y": np.int32})


@pytest.mark.parametrize("shape", [(6,), (2, 3, 5)])
def test_array_feature_extractor_shapes(shape):
    x = RNG.standard_normal(shape).astype(np.float32)
    idx = np.array([[0, -2], [2, 1]], np.int64) if len(shape) > 1 else np.array([5, 0, -1, 3], np.int64)
    node = helper.make_node("ArrayFeatureExtractor", ["x", "i"], ["y"], domain=ML)
    _check(node, {"x": x, "i": idx}, {"y": np.float32})


def test_label_encoder_int_keys_to_floats_with_a_repeated_key_and_default():
    x = np.array([[1, 2, 3], [7, 2, -5]], np.int64)
    node = helper.make_node("LabelEncoder", ["x"], ["y"], domain=ML, keys_int64s=[1, 2, 7, 2],
                            values_floats=[0.5, 1.5, -2.0, 9.0], default_float=4.25)  # fmt: skip
    got = _check(node, {"x": x}, {"y": np.float32})
    assert to_numpy(got["y"])[0, 1] == 9.0  # the last of a repeated key wins


def test_label_encoder_tensor_keys_values_and_default():
    x = np.array([1.5, 2.0, 3.25, 1.5], np.float32)
    node = helper.make_node(
        "LabelEncoder", ["x"], ["y"], domain=ML,
        keys_tensor=helper.make_tensor("k", TensorProto.FLOAT, [2], [1.5, 3.25]),
        values_tensor=helper.make_tensor("v", TensorProto.INT16, [2], [7, -3]),
        default_tensor=helper.make_tensor("d", TensorProto.INT16, [1], [42]),
    )  # fmt: skip
    _check(node, {"x": x}, {"y": np.int16}, domain_opsets={ML: 4})


def test_label_encoder_nan_key_matches_nan_as_the_spec_says():
    # ONNX's reference looks NaN up in a dict (never found); the spec, and onnxruntime, match any NaN
    ort = pytest.importorskip("onnxruntime")
    x = np.array([np.nan, 1.0, 2.0], np.float32)
    node = helper.make_node("LabelEncoder", ["x"], ["y"], domain=ML, keys_floats=[np.nan, 1.0], values_int64s=[5, 6])
    model = _model(node, {"x": x}, {"y": np.int64}, {"": 21, ML: 4})
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_array_equal(to_numpy(OnnxRunner(model)({"x": x})["y"]), want)
    assert want.tolist() == [5, 6, -1]


def _two_trees(aggregate: int, dtype) -> dict:
    # tree 0: node0 (x0 < 0.5) -> node1 (x1 >= 0.1 -> leaf0 | leaf1) | node2 (x0 == 1 -> leaf2 | leaf3)
    # tree 1: node3 (x1 > -0.2) -> leaf4 | node4 (x0 != 2 -> leaf5 | leaf6); node4 sends missing values true
    return {
        "domain": ML, "n_targets": 3, "aggregate_function": aggregate, "post_transform": 0, "tree_roots": [0, 3],
        "nodes_modes": helper.make_tensor("m", TensorProto.UINT8, [5], [1, 2, 4, 3, 5]),
        "nodes_featureids": [0, 1, 0, 1, 0],
        "nodes_splits": helper.make_tensor("s", dtype, [5], [0.5, 0.1, 1.0, -0.2, 2.0]),
        "nodes_truenodeids": [1, 0, 2, 4, 5], "nodes_trueleafs": [0, 1, 1, 1, 1],
        "nodes_falsenodeids": [2, 1, 3, 4, 6], "nodes_falseleafs": [0, 1, 1, 0, 1],
        "nodes_missing_value_tracks_true": [0, 0, 0, 0, 1],
        "leaf_targetids": [0, 1, 2, 0, 1, 2, 2],
        "leaf_weights": helper.make_tensor("w", dtype, [7], [1.5, -2.0, 3.0, 0.25, 4.0, -1.0, 2.5]),
    }  # fmt: skip


@pytest.mark.parametrize("aggregate", [0, 1, 2, 3])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_tree_ensemble_two_trees_every_aggregate_and_missing_values(aggregate, dtype):
    x = np.array([[0.2, 0.3], [0.2, -0.5], [1.0, 0.0], [3.0, -0.3], [2.0, -1.0], [np.nan, np.nan], [0.7, 5.0]], dtype)
    node = helper.make_node("TreeEnsemble", ["x"], ["y"], **_two_trees(aggregate, _NP[np.dtype(dtype)]))
    _check(node, {"x": x}, {"y": dtype})


def test_tree_ensemble_with_a_tree_that_is_one_leaf():
    # tree 0: node0 (x0 <= 1) -> leaf0 | leaf2; tree 1: node1 only, both branches the same leaf (the tree is that leaf)
    node = helper.make_node(
        "TreeEnsemble", ["x"], ["y"], domain=ML, n_targets=2, aggregate_function=1, tree_roots=[0, 1],
        nodes_modes=helper.make_tensor("m", TensorProto.UINT8, [2], [0, 0]), nodes_featureids=[0, 0],
        nodes_splits=helper.make_tensor("s", TensorProto.FLOAT, [2], [1.0, 0.0]),
        nodes_truenodeids=[0, 1], nodes_trueleafs=[1, 1], nodes_falsenodeids=[2, 1], nodes_falseleafs=[1, 1],
        leaf_targetids=[0, 1, 1], leaf_weights=helper.make_tensor("w", TensorProto.FLOAT, [3], [2.0, 5.0, -3.0]),
    )  # fmt: skip
    _check(node, {"x": np.array([[0.5], [1.5]], np.float32)}, {"y": np.float32})


def test_tree_ensemble_post_transforms_are_refused_by_name():
    node = helper.make_node("TreeEnsemble", ["x"], ["y"], **dict(_two_trees(1, TensorProto.FLOAT), post_transform=2))
    x = np.zeros((1, 2), np.float32)
    with pytest.raises(OnnxError, match="post_transform=2"):
        OnnxRunner(_model(node, {"x": x}, {"y": np.float32}))({"x": x})
