"""ONNX ops: attention (Attention, RotaryEmbedding).

>>> import numpy as np
>>> from onnx import TensorProto, helper
>>> from zeptograd.onnx.runner import OnnxRunner
>>> io = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 1, 1, 2]) for n in "QKVY"]
>>> node = helper.make_node("Attention", ["Q", "K", "V"], ["Y"])
>>> graph = helper.make_graph([node], "g", io[:3], io[3:])
>>> model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])
>>> x = np.ones((1, 1, 1, 2), np.float32)
>>> OnnxRunner(model)({"Q": x, "K": x, "V": 3 * x})["Y"].tolist()
[[[[3.0, 3.0]]]]
"""

from __future__ import annotations

import math
from typing import Any

from zeptograd.dtype import dtypes
from zeptograd.onnx.dtypes import onnx_dtype
from zeptograd.onnx.registry import onnx_op
from zeptograd.tensor import Tensor

_HALF = (dtypes.float16, dtypes.bfloat16)


def _heads(x: Tensor, heads: int | None, what: str) -> Tensor:
    """(B, S, heads * D) -> (B, heads, S, D); a 4-d input is already (B, heads, S, D)."""
    if x.ndim == 4:
        return x
    if x.ndim != 3:
        raise ValueError(f"{what} must be 3-d (batch, seq, hidden) or 4-d (batch, heads, seq, head), got {x.shape}")
    if not heads or x.shape[2] % heads:
        raise ValueError(f"{what} of shape {x.shape} needs a head count that divides {x.shape[2]}, got {heads}")
    b, s, h = x.shape
    return x.reshape(b, s, heads, h // heads).permute(0, 2, 1, 3)


def _attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    attn_mask: Tensor | None,
    past_key: Tensor | None,
    past_value: Tensor | None,
    nonpad_kv_seqlen: Tensor | None,
    *,
    is_causal: int,
    kv_num_heads: int | None,
    q_num_heads: int | None,
    qk_matmul_output_mode: int,
    scale: float | None,
    softcap: float,
    softmax_precision: int | None,
    left_window_size: int,
    right_window_size: int,
    n_outputs: int,
) -> tuple[Tensor, ...]:
    """softmax(Q K^T * scale (+ softcap, masks)) V over (B, heads, L, D) heads, with a KV cache and GQA."""
    if not q.ndim == k.ndim == v.ndim:
        raise ValueError(f"Q, K and V must have the same rank, got {q.shape}, {k.shape}, {v.shape}")
    if (past_key is None) != (past_value is None):
        raise ValueError("past_key and past_value must be given together")
    if nonpad_kv_seqlen is not None and past_key is not None:
        raise ValueError("nonpad_kv_seqlen cannot be combined with past_key/past_value")
    rank3 = q.ndim == 3
    q, k, v = _heads(q, q_num_heads, "Q"), _heads(k, kv_num_heads, "K"), _heads(v, kv_num_heads, "V")
    if past_key is not None:
        k, v = past_key.cat(k, dim=2), past_value.cat(v, dim=2)
    present_k, present_v = k, v
    heads, kv_heads = q.shape[1], k.shape[1]
    if heads != kv_heads:
        if heads % kv_heads or v.shape[1] != kv_heads:
            raise ValueError(f"{heads} query heads cannot share {kv_heads} key/value heads (V has {v.shape[1]})")
        k, v = k.repeat_interleave(heads // kv_heads, dim=1), v.repeat_interleave(heads // kv_heads, dim=1)
    dt = q.dtype
    L, S = q.shape[2], k.shape[2]
    s = 1 / math.sqrt(q.shape[3]) if scale is None else scale
    windowed = left_window_size >= 0 or right_window_size >= 0
    plain = attn_mask is None and nonpad_kv_seqlen is None and not windowed and (not is_causal or past_key is None)
    if plain and softcap <= 0 and softmax_precision is None and n_outputs <= 3:
        # the common case is exactly torch's: the fused scaled_dot_product_attention
        y = q.scaled_dot_product_attention(k, v, is_causal=bool(is_causal), scale=s)
        return (_merge(y) if rank3 else y, present_k, present_v)[:n_outputs]
    root = math.sqrt(s)
    qk = (q * root) @ (k * root).transpose(-1, -2)
    if softcap > 0:
        qk = (qk / softcap).tanh() * softcap
    bias = _bias(q, attn_mask, nonpad_kv_seqlen, past_key, L, S, is_causal, left_window_size, right_window_size)
    scores = qk if bias is None else qk + bias
    shown = qk if qk_matmul_output_mode in (0, 1) else scores
    calc = dt if softmax_precision is None else onnx_dtype(softmax_precision, "softmax_precision")
    probs = _softmax(scores.cast(calc))
    if bias is not None:
        # a row with no key it may attend to gives zeros, not NaN
        probs = (bias.max(-1, keepdim=True) == -math.inf).where(0.0, probs)
    if qk_matmul_output_mode == 3:
        shown = probs
    elif qk_matmul_output_mode not in (0, 1, 2):
        raise ValueError(f"qk_matmul_output_mode must be 0, 1, 2 or 3, got {qk_matmul_output_mode}")
    y = probs.cast(dt) @ v
    return (_merge(y) if rank3 else y, present_k, present_v, shown.cast(dt))[:n_outputs]


def _softmax(x: Tensor) -> Tensor:
    """softmax over the last axis; in a half dtype each step rounds to it, as ONNX's reference computes."""
    if x.dtype not in _HALF:
        return x.softmax(-1)
    e = (x - x.max(-1, keepdim=True)).exp().cast(x.dtype)
    return e / e.sum(-1, keepdim=True).cast(x.dtype)


def _merge(y: Tensor) -> Tensor:
    """(B, heads, L, D) -> (B, L, heads * D)."""
    b, h, L, d = y.shape
    return y.permute(0, 2, 1, 3).reshape(b, L, h * d)


def _bias(
    q: Tensor,
    attn_mask: Tensor | None,
    nonpad: Tensor | None,
    past_key: Tensor | None,
    L: int,
    S: int,
    is_causal: int,
    left: int,
    right: int,
) -> Tensor | None:
    """The additive bias of the scores (0 attends, -inf does not), or None when nothing is masked."""
    dt = q.dtype
    bias = None
    if attn_mask is not None:
        if attn_mask.shape[-1] < S:  # a short mask leaves the keys past it masked
            fill = False if attn_mask.dtype is dtypes.bool else -math.inf
            attn_mask = attn_mask.pad([(0, 0)] * (attn_mask.ndim - 1) + [(0, S - attn_mask.shape[-1])], value=fill)
        bias = attn_mask.where(0.0, -math.inf).cast(dt) if attn_mask.dtype is dtypes.bool else attn_mask.cast(dt)
    # a query at in-block position i sits at absolute position i + offset (the cached or non-padded keys first)
    if past_key is not None:
        offset: Any = past_key.shape[2]
    elif nonpad is not None:
        offset = (nonpad.cast(dtypes.int32) - L).reshape(-1, 1, 1, 1)
    else:
        offset = 0
    i = Tensor.arange(L, dtype=dtypes.int32, device=q.device).reshape(L, 1)
    j = Tensor.arange(S, dtype=dtypes.int32, device=q.device).reshape(1, S)
    diff = i + offset - j
    allowed = None
    if is_causal:
        allowed = diff >= 0
    if left >= 0:
        allowed = diff <= left if allowed is None else allowed & (diff <= left)
    if right >= 0:
        allowed = -diff <= right if allowed is None else allowed & (-diff <= right)
    if nonpad is not None:
        kept = j.reshape(1, 1, 1, S) < nonpad.cast(dtypes.int32).reshape(-1, 1, 1, 1)
        allowed = kept if allowed is None else allowed & kept
    if allowed is not None:
        extra = allowed.where(0.0, -math.inf).cast(dt)
        bias = extra if bias is None else bias + extra
    return bias


@onnx_op("Attention", 23)
def attention_23(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    attn_mask: Tensor | None = None,
    past_key: Tensor | None = None,
    past_value: Tensor | None = None,
    *,
    is_causal: int = 0,
    kv_num_heads: int | None = None,
    q_num_heads: int | None = None,
    qk_matmul_output_mode: int = 0,
    scale: float | None = None,
    softcap: float = 0.0,
    softmax_precision: int | None = None,
    ctx: Any,
) -> tuple[Tensor, ...]:
    """Attention: softmax(Q K^T * scale + mask) V, with a KV cache, GQA, causal masks and softcap."""
    return _attention(
        q,
        k,
        v,
        attn_mask,
        past_key,
        past_value,
        None,
        is_causal=is_causal,
        kv_num_heads=kv_num_heads,
        q_num_heads=q_num_heads,
        qk_matmul_output_mode=qk_matmul_output_mode,
        scale=scale,
        softcap=softcap,
        softmax_precision=softmax_precision,
        left_window_size=-1,
        right_window_size=-1,
        n_outputs=ctx.n_outputs,
    )


@onnx_op("Attention", 24)
def attention_24(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    attn_mask: Tensor | None = None,
    past_key: Tensor | None = None,
    past_value: Tensor | None = None,
    nonpad_kv_seqlen: Tensor | None = None,
    *,
    is_causal: int = 0,
    kv_num_heads: int | None = None,
    q_num_heads: int | None = None,
    qk_matmul_output_mode: int = 0,
    scale: float | None = None,
    softcap: float = 0.0,
    softmax_precision: int | None = None,
    ctx: Any,
) -> tuple[Tensor, ...]:
    """Attention-24: Attention-23 plus nonpad_kv_seqlen (the valid keys per batch of a static cache)."""
    return _attention(
        q,
        k,
        v,
        attn_mask,
        past_key,
        past_value,
        nonpad_kv_seqlen,
        is_causal=is_causal,
        kv_num_heads=kv_num_heads,
        q_num_heads=q_num_heads,
        qk_matmul_output_mode=qk_matmul_output_mode,
        scale=scale,
        softcap=softcap,
        softmax_precision=softmax_precision,
        left_window_size=-1,
        right_window_size=-1,
        n_outputs=ctx.n_outputs,
    )


@onnx_op("Attention", 25)
def attention_25(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    attn_mask: Tensor | None = None,
    past_key: Tensor | None = None,
    past_value: Tensor | None = None,
    nonpad_kv_seqlen: Tensor | None = None,
    *,
    is_causal: int = 0,
    kv_num_heads: int | None = None,
    q_num_heads: int | None = None,
    qk_matmul_output_mode: int = 0,
    scale: float | None = None,
    softcap: float = 0.0,
    softmax_precision: int | None = None,
    left_window_size: int = -1,
    right_window_size: int = -1,
    ctx: Any,
) -> tuple[Tensor, ...]:
    """Attention-25: Attention-24 plus a sliding window (left/right_window_size keys around each query)."""
    if q.ndim == 4 and (q_num_heads is not None or kv_num_heads is not None):
        raise ValueError("q_num_heads and kv_num_heads must not be given for 4-d inputs")
    return _attention(
        q,
        k,
        v,
        attn_mask,
        past_key,
        past_value,
        nonpad_kv_seqlen,
        is_causal=is_causal,
        kv_num_heads=kv_num_heads,
        q_num_heads=q_num_heads,
        qk_matmul_output_mode=qk_matmul_output_mode,
        scale=scale,
        softcap=softcap,
        softmax_precision=softmax_precision,
        left_window_size=left_window_size,
        right_window_size=right_window_size,
        n_outputs=ctx.n_outputs,
    )


@onnx_op("RotaryEmbedding", 23)
def rotary_embedding(
    x: Tensor,
    cos_cache: Tensor,
    sin_cache: Tensor,
    position_ids: Tensor | None = None,
    *,
    interleaved: int = 0,
    num_heads: int = 0,
    rotary_embedding_dim: int = 0,
) -> Tensor:
    """RotaryEmbedding: (x1, x2) -> (cos x1 - sin x2, sin x1 + cos x2) over the first rotary_embedding_dim."""
    shape = x.shape
    if x.ndim == 4:  # (B, heads, S, D) -> (B, S, heads, D)
        x = x.permute(0, 2, 1, 3)
    elif x.ndim == 3:
        if not num_heads or shape[2] % num_heads:
            raise ValueError(f"a 3-d input {shape} needs num_heads dividing {shape[2]}, got {num_heads}")
        x = x.reshape(shape[0], shape[1], num_heads, shape[2] // num_heads)
    else:
        raise ValueError(f"input must be 3-d or 4-d, got {shape}")
    head = x.shape[3]
    dim = rotary_embedding_dim or head
    if position_ids is not None:
        cos_cache, sin_cache = cos_cache[position_ids], sin_cache[position_ids]
    if cos_cache.shape[-1] != dim // 2 or sin_cache.shape[-1] != dim // 2:
        raise ValueError(f"cos/sin caches {cos_cache.shape}, {sin_cache.shape} must end in rotary dim / 2 = {dim // 2}")
    cos, sin = cos_cache.unsqueeze(2), sin_cache.unsqueeze(2)
    rot, rest = x[..., :dim], x[..., dim:]
    if interleaved:
        pairs = rot.reshape(*rot.shape[:3], dim // 2, 2)
        x1, x2 = pairs[..., 0], pairs[..., 1]
    else:
        x1, x2 = rot[..., : dim // 2], rot[..., dim // 2 :]
    real, imag = cos * x1 - sin * x2, sin * x1 + cos * x2
    if interleaved:
        rot = real.unsqueeze(-1).cat(imag.unsqueeze(-1), dim=-1).reshape(rot.shape)
    else:
        rot = real.cat(imag, dim=-1)
    y = rot.cat(rest, dim=-1) if dim < head else rot
    return y.reshape(shape) if len(shape) == 3 else y.permute(0, 2, 1, 3)
