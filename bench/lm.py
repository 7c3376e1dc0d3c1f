"""Language models in zeptograd against PyTorch and llama.cpp (a benchmark, not a test).

    python bench/lm.py               # a GPT's training, a ~130M-parameter LLaMA's generation and its cache memory
    python bench/lm.py --quick       # tiny sizes, few steps: a smoke test
    python bench/lm.py --only gen --formats f32,q8_0

Needs the test extra (torch, gguf); llama.cpp's column needs llama-cpp-python (`pip install llama-cpp-python`,
which builds llama.cpp from source), and says "not installed" without it. In every table the contenders take turns
in rounds (the first round untimed, a warm-up), so that all see the same phases of a shared machine; a figure is
the median over the timed rounds. torch uses every core, as zeptograd's kernels do; llama.cpp gets as many threads.

Tables:

- train: the byte-level GPT of `zeptograd/examples/gpt.py` (4 layers, d_model 256, 4 heads, context 128, batch
  16) trained by that example's own step (AdamW, gradient clipping, warmup-cosine schedule, all under TinyJit),
  against the same model in torch.nn with the same initial weights and the same batches, stepped by torch's AdamW,
  clip_grad_norm_ and SequentialLR(LinearLR, CosineAnnealingLR), eager and with the forward and loss under
  torch.compile (Inductor). Columns: the median time of a step, tokens/s (batch x context over it), zeptograd's
  tokens/s over each torch's (above 1: zeptograd is faster) and the target that ratio is judged against.
- generate: a LLaMA of random weights (dim 768, 12 layers, 12 heads, vocabulary 32000, context 512) written to a
  GGUF file in F32, F16 and Q8_0, generating greedily at batch 1: "prompt" is tokens/s processing a prompt of
  128 tokens from an empty cache (to the next token's logits), "decode" tokens/s over the next 64 tokens, one a
  call. zeptograd runs `Llama.from_gguf` (which dequantizes every weight to float32) through `CachedLogits`: the
  prompt in one call, each new token in one TinyJit replay with the position a bound Variable. torch eager runs
  a LLaMA written here on the file's weights as `gguf.quants.dequantize` gives them (float32), with a
  preallocated cache of the maximum length and a mask, as zeptograd's; llama.cpp (llama-cpp-python) runs the
  same file with its own kernels for each format (F16 and Q8_0 weights stay in their format; its KV cache is
  F16). Ratios are zeptograd's tokens/s over each other's. Before the timings the three generate from the same
  prompt on the F32 file: the table "agreement" gives the greedy tokens that match zeptograd's and the largest
  difference between the first logits.
- memory: the bytes of KV cache one position of context takes: from the formula (2 x layers x the keys' width x
  the element's bytes: zeptograd's `KVCache` tensors and torch's are float32, llama.cpp's F16); "allocated", the
  growth of the cache's allocation between a model made for 512 positions and one for 2048, per position
  (zeptograd: its allocator's bytes in use, `GlobalCounters.mem_used`, every live buffer; torch: its cache
  tensors; llama.cpp: the KV buffer its log reports; it pads a context to a multiple of 256 positions, so under
  `--quick`, 64 and 256, its figure is 0); "resident", the growth of the process's resident memory (VmRSS) from
  after the prompt to a full context of 512, per token processed.
- profile: zeptograd's decode step on the F32 file, one kernel launch at a time (as DEBUG=2 prints them): the
  kernels by name with their time, GB/s and GFLOP/s, the TinyJit step's time and the bandwidth that makes of the
  weights' bytes, next to a 64 MiB copy's bandwidth measured in the same run.

The last lines give the machine's load (`os.getloadavg`) before and after: the host may be shared.
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

os.environ.setdefault("ZEPTOGRAD_CACHE_DIR", tempfile.mkdtemp(prefix="zeptograd-bench-"))
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="inductor-bench-"))
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "test", "models"))

import gguf  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from test_model_gpt import TorchGPT  # noqa: E402

from zeptograd import Tensor  # noqa: E402
from zeptograd.dtype import dtypes  # noqa: E402
from zeptograd.examples.gpt import Settings, Trainer, batch_at  # noqa: E402
from zeptograd.helpers import GlobalCounters  # noqa: E402
from zeptograd.models.generation import CachedLogits  # noqa: E402
from zeptograd.models.llama import Llama, LlamaConfig, rope_tables  # noqa: E402
from zeptograd.models.tiny_gguf import tiny_vocabulary  # noqa: E402
from zeptograd.nn.state import get_state_dict  # noqa: E402

THREADS = os.cpu_count() or 1
torch.set_num_threads(THREADS)
NOT_INSTALLED = "not installed (pip install llama-cpp-python)"

try:
    import llama_cpp
except ImportError:
    llama_cpp = None


def take_turns(fns: dict[str, Callable[[], Any]], rounds: int, pause: float = 0.2) -> dict[str, list[Any]]:
    """Each round calls every function once, in turn, after a short pause; the first round is a warm-up whose
    results are dropped. Returns each function's results of the timed rounds."""
    out: dict[str, list[Any]] = {name: [] for name in fns}
    for r in range(rounds + 1):
        for name, fn in fns.items():
            time.sleep(pause)
            result = fn()
            if r:
                out[name].append(result)
    return out


def ratio(ours: float, theirs: float | None) -> str:
    return "-" if theirs is None else f"{ours / theirs:.2f}x"


# ---------------------------------------------------------------------------------------------------------------
# (a) GPT training


def torch_gpt_step(trainer: Trainer, compiled: bool) -> Callable[[], float]:
    """One training step of the torch twin of `trainer`'s GPT: its own copy of the initial weights, the same
    batches in the same order, the example's optimizer, clipping and schedule in torch."""
    s = trainer.settings
    twin = TorchGPT(trainer.model.config)
    state = {k: torch.from_numpy(v.numpy().copy()) for k, v in get_state_dict(trainer.model).items()}
    twin.load_state_dict(state)
    twin.train()
    opt = torch.optim.AdamW(twin.parameters(), lr=s.lr, betas=(0.9, 0.95), weight_decay=s.weight_decay)
    warm = torch.optim.lr_scheduler.LinearLR(opt, start_factor=1 / max(s.warmup, 1), total_iters=s.warmup)
    cosine = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=s.steps - s.warmup, eta_min=s.lr / 10)
    sched = torch.optim.lr_scheduler.SequentialLR(opt, [warm, cosine], milestones=[s.warmup])

    def forward_loss(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        logits = twin(x)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))

    fn = torch.compile(forward_loss) if compiled else forward_loss
    step = [0]

    def run() -> float:
        x, y = batch_at(trainer.train, step[0], s.batch, s.context, s.seed)
        loss = fn(torch.from_numpy(x).long(), torch.from_numpy(y).long())
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(twin.parameters(), s.clip)
        opt.step()
        sched.step()
        step[0] += 1
        return loss.item()

    return run


def bench_train(quick: bool, rounds: int) -> None:
    if quick:
        settings = Settings(layers=2, d_model=64, heads=2, context=32, batch=4, steps=1000, warmup=10)
    else:
        settings = Settings(layers=4, d_model=256, heads=4, context=128, batch=16, steps=1000, warmup=50)
    text = np.random.default_rng(0).integers(0, 256, 1 << 20).astype(np.uint8)
    trainer = Trainer(settings, text, text)
    steps: dict[str, Callable[[], float]] = {"zeptograd": trainer.train_step}
    # the twins start from zeptograd's initial weights, so the first losses agree
    steps["torch eager"] = torch_gpt_step(trainer, compiled=False)
    steps["torch.compile"] = torch_gpt_step(trainer, compiled=True)
    first_losses = {name: fn() for name, fn in steps.items()}
    for fn in steps.values():
        fn()  # zeptograd's second step captures the TinyJit; torch.compile's compiled in the first

    def timed(fn: Callable[[], float], n: int) -> Callable[[], float]:
        def run() -> float:
            start = time.perf_counter()
            for _ in range(n):
                fn()
            return (time.perf_counter() - start) / n

        return run

    per_round = 1 if quick else 2
    times = take_turns({name: timed(fn, per_round) for name, fn in steps.items()}, rounds)
    tokens = settings.batch * settings.context
    step_s = {name: statistics.median(t) for name, t in times.items()}
    ours = tokens / step_s["zeptograd"]
    n_params = sum(p.numel() for p in trainer.params)
    print(
        f"\n## train: GPT {settings.layers} layers, d_model {settings.d_model}, {settings.heads} heads, context "
        f"{settings.context}, batch {settings.batch} ({n_params / 1e6:.2f} M parameters), AdamW + clipping + "
        f"warmup-cosine; first losses {', '.join(f'{k} {v:.4f}' for k, v in first_losses.items())}\n"
    )
    print("| library | step | tokens/s | zeptograd's ratio | target |")
    print("|---|---|---|---|---|")
    targets = {"torch eager": ">= 1.0x", "torch.compile": ">= 1.0x (aim)"}
    for name, t in step_s.items():
        mark = "-" if name == "zeptograd" else ratio(ours, tokens / t)
        print(f"| {name} | {t * 1e3:.1f} ms | {tokens / t:.0f} | {mark} | {targets.get(name, '-')} |", flush=True)


# ---------------------------------------------------------------------------------------------------------------
# (b) generation: the model file, the three libraries


@dataclass(frozen=True)
class Sizes:
    dim: int
    n_layers: int
    n_heads: int
    vocab: int
    context: int
    prompt: int
    new_tokens: int

    @property
    def hidden(self) -> int:
        return LlamaConfig(dim=self.dim).ffn_hidden_dim


FULL = Sizes(dim=768, n_layers=12, n_heads=12, vocab=32000, context=512, prompt=128, new_tokens=64)
QUICK = Sizes(dim=64, n_layers=2, n_heads=4, vocab=512, context=64, prompt=16, new_tokens=8)
QTYPES = {
    "f32": gguf.GGMLQuantizationType.F32,
    "f16": gguf.GGMLQuantizationType.F16,
    "q8_0": gguf.GGMLQuantizationType.Q8_0,
}


def random_llama_tensors(sizes: Sizes, seed: int = 0) -> dict[str, np.ndarray]:
    """GGUF name -> float32 weights of a random LLaMA: each linear layer's rows of unit norm on average, so that
    activations keep their scale through the depth."""
    rng = np.random.default_rng(seed)
    d, h = sizes.dim, sizes.hidden

    def linear(rows: int, cols: int) -> np.ndarray:
        return rng.standard_normal((rows, cols), dtype=np.float32) / np.float32(math.sqrt(cols))

    def norm() -> np.ndarray:
        return (1.0 + 0.1 * rng.standard_normal(d, dtype=np.float32)).astype(np.float32)

    tensors = {"token_embd.weight": rng.standard_normal((sizes.vocab, d), dtype=np.float32)}
    for i in range(sizes.n_layers):
        tensors.update(
            {
                f"blk.{i}.attn_norm.weight": norm(),
                f"blk.{i}.attn_q.weight": linear(d, d),
                f"blk.{i}.attn_k.weight": linear(d, d),
                f"blk.{i}.attn_v.weight": linear(d, d),
                f"blk.{i}.attn_output.weight": linear(d, d),
                f"blk.{i}.ffn_norm.weight": norm(),
                f"blk.{i}.ffn_gate.weight": linear(h, d),
                f"blk.{i}.ffn_up.weight": linear(h, d),
                f"blk.{i}.ffn_down.weight": linear(d, h),
            }
        )
    tensors["output_norm.weight"] = norm()
    tensors["output.weight"] = linear(sizes.vocab, d)
    return tensors


def write_gguf(path: str, sizes: Sizes, tensors: dict[str, np.ndarray], fmt: str) -> None:
    """The model in a GGUF file that llama.cpp loads: the matrices in `fmt` (the norms stay F32, as llama.cpp's
    converter keeps them), `llama.*` metadata, and a SentencePiece vocabulary of `sizes.vocab` tokens (a small
    real one padded with placeholder pieces; the benchmark feeds token ids, never text)."""
    tokens, scores, types = tiny_vocabulary()
    tokens, scores, types = tokens[: sizes.vocab], scores[: sizes.vocab], types[: sizes.vocab]
    pad = sizes.vocab - len(tokens)
    tokens += [f"<pad{i}>" for i in range(pad)]
    scores += [-1e4] * pad
    types += [int(gguf.TokenType.UNUSED)] * pad
    writer = gguf.GGUFWriter(path, "llama")
    writer.add_context_length(sizes.context)
    writer.add_embedding_length(sizes.dim)
    writer.add_block_count(sizes.n_layers)
    writer.add_feed_forward_length(sizes.hidden)
    writer.add_head_count(sizes.n_heads)
    writer.add_head_count_kv(sizes.n_heads)
    writer.add_rope_dimension_count(sizes.dim // sizes.n_heads)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_file_type({"f32": 0, "f16": 1, "q8_0": 7}[fmt])
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_unk_token_id(0)
    qtype = QTYPES[fmt]
    for name, w in tensors.items():
        if w.ndim == 1 or qtype == gguf.GGMLQuantizationType.F32:
            writer.add_tensor(name, w)
        elif qtype == gguf.GGMLQuantizationType.F16:
            writer.add_tensor(name, w.astype(np.float16))
        else:
            writer.add_tensor(name, gguf.quants.quantize(w, qtype), raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def dequantized_weights(path: str) -> dict[str, np.ndarray]:
    """GGUF name -> the file's tensor as float32, by the gguf package (an oracle independent of zeptograd's)."""
    out = {}
    for t in gguf.GGUFReader(path).tensors:
        values = gguf.quants.dequantize(t.data, t.tensor_type)
        out[t.name] = np.array(values.reshape(tuple(int(n) for n in reversed(t.shape))), np.float32, copy=True)
    return out


class TorchLlama:
    """A LLaMA for decoding in torch eager (Meta's interleaved rotary embedding, as zeptograd's and llama.cpp's
    "normal" rope): a cache of keys and values preallocated at the full length, written in place each call, read
    whole under a mask of the positions written so far. Only the last position goes through the output head."""

    def __init__(self, weights: dict[str, np.ndarray], sizes: Sizes, max_len: int):
        self.w = {k: torch.from_numpy(v) for k, v in weights.items()}
        self.sizes, self.max_len = sizes, max_len
        head_dim = sizes.dim // sizes.n_heads
        cos, sin = rope_tables(head_dim, max_len)
        self.cos, self.sin = torch.from_numpy(cos), torch.from_numpy(sin)
        shape = (sizes.n_layers, 1, sizes.n_heads, max_len, head_dim)
        self.keys, self.values = torch.zeros(shape), torch.zeros(shape)

    @property
    def cache_bytes(self) -> int:
        return self.keys.nbytes + self.values.nbytes

    @staticmethod
    def _rms(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * w

    def _rotate(self, x: torch.Tensor, start: int) -> torch.Tensor:
        B, H, T, D = x.shape
        cos, sin = self.cos[start : start + T], self.sin[start : start + T]
        pairs = x.reshape(B, H, T, D // 2, 2)
        re, im = pairs[..., 0], pairs[..., 1]
        return torch.stack((re * cos - im * sin, re * sin + im * cos), dim=-1).reshape(B, H, T, D)

    @torch.inference_mode()
    def __call__(self, tokens: list[int], start: int) -> np.ndarray:
        w, s = self.w, self.sizes
        T, H, D = len(tokens), s.n_heads, s.dim // s.n_heads
        h = w["token_embd.weight"][torch.tensor(tokens)].unsqueeze(0)
        mask = torch.arange(self.max_len)[None, :] <= torch.arange(T)[:, None] + start
        for i in range(s.n_layers):
            p = f"blk.{i}."
            x = self._rms(h, w[p + "attn_norm.weight"])
            q, k, v = (
                F.linear(x, w[p + n]).view(1, T, H, D).transpose(1, 2)
                for n in ("attn_q.weight", "attn_k.weight", "attn_v.weight")
            )
            q, k = self._rotate(q, start), self._rotate(k, start)
            self.keys[i, :, :, start : start + T] = k
            self.values[i, :, :, start : start + T] = v
            y = F.scaled_dot_product_attention(q, self.keys[i], self.values[i], attn_mask=mask)
            h = h + F.linear(y.transpose(1, 2).reshape(1, T, s.dim), w[p + "attn_output.weight"])
            x = self._rms(h, w[p + "ffn_norm.weight"])
            gate = F.silu(F.linear(x, w[p + "ffn_gate.weight"])) * F.linear(x, w[p + "ffn_up.weight"])
            h = h + F.linear(gate, w[p + "ffn_down.weight"])
        last = self._rms(h[:, -1], w["output_norm.weight"])
        return F.linear(last, w["output.weight"])[0].numpy()


class Contender:
    """A library generating from one model: `prompt(ids)` runs the ids from an empty cache and returns the next
    token's logits, `step(ids)` runs the last of `ids` (the others already cached) and returns the next logits."""

    def prompt(self, ids: list[int]) -> np.ndarray:
        raise NotImplementedError

    def step(self, ids: list[int]) -> np.ndarray:
        raise NotImplementedError


class ZeptogradLM(Contender):
    def __init__(self, path: str, max_len: int):
        self.model = Llama.from_gguf(path, max_seq_len=max_len)
        self.logits_of = CachedLogits(self.model)

    def prompt(self, ids: list[int]) -> np.ndarray:
        self.logits_of.context = []  # a new prompt: CachedLogits starts again from position 0
        return self.logits_of(ids)

    def step(self, ids: list[int]) -> np.ndarray:
        return self.logits_of(ids)

    @property
    def cache_bytes(self) -> int:
        return sum(
            c.numel() * c.dtype.itemsize
            for layer in self.model.layers
            for c in (layer.attention.cache.keys, layer.attention.cache.values)
        )


class TorchLM(Contender):
    def __init__(self, weights: dict[str, np.ndarray], sizes: Sizes, max_len: int):
        self.model = TorchLlama(weights, sizes, max_len)

    @property
    def cache_bytes(self) -> int:
        return self.model.cache_bytes

    def prompt(self, ids: list[int]) -> np.ndarray:
        return self.model(ids, 0)

    def step(self, ids: list[int]) -> np.ndarray:
        return self.model(ids[-1:], len(ids) - 1)


class LlamaCppLM(Contender):
    def __init__(self, path: str, max_len: int):
        assert llama_cpp is not None
        self.llm = llama_cpp.Llama(model_path=path, n_ctx=max_len, n_threads=THREADS, logits_all=False, verbose=False)
        self.n_vocab = self.llm.n_vocab()

    def _logits(self) -> np.ndarray:
        return np.ctypeslib.as_array(self.llm._ctx.get_logits(), shape=(self.n_vocab,)).copy()

    def prompt(self, ids: list[int]) -> np.ndarray:
        self.llm.reset()
        self.llm.eval(ids)
        return self._logits()

    def step(self, ids: list[int]) -> np.ndarray:
        self.llm.eval(ids[-1:])
        return self._logits()

    def close(self) -> None:
        self.llm.close()


def generation(lm: Contender, prompt: list[int], new_tokens: int) -> tuple[float, float, list[int], np.ndarray]:
    """Greedy generation: the prompt's seconds, the seconds of `new_tokens` single-token steps, the tokens chosen
    and the first logits."""
    start = time.perf_counter()
    first = logits = lm.prompt(prompt)
    mid = time.perf_counter()
    ids = list(prompt)
    for _ in range(new_tokens):
        ids.append(int(np.argmax(logits)))
        logits = lm.step(ids)
    end = time.perf_counter()
    return mid - start, end - mid, ids[len(prompt) :], first


def bench_generate(quick: bool, rounds: int, formats: list[str], folder: str) -> None:
    sizes = QUICK if quick else FULL
    weights = random_llama_tensors(sizes)
    n_params = sum(w.size for w in weights.values())
    prompt = np.random.default_rng(1).integers(3, sizes.vocab, sizes.prompt).tolist()
    print(
        f"\n## generate: LLaMA dim {sizes.dim}, {sizes.n_layers} layers, {sizes.n_heads} heads, FFN {sizes.hidden}, "
        f"vocabulary {sizes.vocab}, context {sizes.context} ({n_params / 1e6:.1f} M parameters, random weights); "
        f"batch 1, prompt {sizes.prompt} tokens, then {sizes.new_tokens} greedy tokens"
    )
    rows = []
    agreement = []
    for fmt in formats:
        path = os.path.join(folder, f"llama-{fmt}.gguf")
        write_gguf(path, sizes, weights, fmt)
        file_mb = os.path.getsize(path) / 1e6
        libs: dict[str, Contender] = {
            "zeptograd": ZeptogradLM(path, sizes.context),
            "torch eager": TorchLM(dequantized_weights(path), sizes, sizes.context),
        }
        if llama_cpp is not None:
            libs["llama.cpp"] = LlamaCppLM(path, sizes.context)
        if fmt == formats[0]:
            runs = {name: generation(lm, prompt, sizes.new_tokens) for name, lm in libs.items()}
            ours_tokens, ours_logits = runs["zeptograd"][2], runs["zeptograd"][3]
            for name, (_, _, tokens, logits) in runs.items():
                if name != "zeptograd":
                    same = next((i for i, (a, b) in enumerate(zip(tokens, ours_tokens)) if a != b), len(tokens))
                    diff = float(np.abs(logits - ours_logits).max())
                    agreement.append(f"| {fmt} | {name} | {same} of {len(tokens)} | {diff:.1e} |")
        results = take_turns(
            {name: (lambda lm=lm: generation(lm, prompt, sizes.new_tokens)) for name, lm in libs.items()}, rounds
        )
        rates = {
            name: (
                sizes.prompt / statistics.median(r[0] for r in res),
                sizes.new_tokens / statistics.median(r[1] for r in res),
            )
            for name, res in results.items()
        }
        rows.append((fmt, file_mb, rates))
        for lm in libs.values():
            if isinstance(lm, LlamaCppLM):
                lm.close()
        del libs
        gc.collect()
        os.remove(path)
    print(
        "\nagreement on the first file (zeptograd against each: greedy tokens equal before the first difference; "
        "largest difference of the prompt's next-token logits):\n"
    )
    print("| file | library | same tokens | largest logit difference |")
    print("|---|---|---|---|")
    for line in agreement:
        print(line)
    print(
        "\n| file | MB | stage | zeptograd tokens/s | torch eager tokens/s | llama.cpp tokens/s "
        "| vs torch (target) | vs llama.cpp (target) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for fmt, file_mb, rates in rows:
        for i, stage in enumerate(("prompt", "decode")):
            ours, eager = rates["zeptograd"][i], rates["torch eager"][i]
            cpp = rates["llama.cpp"][i] if "llama.cpp" in rates else None
            t_torch = ">= 1.0x" if stage == "prompt" else ">= 2x"
            t_cpp = ">= 0.5x" if stage == "decode" and fmt in ("f32", "q8_0") else "-"
            cpp_text = f"{cpp:.1f}" if cpp is not None else NOT_INSTALLED
            print(
                f"| {fmt} | {file_mb:.0f} | {stage} | {ours:.1f} | {eager:.1f} | {cpp_text} | "
                f"{ratio(ours, eager)} ({t_torch}) | {ratio(ours, cpp)} ({t_cpp}) |",
                flush=True,
            )


# ---------------------------------------------------------------------------------------------------------------
# (c) memory per token of context


def resident_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def llama_cpp_kv_bytes(path: str, max_len: int) -> int:
    """The bytes of the KV cache buffer llama.cpp allocates for a context of `max_len` positions, as its log
    reports them (read from its stderr, at the file descriptor, during the context's creation)."""
    assert llama_cpp is not None
    with tempfile.TemporaryFile("w+") as log:
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(log.fileno(), 2)
        try:
            llm = llama_cpp.Llama(model_path=path, n_ctx=max_len, n_threads=THREADS, logits_all=False, verbose=True)
            llm.close()  # it logs its teardown too
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
        log.seek(0)
        sizes = [float(m) for m in re.findall(r"KV buffer size = +([0-9.]+) MiB", log.read())]
    if not sizes:
        raise RuntimeError("llama.cpp's log gave no KV buffer size")
    return round(sum(sizes) * 2**20)


def bench_memory(quick: bool, folder: str) -> None:
    sizes = QUICK if quick else FULL
    short, long = sizes.context, 4 * sizes.context
    weights = random_llama_tensors(sizes)
    path = os.path.join(folder, "llama-f32-memory.gguf")
    write_gguf(path, sizes, weights, "f32")
    dequantized = dequantized_weights(path)
    rng = np.random.default_rng(1)
    prompt = rng.integers(3, sizes.vocab, sizes.prompt).tolist()
    more = rng.integers(3, sizes.vocab, sizes.context - sizes.prompt).tolist()
    kv_width = sizes.dim  # n_kv_heads * head_dim; the model has as many key/value heads as query heads
    formula = {
        "zeptograd": 2 * sizes.n_layers * kv_width * 4,
        "torch eager": 2 * sizes.n_layers * kv_width * 4,
        "llama.cpp": 2 * sizes.n_layers * kv_width * 2,
    }

    # allocated per position of capacity: a model made for `short` positions against one made for `long`
    zeptograd_used = []
    for n in (short, long):
        gc.collect()
        before = GlobalCounters.mem_used
        lm = ZeptogradLM(path, n)
        lm.prompt(prompt)
        zeptograd_used.append(GlobalCounters.mem_used - before)
        del lm
    capacity: dict[str, float] = {"zeptograd": (zeptograd_used[1] - zeptograd_used[0]) / (long - short)}
    capacity["torch eager"] = (
        TorchLlama(dequantized, sizes, long).cache_bytes - TorchLlama(dequantized, sizes, short).cache_bytes
    ) / (long - short)
    if llama_cpp is not None:
        capacity["llama.cpp"] = (llama_cpp_kv_bytes(path, long) - llama_cpp_kv_bytes(path, short)) / (long - short)

    # resident per token processed: one model of `short` positions, after the prompt and after filling it
    def fill(lm: Contender) -> None:
        done = list(prompt)
        for i in range(0, len(more), sizes.prompt):
            chunk = more[i : i + sizes.prompt]
            if isinstance(lm, ZeptogradLM):
                lm.model(Tensor([chunk], dtype=dtypes.int32), len(done)).realize()
            elif isinstance(lm, TorchLM):
                lm.model(chunk, len(done))
            else:
                assert isinstance(lm, LlamaCppLM)
                lm.llm.eval(chunk)
            done += chunk

    makers: dict[str, Callable[[], Contender]] = {
        "zeptograd": lambda: ZeptogradLM(path, short),
        "torch eager": lambda: TorchLM(dequantized, sizes, short),
    }
    if llama_cpp is not None:
        makers["llama.cpp"] = lambda: LlamaCppLM(path, short)
    resident: dict[str, float] = {}
    for name, make in makers.items():
        for _ in range(2):  # the first time compiles zeptograd's kernels, which would count as resident memory
            gc.collect()
            lm = make()
            lm.prompt(prompt)
            before = resident_bytes()
            fill(lm)
            resident[name] = (resident_bytes() - before) / len(more)
            if isinstance(lm, LlamaCppLM):
                lm.close()
            del lm
    os.remove(path)
    print(
        f"\n## memory: bytes per position of context, the generate table's model (F32 file)\n\n"
        f"allocated: the growth of the KV cache's allocation between a model made for {short} positions and one for "
        f"{long}, per position (zeptograd: its allocator's bytes in use, every live buffer; torch: its cache "
        f"tensors; llama.cpp: the KV buffer its log reports). resident: the growth of the process's resident memory "
        f"from after the prompt ({sizes.prompt} tokens) to a full context ({short}), per token, on the second "
        f"model made (the first compiles zeptograd's kernels)\n"
    )
    print("| library | KV cache (formula) | allocated | resident |")
    print("|---|---|---|---|")
    for name in ("zeptograd", "torch eager", "llama.cpp"):
        if name not in makers:
            print(f"| {name} | {formula[name]} | {NOT_INSTALLED} | - |")
            continue
        print(f"| {name} | {formula[name]} | {capacity[name]:.0f} | {resident[name]:.0f} |")


# ---------------------------------------------------------------------------------------------------------------
# where zeptograd's decode step goes


def bench_profile(quick: bool, folder: str, steps: int = 5) -> None:
    """The kernels of zeptograd's decode step on the F32 file, timed one launch at a time (the step run without
    TinyJit, with the position the same bound Variable, so the same kernels): the median over `steps` steps,
    slowest first, against the bandwidth of a 64 MiB copy measured now, and the jitted step's time."""
    from zeptograd.engine import realize as engine

    sizes = QUICK if quick else FULL
    path = os.path.join(folder, "llama-f32-profile.gguf")
    write_gguf(path, sizes, random_llama_tensors(sizes), "f32")
    lm = ZeptogradLM(path, sizes.context)
    prompt = np.random.default_rng(1).integers(3, sizes.vocab, sizes.prompt).tolist()
    lm.prompt(prompt)
    position = lm.logits_of.position
    runs = []
    for i in range(steps + 1):
        engine.kernel_log = []
        token = Tensor([[prompt[-1]]], dtype=dtypes.int32)
        lm.model(token, position.bind(sizes.prompt + i))[0, -1].realize().numpy()
        if i:  # the first compiles
            runs.append(engine.kernel_log)
    engine.kernel_log = None
    ids = list(prompt)
    lm.prompt(ids)
    jitted = []
    for _ in range(steps + 3):
        ids.append(1)
        start = time.perf_counter()
        lm.step(ids)
        jitted.append(time.perf_counter() - start)
    jit_s = statistics.median(jitted[3:])
    os.remove(path)

    big = np.ones(1 << 24, np.float32)
    dst = np.empty_like(big)
    copies = []
    for _ in range(10):
        start = time.perf_counter()
        np.copyto(dst, big)
        copies.append(time.perf_counter() - start)
    copy_gbs = 2 * big.nbytes / min(copies) * 1e-9

    n = min(len(r) for r in runs)
    kernels = [(runs[0][i][0], statistics.median(r[i][1] for r in runs)) for i in range(n)]
    total = sum(t for _, t in kernels)
    weight_bytes = 4 * sum(w.size for w in random_llama_tensors(sizes).values() if w.ndim == 2)
    weight_bytes -= 4 * sizes.vocab * sizes.dim  # the embedding reads one row
    print(
        f"\n## profile: zeptograd's decode step, F32 weights ({weight_bytes / 1e6:.0f} MB of matrices read a step)\n\n"
        f"{len(kernels)} kernels, {total * 1e3:.1f} ms of kernel time launched one at a time; the TinyJit replay "
        f"takes {jit_s * 1e3:.1f} ms a step ({weight_bytes / jit_s * 1e-9:.1f} GB/s of weights); a 64 MiB numpy "
        f"copy runs at {copy_gbs:.1f} GB/s (read + write) now\n"
    )
    groups: dict[str, list[float]] = {}
    for program, t in kernels:
        g = groups.setdefault(program.name, [0.0, 0, 0, 0])
        g[0] += t
        g[1] += 1
        g[2] += program.mem_bytes
        g[3] += program.flops
    print("| kernel | launches | time | share | GB/s | GFLOP/s |")
    print("|---|---|---|---|---|---|")
    for name, (t, count, mem, flops) in sorted(groups.items(), key=lambda kv: -kv[1][0]):
        if t < 0.01 * total:
            break
        print(
            f"| {name} | {count} | {t * 1e3:.2f} ms | {100 * t / total:.1f}% | {mem / t * 1e-9:.1f} | "
            f"{flops / t * 1e-9:.1f} |"
        )


# ---------------------------------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny models and few rounds: a smoke test")
    parser.add_argument(
        "--only", default="train,gen,memory,profile", help="comma-separated tables: train, gen, memory, profile"
    )
    parser.add_argument("--formats", default="f32,f16,q8_0", help="comma-separated GGUF formats: f32, f16, q8_0")
    parser.add_argument("--rounds", type=int, default=None, help="timed rounds (default 3, 2 with --quick)")
    args = parser.parse_args()
    rounds = args.rounds or (2 if args.quick else 3)
    wanted = args.only.split(",")
    formats = args.formats.split(",")
    for fmt in formats:
        if fmt not in QTYPES:
            parser.error(f"unknown format {fmt!r}; choose from {', '.join(QTYPES)}")
    folder = tempfile.mkdtemp(prefix="zeptograd-lm-")
    load = os.getloadavg()
    print(f"{THREADS} cores; llama.cpp: {'llama-cpp-python ' + llama_cpp.__version__ if llama_cpp else NOT_INSTALLED}")
    if "train" in wanted:
        bench_train(args.quick, rounds)
    if "gen" in wanted:
        bench_generate(args.quick, rounds, formats, folder)
    if "memory" in wanted:
        bench_memory(args.quick, folder)
    if "profile" in wanted:
        bench_profile(args.quick, folder)
    after = os.getloadavg()
    print(
        f"\nload average (1, 5, 15 min): before {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, "
        f"after {after[0]:.2f} {after[1]:.2f} {after[2]:.2f}"
    )


if __name__ == "__main__":
    main()
