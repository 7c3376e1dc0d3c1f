"""ONNX ops: the recurrent blocks of state-space and linear-attention models (CausalConvWithState, LinearAttention).

Both carry a state from one call to the next (the last inputs of a causal convolution, the key-value memory of a
linear attention), so a model decodes token by token with what it returned last time.

>>> import numpy as np
>>> from onnx import TensorProto, helper
>>> from zeptograd.onnx.runner import OnnxRunner
>>> x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 3])
>>> w = helper.make_tensor_value_info("w", TensorProto.FLOAT, [1, 1, 2])
>>> y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 3])
>>> s = helper.make_tensor_value_info("s", TensorProto.FLOAT, [1, 1, 1])
>>> node = helper.make_node("CausalConvWithState", ["x", "w"], ["y", "s"])
>>> model = helper.make_model(helper.make_graph([node], "g", [x, w], [y, s]),
...                           opset_imports=[helper.make_opsetid("", 27)])
>>> out = OnnxRunner(model)({"x": np.array([[[1, 2, 3]]], np.float32), "w": np.array([[[1, 10]]], np.float32)})
>>> out["y"].tolist(), out["s"].tolist()
([[[10.0, 21.0, 32.0]]], [[[3.0]]])
"""

from __future__ import annotations

import math

from zeptograd.dtype import dtypes
from zeptograd.onnx.registry import onnx_op
from zeptograd.tensor import Tensor


@onnx_op("CausalConvWithState", 27)
def causal_conv_with_state(
    x: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    past_state: Tensor | None = None,
    *,
    activation: str = "none",
) -> tuple[Tensor, Tensor]:
    """CausalConvWithState: y[c, t] = act(sum_j [past, x][c, t + j] * w[c, 0, j] + b[c]); state: the last k - 1."""
    if activation not in ("none", "silu", "swish"):
        raise ValueError(f"activation must be 'none', 'silu' or 'swish', got {activation!r}")
    if x.ndim != 3 or weight.ndim != 3 or weight.shape[1] != 1 or weight.shape[0] != x.shape[1]:
        raise ValueError(
            f"input must be (batch, channels, length) and weight (channels, 1, k), got {x.shape} and {weight.shape}"
        )
    b, c, _ = x.shape
    k = weight.shape[2]
    if past_state is None:
        past_state = Tensor.zeros(b, c, k - 1, dtype=x.dtype, device=x.device)
    elif past_state.shape != (b, c, k - 1):
        raise ValueError(f"past_state must be (batch, channels, k - 1) = {(b, c, k - 1)}, got {past_state.shape}")
    padded = past_state.cat(x, dim=2) if k > 1 else x
    # depthwise and causal: each output sums k consecutive padded inputs of its own channel, in float32 for halves
    acc = dtypes.float32 if x.dtype in (dtypes.float16, dtypes.bfloat16) else x.dtype
    windows = padded.cast(acc).unfold(2, k, 1)  # (B, C, L, k)
    y = (windows * weight.cast(acc).reshape(1, c, 1, k)).sum(-1)
    if bias is not None:
        y = y + bias.cast(acc).reshape(1, c, 1)
    if activation != "none":
        y = y.cast(x.dtype).cast(acc)  # the reference rounds the convolution to the input dtype first
        y = y * y.sigmoid()
    state = padded[:, :, padded.shape[2] - (k - 1) :]
    return y.cast(x.dtype), state


def _split_heads(x: Tensor, heads: int, what: str) -> Tensor:
    """(B, T, heads * D) -> (B, heads, T, D)."""
    if x.ndim != 3 or x.shape[2] % heads:
        raise ValueError(f"{what} must be (batch, seq, heads * head_size) with {heads} heads, got {x.shape}")
    b, t, hd = x.shape
    return x.reshape(b, t, heads, hd // heads).permute(0, 2, 1, 3)


@onnx_op("LinearAttention", 27)
def linear_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    past_state: Tensor | None = None,
    decay: Tensor | None = None,
    beta: Tensor | None = None,
    *,
    chunk_size: int = 64,
    kv_num_heads: int | None = None,
    q_num_heads: int | None = None,
    scale: float = 0.0,
    update_rule: str = "gated_delta",
) -> tuple[Tensor, Tensor]:
    """LinearAttention: S_t = exp(g_t) S_{t-1} + k_t (x) beta_t (v_t - exp(g_t) S_{t-1}^T k_t); o_t = scale q_t^T S_t
    (without the gate for 'linear'/'delta', without the correction for 'linear'/'gated')."""
    del chunk_size  # a tuning hint for chunked kernels, without effect on the result
    if update_rule not in ("linear", "gated", "delta", "gated_delta"):
        raise ValueError(f"update_rule must be 'linear', 'gated', 'delta' or 'gated_delta', got {update_rule!r}")
    if not q_num_heads or not kv_num_heads or q_num_heads <= 0 or kv_num_heads <= 0 or q_num_heads % kv_num_heads:
        raise ValueError(
            f"q_num_heads ({q_num_heads}) must be given and a positive multiple of kv_num_heads ({kv_num_heads})"
        )
    gated, delta = update_rule in ("gated", "gated_delta"), update_rule in ("delta", "gated_delta")
    if gated != (decay is not None):
        raise ValueError(f"update_rule {update_rule!r} {'needs' if gated else 'takes no'} decay input")
    if delta != (beta is not None):
        raise ValueError(f"update_rule {update_rule!r} {'needs' if delta else 'takes no'} beta input")
    f32 = dtypes.float32
    q = _split_heads(query, q_num_heads, "query").cast(f32)
    k = _split_heads(key, kv_num_heads, "key").cast(f32)
    v = _split_heads(value, kv_num_heads, "value").cast(f32)
    b, _, t, d_k = q.shape
    d_v = v.shape[3]
    if k.shape != (b, kv_num_heads, t, d_k) or v.shape[:3] != (b, kv_num_heads, t):
        raise ValueError(f"query {query.shape}, key {key.shape} and value {value.shape} do not agree")
    gate = log_gate = None
    if decay is not None:  # log-space decay per kv head, or per kv head and key dim: (B, H_kv, T, 1 or d_k)
        if decay.ndim != 3 or decay.shape[:2] != (b, t) or decay.shape[2] not in (kv_num_heads, kv_num_heads * d_k):
            raise ValueError(f"decay must be (batch, seq, kv_num_heads[ * d_k]), got {decay.shape}")
        per_dim = decay.shape[2] // kv_num_heads
        log_gate = decay.reshape(b, t, kv_num_heads, per_dim).permute(0, 2, 1, 3).cast(f32)
        gate = log_gate.exp()
    rate = None
    if beta is not None:  # (B, T, H_kv or 1) -> (B, H_kv or 1, T, 1)
        if beta.ndim != 3 or beta.shape[:2] != (b, t) or beta.shape[2] not in (kv_num_heads, 1):
            raise ValueError(f"beta must be (batch, seq, kv_num_heads or 1), got {beta.shape}")
        rate = beta.reshape(b, t, beta.shape[2], 1).permute(0, 2, 1, 3).cast(f32)
    if past_state is not None:
        if past_state.shape != (b, kv_num_heads, d_k, d_v):
            raise ValueError(f"past_state must be {(b, kv_num_heads, d_k, d_v)}, got {past_state.shape}")
        state, state_dtype = past_state.cast(f32), past_state.dtype
    else:
        state, state_dtype = Tensor.zeros(b, kv_num_heads, d_k, d_v, dtype=f32, device=query.device), query.dtype
    s = 1 / math.sqrt(d_k) if scale == 0.0 else scale
    group = q_num_heads // kv_num_heads
    if rate is None:
        out, state = _parallel(q, k, v, log_gate, state, group)
    else:
        out, state = _recurrent(q, k, v, gate, rate, state, group)
    y = (out * s).permute(0, 2, 1, 3).reshape(b, t, q_num_heads * d_v)
    return y.cast(query.dtype), state.cast(state_dtype)


def _recurrent(
    q: Tensor, k: Tensor, v: Tensor, gate: Tensor | None, rate: Tensor, state: Tensor, group: int
) -> tuple[Tensor, Tensor]:
    """The delta rules token by token (each correction reads the state the previous token left): the unscaled
    outputs (B, H_q, T, d_v) and the last state."""
    outs = []
    for i in range(q.shape[2]):
        k_t, v_t = k[:, :, i, :], v[:, :, i, :]
        if gate is not None:
            state = state * gate[:, :, i, :].unsqueeze(-1)
        retrieved = (state * k_t.unsqueeze(-1)).sum(2)  # S^T k: (B, H_kv, d_v)
        v_t = rate[:, :, i, :] * (v_t - retrieved)
        state = state + k_t.unsqueeze(-1) * v_t.unsqueeze(-2)
        read = state.repeat_interleave(group, dim=1) if group > 1 else state
        outs.append((q[:, :, i, :].unsqueeze(-1) * read).sum(2))  # (B, H_q, d_v)
    return Tensor.stack(*outs, dim=2), state


def _parallel(
    q: Tensor, k: Tensor, v: Tensor, log_gate: Tensor | None, state: Tensor, group: int
) -> tuple[Tensor, Tensor]:
    """The linear and gated rules for all tokens at once: with G the running sum of the log decay,
    o_t = sum_{s <= t} (q_t * exp(G_t - G_s)) . k_s v_s + (q_t * exp(G_t)) S_0, and
    S_T = exp(G_T) S_0 + sum_s (exp(G_T - G_s) * k_s) (x) v_s. Returns the unscaled outputs and S_T."""
    t = q.shape[2]
    causal = Tensor.ones(t, t, dtype=dtypes.bool, device=q.device).tril()  # s <= t
    kq, vq = (k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)) if group > 1 else (k, v)
    read0 = state.repeat_interleave(group, dim=1) if group > 1 else state
    if log_gate is None:
        scores = causal.where(q @ kq.transpose(-1, -2), 0.0)
        return scores @ vq + q @ read0, state + k.transpose(-1, -2) @ v
    g = log_gate.cumsum(2)  # (B, H_kv, T, 1 or d_k)
    gq = g.repeat_interleave(group, dim=1) if group > 1 else g
    # exp(G_t - G_s) where s <= t (a masked pair's difference goes to -inf before exp, so it cannot overflow)
    diff = gq.unsqueeze(3) - gq.unsqueeze(2)  # (B, H_q, T, T, 1 or d_k)
    decayed = causal.unsqueeze(-1).where(diff, -math.inf).exp()
    if g.shape[3] == 1:
        scores = (q @ kq.transpose(-1, -2)) * decayed.squeeze(-1)
    else:
        scores = (q.unsqueeze(3) * decayed * kq.unsqueeze(2)).sum(-1)
    out = scores @ vq + (q * gq.exp()) @ read0
    last = g[:, :, t - 1 :, :]  # (B, H_kv, 1, 1 or d_k)
    carried = last.transpose(-1, -2).exp() * state
    return out, carried + ((last - g).exp() * k).transpose(-1, -2) @ v
