"""A LLaMA from a GGUF file (Llama.from_gguf) against a LLaMA written here in plain torch as llama.cpp computes it
(RMSNorm, "normal" rope over adjacent pairs, grouped-query attention where query head h reads key/value head
h // (n_heads / n_kv_heads), SwiGLU), with the weights the gguf package's GGUFReader and gguf.quants.dequantize read
from the same file: the logits and greedy generation, in F32, F16, Q8_0 and Q4_0, untied and tied; and llama.cpp
itself where llama-cpp-python is installed."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from zeptograd import Tensor
from zeptograd.helpers import ArgumentError
from zeptograd.models.generation import CachedLogits, generate, generate_tokens, next_token_logits
from zeptograd.models.llama import Llama
from zeptograd.models.sampling import Sampler
from zeptograd.models.tiny_gguf import tiny_vocabulary
from zeptograd.models.tokenizer import Tokenizer

gguf = pytest.importorskip("gguf")
torch = pytest.importorskip("torch")
Q = gguf.GGMLQuantizationType
pytestmark = pytest.mark.no_roundtrip  # a model's graphs are thousands of nodes (conftest's IR round trip)

DIM, LAYERS, HEADS, KV_HEADS, HIDDEN, CONTEXT = 64, 2, 4, 2, 128, 64
EPS, THETA = 1e-5, 10000.0


def write_llama(path, qtype, tied=False, seed=0, drop=(), reshape=None, metadata=None, rope_dims=DIM // HEADS) -> None:
    """A random LLaMA in GGUF with GGUFWriter: 2-D weights in `qtype` (gguf.quants.quantize), norms in F32 as
    llama.cpp's converter keeps them; `drop` leaves tensors out, `reshape` replaces one, `metadata` overrides keys."""
    tokens, scores, types = tiny_vocabulary(merges=40)
    rng = np.random.default_rng(seed)
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_context_length(CONTEXT)
    w.add_embedding_length(DIM)
    w.add_block_count(LAYERS)
    w.add_feed_forward_length(HIDDEN)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_rope_dimension_count(rope_dims)
    w.add_rope_freq_base(THETA)
    w.add_layer_norm_rms_eps(EPS)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    for key, (value, vtype) in (metadata or {}).items():
        w.add_key_value(key, value, vtype)
    hd = DIM // HEADS

    def mat(rows, cols):
        return (rng.standard_normal((rows, cols)) / np.sqrt(cols)).astype(np.float32)

    def vec():
        return (1 + 0.2 * rng.standard_normal(DIM)).astype(np.float32)

    tensors = {"token_embd.weight": rng.standard_normal((len(tokens), DIM)).astype(np.float32)}
    for i in range(LAYERS):
        tensors |= {
            f"blk.{i}.attn_norm.weight": vec(),
            f"blk.{i}.attn_q.weight": mat(HEADS * hd, DIM),
            f"blk.{i}.attn_k.weight": mat(KV_HEADS * hd, DIM),
            f"blk.{i}.attn_v.weight": mat(KV_HEADS * hd, DIM),
            f"blk.{i}.attn_output.weight": mat(DIM, HEADS * hd),
            f"blk.{i}.ffn_norm.weight": vec(),
            f"blk.{i}.ffn_gate.weight": mat(HIDDEN, DIM),
            f"blk.{i}.ffn_up.weight": mat(HIDDEN, DIM),
            f"blk.{i}.ffn_down.weight": mat(DIM, HIDDEN),
        }
    tensors["output_norm.weight"] = vec()
    if not tied:
        tensors["output.weight"] = mat(len(tokens), DIM)
    if reshape is not None:
        tensors[reshape[0]] = np.zeros(reshape[1], np.float32)
    for name, array in tensors.items():
        if name in drop:
            continue
        if array.ndim == 1 or qtype == Q.F32:
            w.add_tensor(name, array)
        elif qtype == Q.F16:
            w.add_tensor(name, array.astype(np.float16))
        else:
            w.add_tensor(name, gguf.quants.quantize(array, qtype), raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def reference_weights(path) -> dict[str, torch.Tensor]:
    """Every tensor of the file as float32, read and dequantized by the gguf package."""
    reader = gguf.GGUFReader(str(path))
    return {t.name: torch.from_numpy(np.array(gguf.quants.dequantize(t.data, t.tensor_type))) for t in reader.tensors}


def rope(x: torch.Tensor, theta: float) -> torch.Tensor:
    """llama.cpp's "normal" rope: pair (x[2i], x[2i + 1]) of each head rotated by pos * theta^(-2i / head_dim)."""
    _, T, _, D = x.shape
    inv = theta ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)
    angle = torch.arange(T, dtype=torch.float64)[:, None] * inv[None, :]
    cos, sin = angle.cos().float()[None, :, None, :], angle.sin().float()[None, :, None, :]
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)


def torch_llama(w: dict[str, torch.Tensor], ids: list[int]) -> torch.Tensor:
    """The (T, vocab) logits of `ids`, plain torch ops on the gguf package's weights."""

    def rms(x, weight):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * weight

    T, hd = len(ids), DIM // HEADS
    h = w["token_embd.weight"][torch.tensor(ids)][None]
    mask = torch.full((T, T), float("-inf")).triu(1)
    for i in range(LAYERS):
        p = f"blk.{i}."
        x = rms(h, w[p + "attn_norm.weight"])
        q = rope((x @ w[p + "attn_q.weight"].T).view(1, T, HEADS, hd), THETA)
        k = rope((x @ w[p + "attn_k.weight"].T).view(1, T, KV_HEADS, hd), THETA)
        v = (x @ w[p + "attn_v.weight"].T).view(1, T, KV_HEADS, hd)
        k, v = (t.repeat_interleave(HEADS // KV_HEADS, dim=2) for t in (k, v))  # head h reads kv head h // 2
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        att = torch.softmax(q @ k.transpose(-1, -2) / hd**0.5 + mask, dim=-1)
        h = h + (att @ v).transpose(1, 2).reshape(1, T, DIM) @ w[p + "attn_output.weight"].T
        x = rms(h, w[p + "ffn_norm.weight"])
        gate, up = x @ w[p + "ffn_gate.weight"].T, x @ w[p + "ffn_up.weight"].T
        h = h + (torch.nn.functional.silu(gate) * up) @ w[p + "ffn_down.weight"].T
    head = w.get("output.weight", w["token_embd.weight"])
    return (rms(h, w["output_norm.weight"]) @ head.T)[0]


def torch_greedy(w: dict[str, torch.Tensor], ids: list[int], n: int) -> list[int]:
    ids = list(ids)
    for _ in range(n):
        ids.append(int(torch_llama(w, ids)[-1].argmax()))
    return ids


PROMPT = "Once upon a time the quick brown fox"


@pytest.fixture(scope="module", params=[Q.F32, Q.F16, Q.Q8_0, Q.Q4_0], ids=lambda q: q.name)
def model_file(request, tmp_path_factory):
    path = tmp_path_factory.mktemp("gguf") / f"llama-{request.param.name}.gguf"
    write_llama(path, request.param)
    return path


def test_logits_match_torch(model_file):
    model, tok, w = Llama.from_gguf(model_file), Tokenizer.from_gguf(model_file), reference_weights(model_file)
    c = model.config
    assert (c.dim, c.n_layers, c.n_heads, c.kv_heads, c.ffn_hidden_dim) == (DIM, LAYERS, HEADS, KV_HEADS, HIDDEN)
    assert (c.vocab_size, c.max_seq_len, c.norm_eps, c.rope_theta) == (
        tok.vocab_size,
        CONTEXT,
        np.float32(EPS),
        THETA,
    )  # stored as FLOAT32
    ids = tok.encode(PROMPT)
    assert ids[0] == 1 and len(ids) > 8
    got = model(Tensor([ids])).numpy()[0]
    np.testing.assert_allclose(got, torch_llama(w, ids).numpy(), rtol=1e-4, atol=1e-4)


def test_greedy_generation_matches_torch(model_file):
    model, tok, w = Llama.from_gguf(model_file), Tokenizer.from_gguf(model_file), reference_weights(model_file)
    ids = tok.encode(PROMPT)
    expected = torch_greedy(w, ids, 12)
    # next_token_logits pads the sequence; the last real position's logits are the unpadded model's
    np.testing.assert_allclose(next_token_logits(model, ids), torch_llama(w, ids)[-1].numpy(), rtol=1e-4, atol=1e-4)
    new = list(generate_tokens(lambda context: next_token_logits(model, context), ids, 12))
    assert ids + new == expected
    text = generate(model, tok, PROMPT, max_new_tokens=12, stop_at_eos=False)
    assert text == tok.decode(expected)[len(tok.decode(ids)) :]


def test_cached_decoding_matches_torch_with_one_capture(model_file):
    model, tok, w = Llama.from_gguf(model_file), Tokenizer.from_gguf(model_file), reference_weights(model_file)
    ids = tok.encode(PROMPT)
    logits_of = CachedLogits(model)
    context, captures = list(ids), set()
    for _ in range(8):
        got = logits_of(context)
        np.testing.assert_allclose(got, torch_llama(w, context)[-1].numpy(), rtol=1e-4, atol=1e-4)
        if logits_of.step.captured:
            captures.add(id(logits_of.step._capture))
        context.append(int(np.argmax(got)))
    assert len(captures) == 1  # every decode step after the capture replays it
    # a context that does not extend the last one starts again from its prompt
    np.testing.assert_allclose(logits_of(ids[:5]), torch_llama(w, ids[:5])[-1].numpy(), rtol=1e-4, atol=1e-4)


def test_tied_output_is_the_embedding(tmp_path):
    path = tmp_path / "tied.gguf"
    write_llama(path, Q.Q8_0, tied=True, seed=1)
    model, w = Llama.from_gguf(path), reference_weights(path)
    assert "output.weight" not in w and model.output.weight is model.tok_embeddings.weight
    ids = [1, 5, 300, 42, 7]
    np.testing.assert_allclose(model(Tensor([ids])).numpy()[0], torch_llama(w, ids).numpy(), rtol=1e-4, atol=1e-4)


def test_sampled_generation_is_reproducible_and_follows_the_sampler(tmp_path):
    path = tmp_path / "f32.gguf"
    write_llama(path, Q.F32, seed=2)
    model, tok, w = Llama.from_gguf(path), Tokenizer.from_gguf(path), reference_weights(path)
    ids = tok.encode("Hello")
    a = list(generate_tokens(lambda c: next_token_logits(model, c), ids, 6, Sampler(temperature=0.9, seed=7)))
    # the same draws from the torch model's logits with a sampler of the same seed
    sampler, context = Sampler(temperature=0.9, seed=7), list(ids)
    for _ in range(6):
        context.append(sampler(torch_llama(w, context)[-1].numpy()))
    assert ids + a == context
    # top_k=1 is greedy
    assert (
        list(generate_tokens(lambda c: next_token_logits(model, c), ids, 4, Sampler(1.0, top_k=1, seed=0)))
        == (torch_greedy(w, ids, 4)[len(ids) :])
    )


def test_generation_stops_at_eos_and_checks_the_context(tmp_path):
    path = tmp_path / "f32.gguf"
    write_llama(path, Q.F32, seed=3)
    model, tok = Llama.from_gguf(path), Tokenizer.from_gguf(path)
    always_eos = np.zeros(tok.vocab_size)
    always_eos[tok.eos_id] = 1.0
    assert list(generate_tokens(lambda c: always_eos, [1], 5, stop_ids=[tok.eos_id])) == [tok.eos_id]
    with pytest.raises(ValueError, match="exceed the model's max_seq_len 64"):
        generate(model, tok, PROMPT, max_new_tokens=CONTEXT)
    with pytest.raises(ValueError, match="the model takes 1 to 64"):
        next_token_logits(model, [])


# ---- files that are not a LLaMA of the sizes they claim


def test_missing_unknown_and_misshapen_tensors_are_named(tmp_path):
    path = tmp_path / "missing.gguf"
    write_llama(path, Q.F32, drop=("blk.1.ffn_up.weight", "output_norm.weight"))
    with pytest.raises(ArgumentError, match=r"missing tensors \['output_norm.weight', 'blk.1.ffn_up.weight'\]"):
        Llama.from_gguf(path)
    path = tmp_path / "misshapen.gguf"
    write_llama(path, Q.F32, reshape=("blk.0.attn_k.weight", (DIM, DIM)))
    with pytest.raises(ArgumentError, match=r"blk.0.attn_k.weight is \(64, 64\), expected \(32, 64\)"):
        Llama.from_gguf(path)
    path = tmp_path / "extra.gguf"
    write_llama(path, Q.F32, reshape=("blk.2.attn_q.weight", (DIM, DIM)))
    with pytest.raises(ArgumentError, match=r"a LLaMA of 2 blocks does not have \['blk.2.attn_q.weight'\]"):
        Llama.from_gguf(path)


def test_unsupported_metadata_is_refused(tmp_path):
    path = tmp_path / "partial_rope.gguf"
    write_llama(path, Q.F32, rope_dims=8)
    with pytest.raises(ArgumentError, match="dimension_count is 8, the head width 16; a rotary embedding over part"):
        Llama.from_gguf(path)
    path = tmp_path / "scaled_rope.gguf"
    write_llama(path, Q.F32, metadata={"llama.rope.scaling.type": ("linear", gguf.GGUFValueType.STRING)})
    with pytest.raises(ArgumentError, match="scales its rotary embedding"):
        Llama.from_gguf(path)
    w = gguf.GGUFWriter(str(tmp_path / "gpt2.gguf"), "gpt2")
    w.add_embedding_length(DIM)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with pytest.raises(ArgumentError, match="holds a 'gpt2' model"):
        Llama.from_gguf(tmp_path / "gpt2.gguf")


# ---- llama.cpp itself


@pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is None,
    reason="llama-cpp-python is not installed (it compiles llama.cpp at install time; not a test extra)",
)
def test_logits_match_llama_cpp(model_file):
    import llama_cpp

    tok = Tokenizer.from_gguf(model_file)
    ids = tok.encode(PROMPT)
    llm = llama_cpp.Llama(model_path=str(model_file), n_ctx=CONTEXT, logits_all=True, verbose=False)
    assert llm.tokenize(PROMPT.encode(), add_bos=True) == ids
    llm.eval(ids)
    theirs = np.array(llm.scores[: len(ids)], dtype=np.float32)
    ours = Llama.from_gguf(model_file)(Tensor([ids])).numpy()[0]
    # llama.cpp quantizes the activations for its Q8_0/Q4_0 dot products: a looser bound than against torch
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=5e-2 * max(1.0, float(np.abs(theirs).max())))
