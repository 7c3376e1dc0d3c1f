"""Train a byte-level GPT on the Python standard library's own source files, then sample Python from it.

    pip install -e ".[examples]" && python -m zeptograd.examples.gpt

The text is every `.py` file under `sysconfig.get_paths()["stdlib"]` (no download): a file whose path's CRC-32 is
a multiple of 10 is held out for evaluation, the rest train. A batch is `--batch` random windows of `--context + 1`
bytes from the training files (numpy on the host; the draw depends only on the seed and the step, so a resumed
run sees the batches the uninterrupted one would have). The model is `zeptograd.models.gpt.GPT` over 256 byte
values, trained by AdamW with the gradients clipped to norm `--clip` and the learning rate warming up linearly
for `--warmup` steps, then following a cosine down to a tenth of `--lr`. The whole step (forward, backward,
clipping, the update and the schedule) runs under TinyJit: from the third step on it replays captured kernels.

Every `--eval-every` steps the mean loss over fixed windows of the held-out files is printed. At the end, or on
Ctrl-C, a checkpoint (the model, AdamW's moments and step counts, the schedule's step, and the settings in the
metadata) is saved to `--checkpoint`; `--resume PATH` continues that run where it stopped, with the same losses
as if it had never stopped. Then `--sample-bytes` bytes are sampled after `--prompt` (`--temperature`, `--top-k`,
`--top-p`, `--seed`). The last line printed is the held-out loss (ln 256 = 5.545 for uniform bytes), the
training speed and the time the run took.
"""

from __future__ import annotations

import argparse
import json
import math
import sysconfig
import time
import zlib
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from zeptograd import Tensor, TinyJit
from zeptograd.models.generation import CachedLogits
from zeptograd.models.gpt import GPT, GPTConfig
from zeptograd.models.sampling import Sampler
from zeptograd.nn import optim
from zeptograd.nn.state import get_parameters, get_state_dict, load_state_dict, safe_load, safe_load_metadata, safe_save

UNIFORM_LOSS = math.log(256)


@dataclass(frozen=True)
class Settings:
    """Everything that decides the numbers of a training run (saved in a checkpoint's metadata)."""

    layers: int = 4
    d_model: int = 128
    heads: int = 4
    context: int = 128
    batch: int = 16
    steps: int = 800
    lr: float = 3e-3
    warmup: int = 50
    weight_decay: float = 0.01
    clip: float = 1.0
    seed: int = 0
    files: int = 0  # training files used (0: all), for quick runs
    eval_windows: int = 64


def source_files(root: str | Path | None = None) -> tuple[list[Path], list[Path]]:
    """The `.py` files under `root` (the standard library by default; installed packages left out), sorted, split
    into training and held-out files by the CRC-32 of each one's path relative to `root`: the same split on every
    machine with the same files."""
    base = Path(sysconfig.get_paths()["stdlib"] if root is None else root)
    files = sorted(p for p in base.rglob("*.py") if not {"site-packages", "dist-packages"} & set(p.parts))
    held_out = [p for p in files if zlib.crc32(p.relative_to(base).as_posix().encode()) % 10 == 0]
    chosen = set(held_out)
    return [p for p in files if p not in chosen], held_out


def read_bytes(files: list[Path]) -> np.ndarray:
    """The files' bytes one after the other, as uint8."""
    return np.frombuffer(b"".join(p.read_bytes() for p in files), dtype=np.uint8)


def batch_at(data: np.ndarray, step: int, batch: int, context: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Inputs and targets (int32, (batch, context)) of training step `step`: random windows of `data`, the targets
    one byte on. The draw depends only on (seed, step).

    >>> x, y = batch_at(np.frombuffer(b"abcdefghij", np.uint8), step=0, batch=2, context=4, seed=0)
    >>> x.shape, bytes(x[0].astype(np.uint8)) in b"abcdefghij", bool((x[:, 1:] == y[:, :-1]).all())
    ((2, 4), True, True)
    """
    if len(data) <= context + 1:
        raise ValueError(f"gpt example: {len(data)} bytes of text is too little for windows of {context + 1}")
    starts = np.random.default_rng([seed, step]).integers(0, len(data) - context, size=batch)
    windows = data[starts[:, None] + np.arange(context + 1)].astype(np.int32)
    return windows[:, :-1], windows[:, 1:]


def eval_windows(data: np.ndarray, count: int, context: int) -> tuple[np.ndarray, np.ndarray]:
    """`count` windows spread evenly over `data`: the same held-out windows at every evaluation.

    >>> x, y = eval_windows(np.frombuffer(b"abcdefghij", np.uint8), count=2, context=3)
    >>> [bytes(row.astype(np.uint8)) for row in x], [bytes(row.astype(np.uint8)) for row in y]
    ([b'abc', b'ghi'], [b'bcd', b'hij'])
    """
    starts = np.linspace(0, len(data) - context - 1, count).astype(np.int64)
    windows = data[starts[:, None] + np.arange(context + 1)].astype(np.int32)
    return windows[:, :-1], windows[:, 1:]


class Trainer:
    """The model, its optimizer and schedule, the jitted training and evaluation steps, and the step count."""

    def __init__(self, settings: Settings, train: np.ndarray, held_out: np.ndarray):
        s = self.settings = settings
        if s.eval_windows % s.batch:
            raise ValueError(f"gpt example: eval_windows ({s.eval_windows}) must be a multiple of batch ({s.batch})")
        self.train, self.held_out = train, held_out
        Tensor.manual_seed(s.seed)
        config = GPTConfig(vocab_size=256, context=s.context, d_model=s.d_model, n_heads=s.heads, n_layers=s.layers)
        self.model = GPT(config)
        self.params = get_parameters(self.model)
        self.opt = optim.AdamW(self.params, lr=s.lr, betas=(0.9, 0.95), weight_decay=s.weight_decay)
        self.sched = optim.WarmupCosineLR(self.opt, s.warmup, s.steps, min_lr=s.lr / 10)
        self.step = 0
        self._train_step = TinyJit(self._train_graph)
        self._eval_step = TinyJit(self._eval_graph)

    def _train_graph(self, x: Tensor, y: Tensor) -> Tensor:
        loss = self.model(x).sparse_categorical_crossentropy(y)
        self.opt.zero_grad()
        loss.backward()
        optim.clip_grad_norm_(self.params, self.settings.clip)
        self.opt.step()
        self.sched.step()
        return loss

    def _eval_graph(self, x: Tensor, y: Tensor) -> Tensor:
        return self.model(x).sparse_categorical_crossentropy(y)

    def train_step(self) -> float:
        """Run training step `self.step` and return its loss."""
        s = self.settings
        x, y = batch_at(self.train, self.step, s.batch, s.context, s.seed)
        loss = self._train_step(Tensor(x), Tensor(y)).item()
        self.step += 1
        return loss

    def evaluate(self) -> float:
        """The mean loss over the fixed held-out windows."""
        s = self.settings
        x, y = eval_windows(self.held_out, s.eval_windows, s.context)
        losses = [
            self._eval_step(Tensor(x[i : i + s.batch]), Tensor(y[i : i + s.batch])).item()
            for i in range(0, len(x), s.batch)
        ]
        return float(np.mean(losses))

    def state(self) -> dict[str, Any]:
        """The tensors a checkpoint holds, by name: loading assigns into these same buffers, so a captured
        TinyJit step keeps working on them."""
        opt = self.opt
        return {
            "model": self.model,
            "opt": {"m": opt.m, "v": opt.v, "t": opt.t_state, "lr": opt.lr},
            "sched": {"step": self.sched.step_count},
        }

    def save(self, path: str | Path) -> None:
        safe_save(get_state_dict(self.state()), path, metadata={"settings": json.dumps(asdict(self.settings))})

    def load(self, path: str | Path) -> None:
        load_state_dict(self.state(), safe_load(path))
        self.step = int(self.sched.step_count.item())


def checkpoint_settings(path: str | Path) -> Settings:
    """The settings a checkpoint was trained with."""
    saved = json.loads(safe_load_metadata(path)["settings"])
    return Settings(**{f.name: saved[f.name] for f in fields(Settings)})


def generate(model: GPT, prompt: bytes, count: int, sampler: Sampler) -> bytes:
    """`count` bytes sampled after `prompt`, one at a time, through the model's KV caches (`CachedLogits`): the
    prompt in one call, then one byte a step in one TinyJit capture. Past the model's context the last `context`
    bytes are a new prompt at each step (the positions start again at 0)."""
    if not prompt:
        raise ValueError("gpt example: the prompt must have at least one byte")
    logits_of = CachedLogits(model)
    ids = list(prompt)
    for _ in range(count):
        ids.append(sampler(logits_of(ids[-model.config.context :])))
    return bytes(ids[len(prompt) :])


def main() -> None:
    from tqdm import tqdm

    defaults = Settings()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=defaults.layers)
    parser.add_argument("--d-model", type=int, default=defaults.d_model)
    parser.add_argument("--heads", type=int, default=defaults.heads)
    parser.add_argument("--context", type=int, default=defaults.context)
    parser.add_argument("--batch", type=int, default=defaults.batch)
    parser.add_argument("--steps", type=int, default=defaults.steps)
    parser.add_argument("--lr", type=float, default=defaults.lr)
    parser.add_argument("--warmup", type=int, default=None, help="warmup steps (default: a sixteenth of the steps)")
    parser.add_argument("--weight-decay", type=float, default=defaults.weight_decay)
    parser.add_argument("--clip", type=float, default=defaults.clip, help="the gradients' maximum total norm")
    parser.add_argument("--seed", type=int, default=defaults.seed, help="initialization, batches and sampling")
    parser.add_argument("--files", type=int, default=0, help="use only this many training files (0: all)")
    parser.add_argument("--eval-every", type=int, default=100)
    parser.add_argument("--eval-windows", type=int, default=defaults.eval_windows)
    parser.add_argument("--checkpoint", default="gpt_stdlib.safetensors", help="where to save the checkpoint")
    parser.add_argument("--resume", default=None, metavar="PATH", help="continue the run saved in PATH")
    parser.add_argument("--prompt", default="def ")
    parser.add_argument("--sample-bytes", type=int, default=400)
    parser.add_argument("--temperature", type=float, default=0.8)
    parser.add_argument("--top-k", type=int, default=0)
    parser.add_argument("--top-p", type=float, default=0.95)
    args = parser.parse_args()

    start = time.perf_counter()
    if args.resume:
        settings = checkpoint_settings(args.resume)
        print(f"resuming {args.resume} with its settings: {settings}")
    else:
        settings = Settings(
            layers=args.layers,
            d_model=args.d_model,
            heads=args.heads,
            context=args.context,
            batch=args.batch,
            steps=args.steps,
            lr=args.lr,
            warmup=args.warmup if args.warmup is not None else args.steps // 16,
            weight_decay=args.weight_decay,
            clip=args.clip,
            seed=args.seed,
            files=args.files,
            eval_windows=math.ceil(args.eval_windows / args.batch) * args.batch,
        )
    train_files, held_out_files = source_files()
    if settings.files:
        train_files = train_files[: settings.files]
    train, held_out = read_bytes(train_files), read_bytes(held_out_files)
    print(
        f"text: {len(train_files)} training files ({len(train) / 1e6:.1f} MB), "
        f"{len(held_out_files)} held out ({len(held_out) / 1e6:.1f} MB)"
    )
    trainer = Trainer(settings, train, held_out)
    if args.resume:
        trainer.load(args.resume)
    n_params = sum(p.numel() for p in trainer.params)
    print(f"model: {settings.layers} layers, d_model {settings.d_model}, {n_params / 1e6:.2f} M parameters")

    tokens = settings.batch * settings.context
    # tokens/s over the replayed steps: the first two compile and capture, and evaluations are not counted
    first_timed, timed_s, rate = trainer.step + 2, 0.0, 0.0
    eval_loss = float("nan")
    try:
        with tqdm(total=settings.steps, initial=trainer.step, unit="step") as bar:
            while trainer.step < settings.steps:
                step_start = time.perf_counter()
                loss = trainer.train_step()
                if trainer.step > first_timed:
                    timed_s += time.perf_counter() - step_start
                    rate = tokens * (trainer.step - first_timed) / timed_s
                bar.set_postfix(loss=f"{loss:.3f}", tok_s=f"{rate:.0f}")
                bar.update()
                if trainer.step % args.eval_every == 0 or trainer.step == settings.steps:
                    eval_loss = trainer.evaluate()
                    bar.write(f"step {trainer.step}: train loss {loss:.4f}, held-out loss {eval_loss:.4f}")
    except KeyboardInterrupt:
        trainer.save(args.checkpoint)
        print(
            f"\ninterrupted at step {trainer.step}: saved {args.checkpoint}; continue with --resume {args.checkpoint}"
        )
        return
    if math.isnan(eval_loss):
        eval_loss = trainer.evaluate()
    trainer.save(args.checkpoint)
    print(f"saved {args.checkpoint} (step {trainer.step})")

    sampler = Sampler(temperature=args.temperature, top_k=args.top_k, top_p=args.top_p, seed=args.seed)
    prompt = args.prompt.encode()
    sample = generate(trainer.model, prompt, args.sample_bytes, sampler)
    print("-" * 60)
    print((prompt + sample).decode("utf-8", errors="replace"))
    print("-" * 60)
    print(
        f"held-out loss: {eval_loss:.4f} (uniform bytes: {UNIFORM_LOSS:.4f}), {rate:.0f} tokens/s "
        f"({time.perf_counter() - start:.1f} s)"
    )


if __name__ == "__main__":
    main()
