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
    log_gate = None
    if decay is not None:  # log-space decay per kv head, or per kv head and key dim: (B, H_kv, T, 1 or d_k)
        if decay.ndim != 3 or decay.shape[:2] != (b, t) or decay.shape[2] not in (kv_num_heads, kv_num_heads * d_k):
            raise ValueError(f"decay must be (batch, seq, kv_num_heads[ * d_k]), got {decay.shape}")
        per_dim = decay.shape[2] // kv_num_heads
        log_gate = decay.reshape(b, t, kv_num_heads, per_dim).permute(0, 2, 1, 3).cast(f32)
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
    # chunk_size tokens at once (their work and memory grow with its square), the state carried between chunks
    step = chunk_size if chunk_size > 0 else t
    outs = []
    for c in range(0, t, step):
        part = slice(c, min(c + step, t))
        q_c, k_c, v_c = q[:, :, part], k[:, :, part], v[:, :, part]
        g_c = None if log_gate is None else log_gate[:, :, part]
        if rate is not None:
            # the delta rules' corrected values, after which they read and carry the state as the gated rule does
            v_c = _corrected_values(k_c, v_c, g_c, rate[:, :, part], state)
        out_c, state = _parallel(q_c, k_c, v_c, g_c, state, group)
        outs.append(out_c)
    if not outs:  # no tokens
        outs.append(Tensor.zeros(b, q_num_heads, 0, d_v, dtype=f32, device=query.device))
    out = outs[0].cat(*outs[1:], dim=2) if len(outs) > 1 else outs[0]
    y = (out * s).permute(0, 2, 1, 3).reshape(b, t, q_num_heads * d_v)
    return y.cast(query.dtype), state.cast(state_dtype)


def _decayed_scores(x: Tensor, y: Tensor, g: Tensor | None, strict: bool) -> Tensor:
    """(B, H, T, T): sum_d x_t[d] exp(G_t[d] - G_s[d]) y_s[d] for s <= t (s < t when strict), else 0; G the running
    log decay (B, H, T, 1 or d), none when g is None."""
    t = x.shape[2]
    causal = Tensor.ones(t, t, dtype=dtypes.bool, device=x.device).tril(-1 if strict else 0)
    if g is None:
        return causal.where(x @ y.transpose(-1, -2), 0.0)
    # a masked pair's difference goes to -inf before exp, so it cannot overflow
    decayed = causal.unsqueeze(-1).where(g.unsqueeze(3) - g.unsqueeze(2), -math.inf).exp()  # (B, H, T, T, 1 or d)
    if g.shape[3] == 1:
        return (x @ y.transpose(-1, -2)) * decayed.squeeze(-1)
    return (x.unsqueeze(3) * decayed * y.unsqueeze(2)).sum(-1)


def _corrected_values(k: Tensor, v: Tensor, log_gate: Tensor | None, rate: Tensor, state: Tensor) -> Tensor:
    """The delta rules' u_t = beta_t (v_t - (decayed S_{t-1})^T k_t) for all tokens: with S_{t-1} written out from
    the u_s before it, (I + A) U = beta (V - (K * exp(G)) S_0) where A[t, s] = beta_t k_t . exp(G_t - G_s) k_s for
    s < t, a unit lower triangular system solved by inverting it block by block."""
    g = None if log_gate is None else log_gate.cumsum(2)
    carried = k if g is None else k * g.exp()
    rhs = rate * (v - carried @ state)
    a = rate * _decayed_scores(k, k, g, strict=True)
    return _unit_lower_inverse(a) @ rhs


def _unit_lower_inverse(a: Tensor) -> Tensor:
    """(I + a)^-1 for a strictly lower triangular a (..., T, T): the inverses of the diagonal blocks doubled in size
    each step, [[P, 0], [R, Q]]^-1 = [[P^-1, 0], [-Q^-1 R P^-1, Q^-1]], so log2(T) steps of batched products."""
    t = a.shape[-1]
    size = 1 << max(0, (t - 1).bit_length())  # padded to a power of two (the padding rows solve to themselves)
    lead = a.shape[:-2]
    full = a.pad([(0, 0)] * len(lead) + [(0, size - t), (0, size - t)])
    inv = Tensor.ones(*lead, size, 1, 1, dtype=a.dtype, device=a.device)  # the 1x1 diagonal blocks of I + a
    block = 1
    while block < size:
        n = size // (2 * block)
        # the (2 block)-square diagonal blocks of a; their lower-left quarters join the pairs of inverted blocks
        grid = full.reshape(*lead, n, 2 * block, n, 2 * block)
        diag = grid.permute(*range(len(lead)), len(lead) + 1, len(lead) + 3, len(lead), len(lead) + 2)
        diag = diag.diagonal(dim1=-2, dim2=-1)  # (..., 2 block, 2 block, n)
        diag = diag.permute(*range(len(lead)), len(lead) + 2, len(lead), len(lead) + 1)  # (..., n, 2 block, 2 block)
        lower = diag[..., block:, :block]
        pairs = inv.reshape(*lead, n, 2, block, block)
        first, second = pairs[..., 0, :, :], pairs[..., 1, :, :]
        joined = -(second @ lower @ first)
        top = first.cat(first.zeros_like(), dim=-1)
        inv = top.cat(joined.cat(second, dim=-1), dim=-2)
        block *= 2
    return inv.reshape(*lead, size, size)[..., :t, :t]


def _parallel(
    q: Tensor, k: Tensor, v: Tensor, log_gate: Tensor | None, state: Tensor, group: int
) -> tuple[Tensor, Tensor]:
    """The linear and gated rules for all tokens at once: with G the running sum of the log decay,
    o_t = sum_{s <= t} (q_t * exp(G_t - G_s)) . k_s v_s + (q_t * exp(G_t)) S_0, and
    S_T = exp(G_T) S_0 + sum_s (exp(G_T - G_s) * k_s) (x) v_s. Returns the unscaled outputs and S_T."""
    t = q.shape[2]
    kq, vq = (k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)) if group > 1 else (k, v)
    read0 = state.repeat_interleave(group, dim=1) if group > 1 else state
    if log_gate is None:
        return _decayed_scores(q, kq, None, strict=False) @ vq + q @ read0, state + k.transpose(-1, -2) @ v
    g = log_gate.cumsum(2)  # (B, H_kv, T, 1 or d_k)
    gq = g.repeat_interleave(group, dim=1) if group > 1 else g
    out = _decayed_scores(q, kq, gq, strict=False) @ vq + (q * gq.exp()) @ read0
    last = g[:, :, t - 1 :, :]  # (B, H_kv, 1, 1 or d_k)
    carried = last.transpose(-1, -2).exp() * state
    return out, carried + ((last - g).exp() * k).transpose(-1, -2) @ v
