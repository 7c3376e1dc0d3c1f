"""Whole-model speed of zeptograd against torch eager and torch.compile (a benchmark, not a test).

    python bench/models.py                    # every model of the suite (zeptograd.models), about 20 minutes
    python bench/models.py --quick            # tiny sizes, a few steps: a smoke test
    python bench/models.py --only gpt,resnet18
    python bench/models.py --no-memory        # skip the peak-memory runs (a subprocess per model and library)

Needs the test extra (`pip install -e ".[test]"`): torch, and the torch twins of the models in test/models/.

For each model, three tables' rows:

- train: one optimizer step (forward, loss, backward, Adam update, `loss.item()`). zeptograd runs the step
  under TinyJit (its first call runs the kernels, the second captures them, the rest replay); torch eager runs
  the same model (the test suite's twin, weights copied in); torch.compile runs `torch.compile` of the forward
  and loss (Inductor's CPU backend; backward through AOTAutograd), with torch's eager Adam.
- infer 1 / infer N: the forward in inference mode (no gradients, BatchNorm on its running statistics) at batch 1
  and at the training batch: zeptograd under TinyJit, torch eager under `torch.no_grad()`, torch.compile of the
  module.

Columns: the median time of one step, steps/s, items/s (tokens for the language models, images otherwise), the
ratio of zeptograd's throughput to each torch (above 1: zeptograd is faster), "first": the seconds its first two
steps took (zeptograd: compiling every kernel and the TinyJit capture; torch.compile: tracing and Inductor's
compile; both with empty caches), and "peak": the growth of the process's resident memory over a few training
steps in a fresh process of its own (ru_maxrss after the steps minus the resident size before the model is
built: parameters, gradients, optimizer state, activations, and whatever else the library keeps, compiled
kernels included).

How it is timed: the libraries take turns (5 rounds; in each, every library gets a 0.3 s pause, one untimed step
and its share of the timed steps), so that all see the same phases of a shared machine; the figure is the median.
torch uses every core (torch.set_num_threads(os.cpu_count())), as zeptograd's kernels do.

The roofline table lists, for each model's training step, the kernels above 2% of the step's kernel time (from an
un-jitted step: the same kernels, timed one launch at a time): GFLOP/s and GB/s (zeptograd's estimates of a
kernel's operations and bytes) against the machine's peaks measured in the same run (the best of zeptograd and
torch on a 1024 x 1024 matmul, and of zeptograd and numpy on a 64 MiB copy), and how the kernel got its plan.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import subprocess
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

import torch  # noqa: E402
from model_oracle import copy_weights, cross_entropy, mse  # noqa: E402

from zeptograd import Tensor, TinyJit  # noqa: E402
from zeptograd.engine import realize as engine  # noqa: E402
from zeptograd.nn import optim  # noqa: E402
from zeptograd.nn.state import get_state_dict  # noqa: E402

torch.set_num_threads(os.cpu_count() or 1)
ROUNDS = 5


@dataclass
class Case:
    """One model of the suite at one size: both libraries' models (same weights), a training batch, the loss."""

    name: str
    model: Any
    twin: Any
    inputs: tuple[np.ndarray, ...]  # the training batch; inference uses it and its first item
    targets: np.ndarray
    loss: Callable[[Any, Any], Any]
    items: int  # tokens or images in the batch


def _ids(rng: np.random.Generator, vocab: int, batch: int, tokens: int) -> np.ndarray:
    return rng.integers(0, vocab, (batch, tokens)).astype(np.int32)


def make_case(name: str, quick: bool) -> Case:
    """Build model `name` in both libraries, weights copied from torch's, with a batch of random data."""
    rng = np.random.default_rng(0)
    torch.manual_seed(0)
    Tensor.manual_seed(0)
    if name == "mlp":
        from test_model_mlp import TorchMLP

        from zeptograd.models.mlp import MLP, MLPConfig

        c = MLPConfig(in_features=784, hidden=(64,) if quick else (512, 512), num_classes=10)
        b = 16 if quick else 128
        x = rng.standard_normal((b, 784)).astype(np.float32)
        case = Case(name, MLP(c), TorchMLP(c), (x,), rng.integers(0, 10, b).astype(np.int32), cross_entropy, b)
    elif name in ("resnet18", "resnet50"):
        from test_model_resnet import ARCHS, TorchResNet

        make, block, layers = ARCHS[name]
        stem, width, side, b = ("cifar", 32, 32, 32) if name == "resnet18" else ("imagenet", 32, 64, 16)
        if quick:
            width, side, b = 8, 16, 2
        twin = TorchResNet(block, layers, 10, stem, width)
        x = rng.standard_normal((b, 3, side, side)).astype(np.float32)
        y = rng.integers(0, 10, b).astype(np.int32)
        case = Case(name, make(num_classes=10, stem=stem, width=width), twin, (x,), y, cross_entropy, b)
    elif name == "gpt":
        from test_model_gpt import TorchGPT

        from zeptograd.models.gpt import GPT, GPTConfig

        c = GPTConfig(vocab_size=512, context=64, d_model=128, n_heads=4, n_layers=4)
        b, t = 8, 64
        if quick:
            c, b, t = GPTConfig(vocab_size=64, context=16, d_model=32, n_heads=2, n_layers=2), 2, 16
        ids, y = _ids(rng, c.vocab_size, b, t), _ids(rng, c.vocab_size, b, t)
        case = Case(name, GPT(c), TorchGPT(c), (ids,), y, cross_entropy, b * t)
    elif name == "llama":
        from test_model_llama import TorchLlama

        from zeptograd.models.llama import Llama, LlamaConfig

        dim, layers, b, t, vocab = (32, 2, 2, 16, 64) if quick else (128, 4, 8, 64, 512)
        c = LlamaConfig(
            vocab_size=vocab, dim=dim, n_layers=layers, n_heads=4, n_kv_heads=2, multiple_of=32, max_seq_len=t
        )
        ids, y = _ids(rng, vocab, b, t), _ids(rng, vocab, b, t)
        case = Case(name, Llama(c), TorchLlama(c), (ids,), y, cross_entropy, b * t)
    elif name == "vit":
        from test_model_vit import TorchViT

        from zeptograd.models.vit import ViT, ViTConfig

        dim, depth, b = (32, 2, 2) if quick else (128, 4, 32)
        c = ViTConfig(image_size=32, patch_size=4, in_channels=3, num_classes=10, dim=dim, depth=depth, n_heads=4)
        x = rng.standard_normal((b, 3, 32, 32)).astype(np.float32)
        y = rng.integers(0, 10, b).astype(np.int32)
        case = Case(name, ViT(c), TorchViT(c), (x,), y, cross_entropy, b)
    elif name == "lstm":
        from test_model_lstm import TorchLSTMLM

        from zeptograd.models.lstm import LSTMLM, LSTMConfig

        vocab, width, b, t = (32, 16, 2, 8) if quick else (512, 128, 16, 32)
        c = LSTMConfig(vocab_size=vocab, embed_size=width, hidden_size=width, n_layers=2)
        ids, y = _ids(rng, vocab, b, t), _ids(rng, vocab, b, t)
        case = Case(name, LSTMLM(c), TorchLSTMLM(c), (ids,), y, cross_entropy, b * t)
    elif name == "unet":
        from test_model_unet import TorchUNet

        from zeptograd.models.unet import UNet, UNetConfig

        c = UNetConfig(base_channels=8 if quick else 16, depth=2 if quick else 3, groups=4)
        b, side = (2, 16) if quick else (8, 32)
        x = rng.standard_normal((b, 3, side, side)).astype(np.float32)
        y = rng.standard_normal((b, 3, side, side)).astype(np.float32)
        case = Case(name, UNet(c), TorchUNet(c), (x,), y, mse, b)
    else:
        raise ValueError(f"unknown model {name!r}; choose from {', '.join(MODELS)}")
    copy_weights(case.model, case.twin)
    return case


MODELS = ("mlp", "resnet18", "resnet50", "gpt", "llama", "vit", "lstm", "unet")


# ---------------------------------------------------------------------------------------------------------------
# steps: each builder returns a function of no arguments that runs one step and waits for its result


def zeptograd_train(case: Case) -> Callable[[], float]:
    names = {k for k, _ in case.twin.named_parameters()}
    params = [v for k, v in get_state_dict(case.model).items() if k in names]
    for p in params:
        p.requires_grad = True
    opt = optim.Adam(params, lr=1e-3)

    @TinyJit
    def step(*args: Tensor) -> Tensor:
        *xs, y = args
        with Tensor.train():
            opt.zero_grad()
            loss = case.loss(case.model(*xs), y)
            loss.backward()
            opt.step()
        return loss.realize()

    xs = [Tensor(x) for x in case.inputs]
    y = Tensor(case.targets)
    return lambda: step(*xs, y).item()


def torch_train(case: Case, compiled: bool) -> Callable[[], float]:
    twin = copy.deepcopy(case.twin).train()
    opt = torch.optim.Adam(twin.parameters(), lr=1e-3)

    def forward_loss(*args: Any) -> Any:
        *xs, y = args
        return case.loss(twin(*xs), y)

    fn = torch.compile(forward_loss) if compiled else forward_loss
    args = [torch.from_numpy(x.copy()) for x in (*case.inputs, case.targets)]

    def step() -> float:
        opt.zero_grad()
        loss = fn(*args)
        loss.backward()
        opt.step()
        return loss.item()

    return step


def zeptograd_infer(case: Case, batch: int) -> Callable[[], Any]:
    forward = TinyJit(lambda *xs: case.model(*xs).realize())
    xs = [Tensor(x[:batch]) for x in case.inputs]

    def step() -> Any:
        with Tensor.train(False):
            return forward(*xs)

    return step


def torch_infer(case: Case, batch: int, compiled: bool) -> Callable[[], Any]:
    twin = copy.deepcopy(case.twin).eval()
    fn = torch.compile(twin) if compiled else twin
    xs = [torch.from_numpy(x[:batch].copy()) for x in case.inputs]

    def step() -> Any:
        with torch.no_grad():
            return fn(*xs)

    return step


LIBS = ("zeptograd", "torch", "compile")


def builders(case: Case, task: str) -> dict[str, Callable[[], Callable[[], Any]]]:
    if task == "train":
        return {
            "zeptograd": lambda: zeptograd_train(case),
            "torch": lambda: torch_train(case, False),
            "compile": lambda: torch_train(case, True),
        }
    batch = 1 if task == "infer 1" else len(case.inputs[0])
    return {
        "zeptograd": lambda: zeptograd_infer(case, batch),
        "torch": lambda: torch_infer(case, batch, False),
        "compile": lambda: torch_infer(case, batch, True),
    }


def time_task(case: Case, task: str, steps: int) -> dict[str, dict[str, float]]:
    """The first-two-steps time and the median step time of each library on `task`, in alternating rounds."""
    fns: dict[str, Callable[[], Any]] = {}
    first: dict[str, float] = {}
    for lib, build in builders(case, task).items():
        start = time.perf_counter()
        fns[lib] = build()
        fns[lib]()
        fns[lib]()
        first[lib] = time.perf_counter() - start
    times: dict[str, list[float]] = {lib: [] for lib in fns}
    per_round = max(1, steps // ROUNDS)
    for _ in range(ROUNDS):
        for lib, fn in fns.items():
            time.sleep(0.3)
            fn()
            for _ in range(per_round):
                start = time.perf_counter()
                fn()
                times[lib].append(time.perf_counter() - start)
    return {lib: {"first": first[lib], "step": statistics.median(times[lib])} for lib in fns}


# ---------------------------------------------------------------------------------------------------------------
# peak memory: a fresh process per model and library


def peak_memory_child(name: str, lib: str, quick: bool) -> None:
    """Print the growth of this process's resident memory over a few training steps (run in a subprocess)."""
    before = _status_kib("VmRSS")
    case = make_case(name, quick)
    step = zeptograd_train(case) if lib == "zeptograd" else torch_train(case, False)
    for _ in range(4):
        step()
    print(json.dumps({"peak": (_status_kib("VmHWM") - before) * 1024}))


def _status_kib(field: str) -> int:
    """A field of /proc/self/status in KiB (VmHWM: the peak resident size of this process image; unlike ru_maxrss
    it does not carry over the parent's from before the exec)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def peak_memory(name: str, lib: str, quick: bool) -> float | None:
    args = [sys.executable, os.path.abspath(__file__), "--peak-child", name, lib] + (["--quick"] if quick else [])
    out = subprocess.run(args, capture_output=True, text=True, env=os.environ.copy())
    if out.returncode != 0:
        print(f"peak memory of {name} on {lib} failed:\n{out.stderr[-2000:]}", file=sys.stderr)
        return None
    return json.loads(out.stdout.strip().splitlines()[-1])["peak"]


# ---------------------------------------------------------------------------------------------------------------
# roofline


def machine_peaks() -> tuple[float, float]:
    """The best GFLOP/s of a 1024 x 1024 matmul (zeptograd or torch) and GB/s of a 64 MiB copy (zeptograd or
    numpy), measured now."""
    n = 1024
    a, b = (np.random.default_rng(1).standard_normal((n, n)).astype(np.float32) for _ in range(2))
    za, zb = Tensor(a).realize(), Tensor(b).realize()
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    big = np.ones(1 << 24, np.float32)
    zbig = Tensor(big).realize()
    dst = np.empty_like(big)

    def best(fn: Callable[[], Any], runs: int = 10) -> float:
        fn()
        out = []
        for _ in range(runs):
            start = time.perf_counter()
            fn()
            out.append(time.perf_counter() - start)
        return min(out)

    matmul = max(2 * n**3 / best(lambda: (za @ zb).realize()), 2 * n**3 / best(lambda: ta @ tb)) * 1e-9
    copy_bytes = 2 * big.nbytes
    copy_gbs = max(copy_bytes / best(lambda: (zbig * 1.0001).realize()), copy_bytes / best(lambda: np.copyto(dst, big)))
    return matmul, copy_gbs * 1e-9


def roofline(case: Case, peaks: tuple[float, float], steps: int = 3) -> list[str]:
    """The kernels above 2% of an un-jitted training step's kernel time, slowest first."""
    names = {k for k, _ in case.twin.named_parameters()}
    params = [v for k, v in get_state_dict(case.model).items() if k in names]
    opt = optim.Adam(params, lr=1e-3)
    xs, y = [Tensor(x) for x in case.inputs], Tensor(case.targets)
    runs: list[list[tuple[Any, float]]] = []
    for i in range(steps + 1):
        engine.kernel_log = []
        with Tensor.train():
            opt.zero_grad()
            loss = case.loss(case.model(*xs), y)
            loss.backward()
            opt.step()
            loss.item()
        if i:  # the first compiles
            runs.append(engine.kernel_log)
    engine.kernel_log = None
    n = min(len(r) for r in runs)
    kernels = [(runs[0][i][0], statistics.median(r[i][1] for r in runs)) for i in range(n)]
    total = sum(t for _, t in kernels)
    rows = []
    for program, t in sorted(kernels, key=lambda k: -k[1]):
        if t < 0.02 * total:
            break
        gflops, gbs = program.flops / t * 1e-9, program.mem_bytes / t * 1e-9
        bound = "matmul" if program.flops > 1e7 else "memory"
        frac = gflops / peaks[0] if bound == "matmul" else gbs / peaks[1]
        opts = " ".join(f"{o.op.name}:{o.axis}:{o.amount}" for o in program.opts) or "-"
        rows.append(
            f"  {case.name:<9} {program.name[:30]:<30} {t * 1e3:8.2f} ms {100 * t / total:5.1f}% "
            f"{gflops:8.1f} GFLOP/s {gbs:7.1f} GB/s  {frac:5.2f} of {bound} peak  {opts[:60]}"
        )
    shown = len(rows)
    rest = total - sum(t for _, t in sorted(kernels, key=lambda k: -k[1])[:shown])
    rows.append(
        f"  {case.name:<9} {len(kernels)} kernels a step, {total * 1e3:.1f} ms of kernel time; the "
        f"{len(kernels) - shown} not shown take {rest * 1e3:.1f} ms ({100 * rest / total:.0f}%)"
    )
    return rows


# ---------------------------------------------------------------------------------------------------------------


def fmt_time(s: float) -> str:
    return f"{s * 1e3:.2f} ms" if s < 1 else f"{s:.2f} s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny models and few steps: a smoke test")
    parser.add_argument("--only", default="", help=f"comma-separated models of: {', '.join(MODELS)}")
    parser.add_argument("--steps", type=int, default=0, help="timed steps per library and task")
    parser.add_argument("--no-memory", action="store_true", help="skip the peak-memory subprocesses")
    parser.add_argument("--peak-child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.peak_child:
        peak_memory_child(*args.peak_child, args.quick)
        return
    names = [n for n in args.only.split(",") if n] or list(MODELS)
    for n in names:
        if n not in MODELS:
            parser.error(f"unknown model {n!r}; choose from {', '.join(MODELS)}")
    steps = args.steps or (5 if args.quick else 25)
    peaks = machine_peaks()
    print(
        f"machine: matmul {peaks[0]:.1f} GFLOP/s, copy {peaks[1]:.1f} GB/s; torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads"
    )

    header = (
        f"{'model':<9} {'task':<8} {'zeptograd':>10} {'torch':>10} {'compile':>10} {'zg items/s':>11} "
        f"{'x torch':>8} {'x compile':>9} {'zg first':>9} {'tc first':>9} {'zg peak':>8} {'torch peak':>10}"
    )
    table, roof = [header], []
    for name in names:
        case = make_case(name, args.quick)
        mem = dict.fromkeys(("zeptograd", "torch"))
        if not args.no_memory:
            mem = {lib: peak_memory(name, lib, args.quick) for lib in mem}
        for task in ("train", "infer 1", "infer N"):
            r = time_task(case, task, steps)
            items = case.items if task != "infer 1" else case.items // len(case.inputs[0])
            z, t, c = r["zeptograd"]["step"], r["torch"]["step"], r["compile"]["step"]
            peak = [f"{m / 2**20:.0f} MiB" if m is not None and task == "train" else "-" for m in mem.values()]
            row = (
                f"{name:<9} {task:<8} {fmt_time(z):>10} {fmt_time(t):>10} {fmt_time(c):>10} {items / z:11.0f} "
                f"{t / z:8.2f} {c / z:9.2f} {r['zeptograd']['first']:8.1f}s {r['compile']['first']:8.1f}s "
                f"{peak[0]:>8} {peak[1]:>10}"
            )
            print(row, flush=True)
            table.append(row)
        roof += roofline(case, peaks)
    print("\n" + "\n".join(table))
    print("\nroofline (kernels above 2% of a training step's kernel time):\n" + "\n".join(roof))


if __name__ == "__main__":
    main()
