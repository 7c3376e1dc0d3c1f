"""ONNX ops on token ids: TfIdfVectorizer (n-gram counts of integer tokens; string tokens need a string dtype).

>>> import numpy as np
>>> from onnx import TensorProto, helper
>>> from zeptograd.onnx.runner import OnnxRunner
>>> x = helper.make_tensor_value_info("x", TensorProto.INT64, [5])
>>> y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])
>>> node = helper.make_node("TfIdfVectorizer", ["x"], ["y"], mode="TF", min_gram_length=1, max_gram_length=2,
...                         max_skip_count=0, ngram_counts=[0, 2], ngram_indexes=[0, 1, 2], pool_int64s=[4, 7, 4, 7])
>>> model = helper.make_model(helper.make_graph([node], "g", [x], [y]), opset_imports=[helper.make_opsetid("", 21)])
>>> OnnxRunner(model)({"x": np.array([4, 7, 4, 4, 7])})["y"].tolist()  # 4 three times, 7 twice, (4, 7) twice
[3.0, 2.0, 2.0]
"""

from __future__ import annotations

import numpy as np

from zeptograd.dtype import dtypes
from zeptograd.onnx.dtypes import from_numpy
from zeptograd.onnx.registry import onnx_op
from zeptograd.tensor import Tensor


@onnx_op("TfIdfVectorizer", 9)
def tfidf_vectorizer(
    x: Tensor,
    *,
    max_gram_length: int | None = None,
    max_skip_count: int | None = None,
    min_gram_length: int | None = None,
    mode: str | None = None,
    ngram_counts: list[int] | None = None,
    ngram_indexes: list[int] | None = None,
    pool_int64s: list[int] | None = None,
    pool_strings: list[str] | None = None,
    weights: list[float] | None = None,
) -> Tensor:
    """TfIdfVectorizer: per row, how often each pool n-gram occurs (its tokens `skip + 1` apart, for each skip up to
    max_skip_count; unigrams once), weighted by mode TF (the count), IDF (weight if seen) or TFIDF (weight * count)."""
    if pool_strings:
        raise NotImplementedError("pool_strings: zeptograd has no string dtype")
    if None in (max_gram_length, max_skip_count, min_gram_length, mode, ngram_counts, ngram_indexes, pool_int64s):
        raise ValueError("TfIdfVectorizer needs the gram lengths, max_skip_count, mode, ngram_* and pool_* attributes")
    if mode not in ("TF", "IDF", "TFIDF"):
        raise ValueError(f"mode must be 'TF', 'IDF' or 'TFIDF', got {mode!r}")
    if x.ndim not in (1, 2) or x.dtype not in (dtypes.int32, dtypes.int64):
        raise ValueError(f"input must be int32 or int64 tokens of shape [C] or [B, C], got {x.dtype} {x.shape}")
    size = max(ngram_indexes) + 1
    rows = x.reshape(1, -1) if x.ndim == 1 else x
    tokens = rows.cast(dtypes.int64)
    c = rows.shape[1]
    counts = Tensor.zeros(rows.shape[0], size, dtype=dtypes.float32, device=x.device)
    gram = 0  # the pool's n-grams are numbered across all lengths, in pool order
    for n in range(1, len(ngram_counts) + 1):
        start = ngram_counts[n - 1]
        end = ngram_counts[n] if n < len(ngram_counts) else len(pool_int64s)
        if (end - start) % n:
            raise ValueError(
                f"pool_int64s[{start}:{end}] (the {n}-grams, from ngram_counts) is not a whole number of them"
            )
        grams = np.asarray(pool_int64s[start:end], np.int64).reshape(-1, n)
        first, gram = gram, gram + len(grams)
        if not len(grams) or not min_gram_length <= n <= max_gram_length:
            continue
        # which output column each n-gram counts into
        place = np.zeros((len(grams), size), np.float32)
        place[np.arange(len(grams)), ngram_indexes[first : first + len(grams)]] = 1
        pool = from_numpy(grams, device=x.device)
        # a unigram does not depend on the skip, so it is counted once
        for skip in range(max_skip_count + 1 if n > 1 else 1):
            span = (n - 1) * (skip + 1)
            if span >= c:
                break
            windows = Tensor.stack(*[tokens[:, i * (skip + 1) : c - span + i * (skip + 1)] for i in range(n)], dim=-1)
            hits = (windows.unsqueeze(2) == pool).all(-1).cast(dtypes.float32).sum(1)  # (B, grams)
            counts = counts + hits @ from_numpy(place, device=x.device)
    if mode == "TF":
        y = counts
    elif weights:
        w = from_numpy(np.asarray(weights, np.float32), device=x.device)
        y = (counts > 0).where(w, 0.0) if mode == "IDF" else counts * w
    else:
        y = (counts > 0).cast(dtypes.float32) if mode == "IDF" else counts
    return y.reshape(size) if x.ndim == 1 else y
