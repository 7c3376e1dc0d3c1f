"""Tensor creation beyond full/zeros/ones/empty/arange: linspace, eye, *_like, tril/triu, meshgrid, random numbers.

Random numbers come from Threefry-2x32 (20 rounds, the counter-based generator of Salmon et al., "Parallel
random numbers: as easy as 1, 2, 3", and JAX), written with uint32 tensor ops. The key is the seed set by
`Tensor.manual_seed`; the counter of element `i` of the `n`-th random tensor made since is `(i, n)`. So the
same seed gives the same numbers on every device, and each call draws fresh ones.

>>> from zeptograd import Tensor
>>> Tensor.eye(2).tolist()
[[1.0, 0.0], [0.0, 1.0]]
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from zeptograd.dtype import DType, dtypes
from zeptograd.helpers import ArgumentError
from zeptograd.mixin.args import Scalar, compute_dtype, shape_arg, tensor_dtype
from zeptograd.uop.shape import prod

if TYPE_CHECKING:
    from zeptograd.tensor import Tensor

_U32 = 0xFFFFFFFF
# Threefry-2x32's rotation distances, one per round (they repeat every 8 rounds), and its key-schedule parity
_ROTATIONS = (13, 15, 26, 6, 17, 29, 16, 24)
_PARITY = 0x1BD11BDA
# how many random mantissa bits a float in [0, 1) of each dtype takes: all its fraction bits, so that every
# value k * 2**-m is exact in the dtype (and never rounds up to 1.0); float64 gets one 32-bit word's worth
_MANTISSA = {
    dtypes.fp8e4m3: 3,
    dtypes.fp8e5m2: 2,
    dtypes.float16: 10,
    dtypes.bfloat16: 7,
    dtypes.float32: 23,
    dtypes.float64: 32,
}


def _sizes(shape: tuple, op: str) -> tuple[int, ...]:
    out = shape_arg(shape, op)
    if any(s < 0 for s in out):
        raise ArgumentError(f"{op}: negative size in shape {out}")
    return out


def _float_dtype(dtype: DType | str | None, op: str) -> DType:
    dt = tensor_dtype(dtype, op) if dtype is not None else dtypes.default_float
    if not dtypes.is_float(dt):
        raise TypeError(f"{op}: random floats need a float dtype, got {dt!r}")
    return dt


# TinyJit's recorder (engine/jit.py): while it is a list, each random tensor's state words (a 3-element uint32
# tensor: call count, seed low, seed high) are appended to it with their call count, so replays can write new ones
rng_capturing: list[tuple[Tensor, int]] | None = None


class CreationMixin:
    """Tensor creation beyond full/zeros/ones/empty/arange: linspace, eye, *_like, tril/triu, meshgrid, random."""

    __slots__ = ()

    # the random generator's state: the key, and how many random tensors were made since it was set
    _seed: ClassVar[int] = int(time.time())
    _rng_counter: ClassVar[int] = 0

    # *** shapes of constants ***

    @classmethod
    def linspace(
        cls,
        start: int | float,
        stop: int | float | None = None,
        steps: int | None = None,
        dtype: DType | str | None = None,
        device: str | None = None,
        end: int | float | None = None,
    ) -> Tensor:
        """`steps` evenly spaced values from `start` to `stop`, both included (`end` is PyTorch's name for
        `stop`). Like PyTorch, the first half counts up from `start` and the second half down from `stop`, so
        both ends are exact.

        >>> Tensor.linspace(0, 1, 5).tolist()
        [0.0, 0.25, 0.5, 0.75, 1.0]
        """
        if stop is None:
            stop = end
        if stop is None or steps is None:
            raise TypeError("linspace: needs start, stop and steps")
        for name, v in (("start", start), ("stop", stop)):
            if not isinstance(v, (int, float)):
                raise TypeError(f"linspace: {name} must be a Python number, got {type(v).__name__}")
        if not isinstance(steps, int) or isinstance(steps, bool):
            raise TypeError(f"linspace: steps must be an int, got {steps!r}")
        if steps < 0:
            raise ArgumentError(f"linspace: number of steps must be non-negative, got {steps}")
        dt = tensor_dtype(dtype, "linspace") if dtype is not None else dtypes.default_float
        if steps <= 1:
            return cls.full((steps,), start, dtype=dt, device=device)
        # float32 and float64 compute in their own precision, float16 in float32; integers in float64, then
        # truncate toward zero (as PyTorch's integer linspace does)
        calc = dtypes.float64 if dt is dtypes.float64 or not dtypes.is_float(dt) else dtypes.float32
        step = (stop - start) / (steps - 1)
        idx = cls.arange(steps, dtype=calc, device=device)
        up = idx * step + start
        down = (idx - (steps - 1)) * step + stop
        return (idx < steps // 2).where(up, down).cast(dt)

    @classmethod
    def eye(cls, n: int, m: int | None = None, dtype: DType | str | None = None, device: str | None = None) -> Tensor:
        """The `n` x `m` identity matrix (`m` defaults to `n`), float32 unless `dtype` says otherwise.

        >>> Tensor.eye(2, 3, dtype="int").tolist()
        [[1, 0, 0], [0, 1, 0]]
        """
        m = n if m is None else m
        rows, cols = _sizes((n, m), "eye")
        dt = tensor_dtype(dtype, "eye") if dtype is not None else dtypes.default_float
        return (cls._diagonal_offsets(rows, cols, device) == 0).cast(dt)

    @classmethod
    def _diagonal_offsets(cls, rows: int, cols: int, device: str | None) -> Tensor:
        """The int32 (rows, cols) grid of j - i: which diagonal element (i, j) lies on (0 is the main one)."""
        i = cls.arange(rows, dtype=dtypes.int32, device=device).reshape(rows, 1)
        j = cls.arange(cols, dtype=dtypes.int32, device=device).reshape(1, cols)
        return j - i

    def tril(self, diagonal: int = 0) -> Tensor:
        """The lower triangle of the last two axes: elements with column - row <= `diagonal` (others are 0).

        >>> Tensor([[1, 2], [3, 4]]).tril().tolist()
        [[1, 0], [3, 4]]
        """
        return self._triangle(diagonal, lower=True)

    def triu(self, diagonal: int = 0) -> Tensor:
        """The upper triangle of the last two axes: elements with column - row >= `diagonal` (others are 0).

        >>> Tensor([[1, 2], [3, 4]]).triu(1).tolist()
        [[0, 2], [0, 0]]
        """
        return self._triangle(diagonal, lower=False)

    def _triangle(self, diagonal: int, lower: bool) -> Tensor:
        name = "tril" if lower else "triu"
        if self.ndim < 2:
            raise ArgumentError(f"{name}: needs a tensor of at least 2 dimensions, got shape {self.shape}")
        if not isinstance(diagonal, int) or isinstance(diagonal, bool):
            raise TypeError(f"{name}: diagonal must be an int, got {diagonal!r}")
        offsets = self._diagonal_offsets(self.shape[-2], self.shape[-1], self.device)
        mask = offsets < diagonal + 1 if lower else offsets > diagonal - 1
        return mask.where(self, self.zeros((), dtype=self.dtype, device=self.device))

    def meshgrid(self, *tensors: Tensor, indexing: str = "ij") -> tuple[Tensor, ...]:
        """Coordinate grids from 1-D tensors: the k-th output repeats the k-th input along every other axis.
        `indexing='ij'` gives shape (len(a), len(b), ...), `'xy'` swaps the first two axes (numpy's default).
        Call it as `Tensor.meshgrid(a, b)` or `a.meshgrid(b)`.

        >>> x, y = Tensor.meshgrid(Tensor([1, 2]), Tensor([3, 4, 5]))
        >>> x.tolist(), y.shape
        ([[1, 1, 1], [2, 2, 2]], (2, 3))
        """
        if indexing not in ("ij", "xy"):
            raise ArgumentError(f"meshgrid: indexing must be 'ij' or 'xy', got {indexing!r}")
        # PyTorch's meshgrid([a, b]) passes one list (through the class, the list arrives as self)
        ts: list[Any] = list(self) if isinstance(self, (list, tuple)) else [self]
        ts += list(tensors[0]) if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)) else list(tensors)
        for t in ts:
            if not isinstance(t, CreationMixin):
                raise TypeError(f"meshgrid: expected tensors, got {type(t).__name__}")
            if t.ndim > 1:
                raise ArgumentError(f"meshgrid: expects 0-d or 1-d tensors, got shape {t.shape}")
            if t.device != ts[0].device:
                raise RuntimeError(f"meshgrid: tensors on different devices ({ts[0].device} and {t.device})")
        sizes = [t.numel() for t in ts]
        if indexing == "xy" and len(ts) > 1:
            sizes[0], sizes[1] = sizes[1], sizes[0]
        out = []
        for k, t in enumerate(ts):
            axis = (1 - k if k < 2 else k) if indexing == "xy" and len(ts) > 1 else k
            shape = tuple(s if i == axis else 1 for i, s in enumerate(sizes))
            out.append(t.reshape(shape)._broadcast_to(tuple(sizes)))
        return tuple(out)

    # *** like another tensor ***

    def full_like(self, fill_value: Scalar, dtype: DType | str | None = None, device: str | None = None) -> Tensor:
        """A tensor of this one's shape (and dtype and device, unless given) filled with `fill_value`.

        >>> Tensor([1, 2]).full_like(7).tolist()
        [7, 7]
        """
        return self.full(self.shape, fill_value, dtype=dtype or self.dtype, device=device or self.device)

    def zeros_like(self, dtype: DType | str | None = None, device: str | None = None) -> Tensor:
        """Zeros of this tensor's shape (and dtype and device, unless given).

        >>> Tensor([1.5, 2.5]).zeros_like().tolist()
        [0.0, 0.0]
        """
        return self.full_like(0, dtype=dtype, device=device)

    def ones_like(self, dtype: DType | str | None = None, device: str | None = None) -> Tensor:
        """Ones of this tensor's shape (and dtype and device, unless given).

        >>> Tensor([1, 2]).ones_like(dtype="float16").tolist()
        [1.0, 1.0]
        """
        return self.full_like(1, dtype=dtype, device=device)

    @classmethod
    def from_blob(cls, ptr: int, shape: Any, dtype: Any = None, device: str | None = None) -> Tensor:
        """A tensor of `shape` and `dtype` (default float32) from the C-ordered elements at the address `ptr` (an
        int, as `ctypes.addressof` or numpy's `.ctypes.data` give), as tinygrad's `from_blob`. The memory is
        copied now, so the tensor does not alias it (tinygrad's does): later writes to the memory are not seen.

        >>> import ctypes
        >>> raw = (ctypes.c_float * 3)(1.0, 2.0, 3.0)
        >>> Tensor.from_blob(ctypes.addressof(raw), (3,)).tolist()
        [1.0, 2.0, 3.0]
        """
        if isinstance(ptr, bool) or not isinstance(ptr, (int, np.integer)):
            raise TypeError(f"from_blob: ptr must be an int address, got {type(ptr).__name__}")
        size = shape_arg(shape if isinstance(shape, tuple) else (shape,), "from_blob")
        if any(s < 0 for s in size):
            raise ArgumentError(f"from_blob: negative size in {size}")
        dt = tensor_dtype(dtype, "from_blob") if dtype is not None else dtypes.default_float
        if ptr == 0 and prod(size) > 0:
            raise ArgumentError("from_blob: ptr is NULL")
        nbytes = prod(size) * dt.itemsize
        import ctypes

        data = ctypes.string_at(int(ptr), nbytes) if nbytes else b""
        arr = np.frombuffer(data, dtype=np.dtype(dt.fmt) if dt.fmt != "?" else np.bool_).reshape(size)
        return cls(arr, dtype=dt, device=device)

    def empty_like(self, dtype: DType | str | None = None, device: str | None = None) -> Tensor:
        """An uninitialised tensor of this tensor's shape (and dtype and device, unless given).

        >>> Tensor([[1, 2]]).empty_like().shape
        (1, 2)
        """
        return self.empty(self.shape, dtype=dtype or self.dtype, device=device or self.device)

    def rand_like(self, dtype: DType | str | None = None, device: str | None = None) -> Tensor:
        """Uniform random numbers in [0, 1) of this tensor's shape (and float dtype and device, unless given).

        >>> Tensor.zeros(2, 3).rand_like().shape
        (2, 3)
        """
        return self.rand(self.shape, dtype=dtype or self._like_float("rand_like"), device=device or self.device)

    def randn_like(self, dtype: DType | str | None = None, device: str | None = None) -> Tensor:
        """Standard normal random numbers of this tensor's shape (and float dtype and device, unless given).

        >>> Tensor.zeros(4, dtype="float16").randn_like().dtype
        dtypes.float16
        """
        return self.randn(self.shape, dtype=dtype or self._like_float("randn_like"), device=device or self.device)

    def _like_float(self, op: str) -> DType:
        if not dtypes.is_float(self.dtype):
            raise TypeError(f"{op}: a {self.dtype!r} tensor cannot hold random floats; pass a float dtype=")
        return self.dtype

    # *** random numbers ***

    @staticmethod
    def manual_seed(seed: int = 0) -> None:
        """Seed the random generator: the same seed gives the same sequence of random tensors on every device.

        >>> Tensor.manual_seed(1); a = Tensor.rand(3).tolist()
        >>> Tensor.manual_seed(1); a == Tensor.rand(3).tolist()
        True
        """
        if not isinstance(seed, int) or isinstance(seed, bool):
            raise TypeError(f"manual_seed: seed must be an int, got {seed!r}")
        CreationMixin._seed = seed & ((1 << 64) - 1)
        CreationMixin._rng_counter = 0

    @classmethod
    def _threefry2x32(cls, x0: Tensor, x1: Tensor, key: tuple[Any, Any]) -> tuple[Tensor, Tensor]:
        """Threefry-2x32 with 20 rounds: encrypt the counter words `x0`, `x1` (uint32 tensors of one shape)
        under the two 32-bit `key` words (ints, or uint32 tensors that broadcast); returns the two uint32
        output words."""
        k0, k1 = (k & _U32 if isinstance(k, int) else k for k in key)
        ks = (k0, k1, k0 ^ k1 ^ _PARITY)
        x0, x1 = x0 + ks[0], x1 + ks[1]
        for r in range(20):
            x0 = x0 + x1
            rot = _ROTATIONS[r % 8]
            x1 = ((x1 << rot) | (x1 >> (32 - rot))) ^ x0
            if r % 4 == 3:  # inject the key every 4 rounds, with the injection count
                s = r // 4 + 1
                x0, x1 = x0 + ks[s % 3], x1 + (ks[(s + 1) % 3] + s)
        return x0, x1

    @classmethod
    def _random_bits(cls, shape: tuple[int, ...], device: str | None) -> tuple[Tensor, Tensor]:
        """Two independent uint32 words per element of `shape`, from fresh counters. The call count and the
        seed are read from a small buffer, not written into the kernel, so every random tensor of a shape
        uses the same compiled kernel."""
        n = prod(shape)
        if n >= 1 << 32:
            raise ArgumentError(f"random: shape {shape} has more than 2**32 elements")
        call = CreationMixin._rng_counter
        CreationMixin._rng_counter += 1
        seed = CreationMixin._seed
        words = cls(np.array([call & _U32, seed & _U32, seed >> 32], dtype=np.uint32), device=device)
        if rng_capturing is not None:
            rng_capturing.append((words, call))
        x0 = cls._counters(n, device)
        x1 = words[0]._broadcast_to((n,))
        w0, w1 = cls._threefry2x32(x0, x1, (words[1], words[2]))
        return w0.reshape(shape), w1.reshape(shape)

    @classmethod
    def _counters(cls, n: int, device: str | None) -> Tensor:
        """0, 1, ..., n - 1 as uint32, built as row * width + column from two aranges of about sqrt(n)
        elements: the counters of a large random tensor cost no large buffer."""
        width = 1 << ((n.bit_length() + 1) // 2)
        rows = -(-n // width)
        starts = cls.arange(rows, dtype=dtypes.uint32, device=device).reshape(rows, 1) * width
        grid = starts + cls.arange(width, dtype=dtypes.uint32, device=device).reshape(1, width)
        return grid.reshape(rows * width).shrink(((0, n),))

    @staticmethod
    def _unit_float(bits: Tensor, dt: DType) -> Tensor:
        """The top bits of uint32 `bits` as a float of `dt` in [0, 1): k * 2**-m for the dtype's mantissa width."""
        m = _MANTISSA[dt]
        calc = compute_dtype(dt)
        top = bits if m == 32 else bits >> (32 - m)
        return (top.cast(calc) * 2.0**-m).cast(dt)

    @classmethod
    def rand(cls, *shape: Any, dtype: DType | str | None = None, device: str | None = None) -> Tensor:
        """Uniform random numbers in [0, 1) (float32 unless `dtype` says otherwise).

        >>> Tensor.manual_seed(0); x = Tensor.rand(2, 3)
        >>> x.shape, bool(((x >= 0) & (x < 1)).numpy().all())
        ((2, 3), True)
        """
        sizes = _sizes(shape, "rand")
        dt = _float_dtype(dtype, "rand")
        return cls._unit_float(cls._random_bits(sizes, device)[0], dt)

    @classmethod
    def randn(cls, *shape: Any, dtype: DType | str | None = None, device: str | None = None) -> Tensor:
        """Standard normal random numbers (mean 0, standard deviation 1), by the Box-Muller transform.

        >>> Tensor.manual_seed(0); Tensor.randn(2, 3, dtype="float16").dtype
        dtypes.float16
        """
        sizes = _sizes(shape, "randn")
        dt = _float_dtype(dtype, "randn")
        calc = compute_dtype(dt)
        w0, w1 = cls._random_bits(sizes, device)
        # 1 - u lies in (0, 1]: the log is finite, the radius at most sqrt(2 * 23 * ln 2) in float32
        radius = ((1 - cls._unit_float(w0, calc)).log() * -2).sqrt()
        return (radius * (cls._unit_float(w1, calc) * (2 * math.pi)).sin()).cast(dt)

    @classmethod
    def randint(
        cls, *shape: Any, low: int = 0, high: int = 10, dtype: DType | str = dtypes.int32, device: str | None = None
    ) -> Tensor:
        """Uniform random integers in [low, high) (int32 unless `dtype` says otherwise).

        >>> Tensor.manual_seed(0); x = Tensor.randint(8, low=3, high=5)
        >>> x.dtype, set(x.tolist()) <= {3, 4}
        (dtypes.int32, True)
        """
        sizes = _sizes(shape, "randint")
        dt = tensor_dtype(dtype, "randint")
        if not dtypes.is_int(dt):
            raise TypeError(f"randint: needs an integer dtype, got {dt!r}")
        if not (isinstance(low, int) and isinstance(high, int)) or isinstance(low, bool) or isinstance(high, bool):
            raise TypeError(f"randint: low and high must be ints, got {low!r} and {high!r}")
        if low >= high:
            raise ArgumentError(f"randint: low must be less than high, got low={low} and high={high}")
        if low < dtypes.min(dt) or high - 1 > dtypes.max(dt):
            raise ArgumentError(f"randint: [{low}, {high}) does not fit {dt!r}")
        if high - low > 1 << 32:
            raise ArgumentError(f"randint: the range [{low}, {high}) is wider than 2**32")
        # multiply-shift maps a 32-bit word onto [0, high - low) (the bias is (high - low) / 2**32 at most)
        bits = cls._random_bits(sizes, device)[0].cast(dtypes.uint64) * (high - low)
        offset = (bits >> 32).cast(dtypes.int64)
        return (offset + low).cast(dt)

    @classmethod
    def uniform(
        cls,
        *shape: Any,
        low: float = 0.0,
        high: float = 1.0,
        dtype: DType | str | None = None,
        device: str | None = None,
    ) -> Tensor:
        """Uniform random numbers in [low, high).

        >>> Tensor.manual_seed(0); x = Tensor.uniform(4, low=-2.0, high=-1.0)
        >>> bool(((x >= -2) & (x < -1)).numpy().all())
        True
        """
        dt = _float_dtype(dtype, "uniform")
        calc = compute_dtype(dt)
        return (cls.rand(_sizes(shape, "uniform"), dtype=calc, device=device) * (high - low) + low).cast(dt)

    @classmethod
    def normal(
        cls,
        *shape: Any,
        mean: float = 0.0,
        std: float = 1.0,
        dtype: DType | str | None = None,
        device: str | None = None,
    ) -> Tensor:
        """Normal random numbers with the given `mean` and standard deviation `std`.

        >>> Tensor.manual_seed(0); Tensor.normal(2, 2, mean=3.0, std=0.5).shape
        (2, 2)
        """
        dt = _float_dtype(dtype, "normal")
        calc = compute_dtype(dt)
        return (cls.randn(_sizes(shape, "normal"), dtype=calc, device=device) * std + mean).cast(dt)

    def dropout(self, p: float = 0.5) -> Tensor:
        """While `Tensor.training` is True: each element becomes 0 with probability `p`, the others are scaled
        by 1 / (1 - p) (so the expected value is unchanged). Otherwise the tensor itself.

        >>> x = Tensor.ones(4)
        >>> x.dropout(0.5) is x   # not training
        True
        """
        if not isinstance(p, (int, float)) or isinstance(p, bool) or not 0 <= p <= 1:
            raise ArgumentError(f"dropout: probability has to be between 0 and 1, got {p!r}")
        if not type(self).training or p == 0:
            return self
        if p == 1:
            return self.zeros_like(dtype=self._float().dtype)
        keep = self.rand(self.shape, device=self.device) >= p
        return keep.where(self, 0) * (1 / (1 - p))
