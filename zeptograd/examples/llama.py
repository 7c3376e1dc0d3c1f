"""Generate text with a LLaMA from a GGUF file (llama.cpp's format; F32, F16 and the quantized types load).

    python -m zeptograd.examples.llama                                   # a tiny random model, offline
    python -m zeptograd.examples.llama --gguf model.gguf --prompt "Once upon a time" --tokens 64
    python -m zeptograd.examples.llama --temperature 0.8 --top-k 40 --top-p 0.95 --seed 0

Without `--gguf` it writes a tiny LLaMA with random weights and a small SentencePiece-style vocabulary to a
temporary directory and generates from that: the words are noise, the path from file to tokens is the real one.
The model runs on the whole sequence at each step (no key/value cache), so the time per token grows with the
length; it prints the time to load, the prompt's tokens, the text, and the tokens per second.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

from zeptograd.models.generation import generate_tokens, next_token_logits
from zeptograd.models.llama import Llama
from zeptograd.models.sampling import Sampler
from zeptograd.models.tiny_gguf import write_tiny_llama_gguf
from zeptograd.models.tokenizer import Tokenizer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gguf", help="a LLaMA GGUF file (default: a tiny random one written to a temp dir)")
    parser.add_argument("--prompt", default="Once upon a time")
    parser.add_argument("--tokens", type=int, default=32, help="new tokens to generate")
    parser.add_argument("--temperature", type=float, default=0.0, help="0: greedy")
    parser.add_argument("--top-k", type=int, default=0)
    parser.add_argument("--top-p", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-seq-len", type=int, default=None, help="context to allocate (default: the file's)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        path = args.gguf or write_tiny_llama_gguf(os.path.join(tmp, "tiny-llama.gguf"), seed=args.seed)
        start = time.perf_counter()
        model, tokenizer = Llama.from_gguf(path, max_seq_len=args.max_seq_len), Tokenizer.from_gguf(path)
        c = model.config
        print(
            f"model: {os.path.basename(path)}: dim {c.dim}, {c.n_layers} layers, {c.n_heads} heads "
            f"({c.kv_heads} key/value), vocabulary {c.vocab_size}, context {c.max_seq_len}"
        )
        print(f"loaded in {time.perf_counter() - start:.2f} s")

    ids = tokenizer.encode(args.prompt)
    if len(ids) + args.tokens > c.max_seq_len:
        sys.exit(f"the prompt's {len(ids)} tokens and {args.tokens} new ones exceed the context {c.max_seq_len}")
    print(f"prompt: {len(ids)} tokens {ids}")
    sampler = Sampler(args.temperature, args.top_k, args.top_p, seed=args.seed)
    stop = [tokenizer.eos_id] if tokenizer.eos_id is not None else []
    prefix = tokenizer.decode(ids)
    print(prefix, end="", flush=True)
    shown, new, steps = len(prefix), [], []
    before = time.perf_counter()
    for token in generate_tokens(lambda context: next_token_logits(model, context), ids, args.tokens, sampler, stop):
        now = time.perf_counter()
        steps.append(now - before)
        before = now
        new.append(token)
        text = tokenizer.decode(ids + new)
        if not text.endswith("\ufffd"):  # wait for the rest of a character split over byte tokens
            print(text[shown:], end="", flush=True)
            shown = len(text)
    print(tokenizer.decode(ids + new)[shown:])
    report(steps, len(ids), c.max_seq_len)


def report(steps: list[float], prompt: int, limit: int) -> None:
    """Tokens per second over all steps, and over those that reused kernels: a step whose padded length (the next
    power of two, see next_token_logits) is new compiles kernels for it."""
    if not steps:
        return
    padded = [min(1 << (prompt + i - 1).bit_length(), limit) for i in range(len(steps))]
    new_length = [i == 0 or padded[i] != padded[i - 1] for i in range(len(steps))]
    compiling = sum(t for t, fresh in zip(steps, new_length) if fresh)
    reused = [t for t, fresh in zip(steps, new_length) if not fresh]
    print(
        f"{len(steps)} tokens in {sum(steps):.2f} s: {len(steps) / sum(steps):.1f} tokens/s; "
        f"{sum(new_length)} steps met a new padded length and compiled for it ({compiling:.2f} s), "
        f"the other {len(reused)}: {len(reused) / sum(reused) if reused else 0.0:.1f} tokens/s"
    )


if __name__ == "__main__":
    main()
