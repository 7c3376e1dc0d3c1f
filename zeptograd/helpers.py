"""Environment flags and small utilities shared by every stage.

Flags are `ContextVar`s: read from the environment once, and changeable for a block of code.

>>> with Context(DEBUG=2):
...     DEBUG.value
2
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar


class ArgumentError(RuntimeError, ValueError):
    """A shape, axis or value an op cannot take. A RuntimeError, as PyTorch raises for these (so code written for
    it catches it), and a ValueError, as numpy and Python code expect.

    >>> issubclass(ArgumentError, RuntimeError) and issubclass(ArgumentError, ValueError)
    True
    """


class JitError(RuntimeError):
    """What TinyJit cannot capture or replay faithfully (a value read back to Python during the capture, a nested
    capture, state the function replaced instead of assigning), raised instead of replaying something else."""


class DTypeError(NotImplementedError, TypeError):
    """An op that is not defined for its operands' dtype (`<<` on floats): a NotImplementedError (a RuntimeError)
    as PyTorch raises, and a TypeError as Python expects."""


def cache_dir() -> Path:
    """The folder of the disk caches (compiled kernels, BEAM plans): `$ZEPTOGRAD_CACHE_DIR`, else
    `~/.cache/zeptograd`. It may not exist yet: whoever writes there creates it."""
    return Path(os.environ.get("ZEPTOGRAD_CACHE_DIR") or Path.home() / ".cache" / "zeptograd")


def path_arg(path: Any, op: str) -> str:
    """`path` (a str or os.PathLike) as a str; a TypeError naming `op` for anything else.

    >>> path_arg(Path("model.pt"), "torch_load")
    'model.pt'
    """
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{op}: path must be a str or os.PathLike, got {type(path).__name__}")
    return os.fspath(path)


def existing_file(path: Any, op: str, kind: str) -> str:
    """`path_arg(path, op)`, checked to name a file: FileNotFoundError when nothing is there, IsADirectoryError
    (saying a `kind` file was expected) for a folder."""
    path = path_arg(path, op)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{op}: no such file: {path}")
    if os.path.isdir(path):
        raise IsADirectoryError(f"{op}: {path} is a directory, not a {kind} file")
    return path


def getenv(key: str, default: int = 0) -> int:
    """An integer environment variable (`DEBUG=2`), or `default` when unset or empty."""
    raw = os.environ.get(key, "")
    if raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"environment variable {key} must be an integer, got {raw!r}") from None


class ContextVar:
    """A named integer flag, initialised from the environment and overridable with `Context(NAME=value)`."""

    registry: ClassVar[dict[str, ContextVar]] = {}

    def __init__(self, key: str, default: int = 0):
        if key in ContextVar.registry:
            raise ValueError(f"flag {key} is defined twice")
        self.key = key
        self.value = getenv(key, default)
        ContextVar.registry[key] = self

    def __bool__(self) -> bool:
        return bool(self.value)

    def __ge__(self, other: int) -> bool:
        return self.value >= other

    def __gt__(self, other: int) -> bool:
        return self.value > other

    def __repr__(self) -> str:
        return f"{self.key}={self.value}"


@contextlib.contextmanager
def Context(**flags: int) -> Iterator[None]:
    """Set flags for the duration of a `with` block; the old values come back after it."""
    unknown = [k for k in flags if k not in ContextVar.registry]
    if unknown:
        raise KeyError(f"unknown flag(s) {unknown}; known: {sorted(ContextVar.registry)}")
    saved = {k: ContextVar.registry[k].value for k in flags}
    try:
        for k, v in flags.items():
            ContextVar.registry[k].value = v
        yield
    finally:
        for k, v in saved.items():
            ContextVar.registry[k].value = v


DEBUG = ContextVar("DEBUG", 0)
TRACK_REWRITES = ContextVar("TRACK_REWRITES", 0)
SPEC = ContextVar("SPEC", 0)  # 1: check every new UOp against the stage-independent spec as it is built
NOOPT = ContextVar("NOOPT", 0)  # 1: no kernel optimizations (scalar loops, one core)
BEAM = ContextVar("BEAM", 0)  # n > 0: search kernel plans by timing them, keeping the n best at each step
THREADS = ContextVar("THREADS", os.cpu_count() or 1)  # how many cores a kernel may use
TRAINING = ContextVar("TRAINING", 0)  # 1: dropout drops and BatchNorm uses batch statistics (Tensor.training)
NO_MEMORY_PLANNER = ContextVar("NO_MEMORY_PLANNER", 0)  # 1: every intermediate buffer gets its own allocation
# 1: 3x3 stride-1 float32 convolutions as Winograd F(4x4, 3x3) (mixin/nn.py): a quarter of the multiplies, about
# 40x the rounding error of the direct sum (still ~1e-5 of the output's scale); 0 (default): the direct sum
WINO = ContextVar("WINO", 0)
# an elementwise value that several kernels read is stored once when recomputing it costs at least this many cheap
# ops per element (schedule/kernelize.py); 0 stores every shared value
STORE_COST = ContextVar("STORE_COST", 24)


class GlobalCounters:
    """What has run since the last `reset()`: kernels launched, their estimated operations and bytes, and the
    time they took. `mem_used` is the bytes of device memory that buffers hold now (memory kept in the pool for
    reuse is not counted); `mem_peak` is the most `mem_used` has been since the last `reset()`, which does not
    change `mem_used` and starts the peak again from it.

    >>> GlobalCounters.reset(); GlobalCounters.kernel_count
    0
    """

    kernel_count: ClassVar[int] = 0
    global_ops: ClassVar[int] = 0
    global_mem: ClassVar[int] = 0
    time_sum_s: ClassVar[float] = 0.0
    mem_used: ClassVar[int] = 0
    mem_peak: ClassVar[int] = 0

    @staticmethod
    def reset() -> None:
        GlobalCounters.mem_peak = GlobalCounters.mem_used
        GlobalCounters.kernel_count = 0
        GlobalCounters.global_ops = 0
        GlobalCounters.global_mem = 0
        GlobalCounters.time_sum_s = 0.0
