"""The Tensor front end: a lazy tensor whose ops build a UOp graph; nothing runs until a value is needed.

>>> a = Tensor([[1.0, 2.0], [3.0, 4.0]])
>>> (a * 2 + 1).sum(axis=1).tolist()
[8.0, 16.0]

Names, signatures and dtype rules follow tinygrad's public Tensor API (which is PyTorch-like).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from zeptograd.dtype import ConstType, DType, dtypes, least_upper_dtype, result_type, to_dtype
from zeptograd.engine.realize import live_tensors, realize
from zeptograd.runtime.buffer import buffer_for, np_dtype
from zeptograd.runtime.device import Device
from zeptograd.schedule.kernelize import buffer_of, new_buffer, view_of
from zeptograd.uop.ops import Ops, UOp
from zeptograd.uop.shape import prod

Scalar = ConstType
SPLIT_SUM = 1 << 14  # float sums over more elements than this add in two stages (see Tensor._float_sum)
_NP_TO_DTYPE = {np.dtype(dt.fmt): dt for dt in dtypes.all if dt.fmt is not None}


def _shape_arg(shape: tuple, op: str) -> tuple[int, ...]:
    """A shape given as varargs `(2, 3)` or one sequence `((2, 3),)`."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    for s in shape:
        if not isinstance(s, int) or isinstance(s, bool):
            raise TypeError(f"{op}: sizes must be ints, got {shape}")
    return tuple(shape)


def _tensor_dtype(dtype: DType | str, op: str) -> DType:
    """A dtype a tensor can have: one the devices can store and compute in (every one but bfloat16 today)."""
    dt = to_dtype(dtype)
    if dt.fmt is None:
        raise TypeError(f"{op}: {dt!r} tensors are not supported on the CPU and PYTHON devices yet")
    return dt


def _from_numpy_dtype(dt: np.dtype) -> DType:
    if dt not in _NP_TO_DTYPE:
        raise TypeError(f"numpy dtype {dt} has no zeptograd dtype")
    return _NP_TO_DTYPE[dt]


class Tensor:
    """A lazy n-dimensional array on a device.

    >>> Tensor([1, 2, 3]).dtype, Tensor(2.5).shape, Tensor.zeros(2, 3).device
    (dtypes.int32, (), 'CPU')
    """

    __slots__ = ("uop", "device", "__weakref__")
    __hash__ = object.__hash__  # == builds a comparison, so tensors hash by identity

    def __init__(self, data: Any, dtype: DType | str | None = None, device: str | None = None):
        device = Device.canonicalize(device)
        dt = _tensor_dtype(dtype, "Tensor") if dtype is not None else None
        if isinstance(data, UOp):
            uop = data if dt is None or data.dtype is dt else data.cast(dt)
        elif isinstance(data, (bool, int, float)) and not isinstance(data, np.generic):
            uop = UOp.const(dt or dtypes.from_py(data), data)
        elif isinstance(data, (list, tuple, np.ndarray, np.generic)):
            if isinstance(data, (np.ndarray, np.generic)):
                arr = np.asarray(data)
                dt = dt or _from_numpy_dtype(arr.dtype)
            else:
                dt = dt or dtypes.from_py(list(data))
                try:
                    arr = np.array(data)
                except ValueError as e:
                    raise ValueError(f"Tensor: the nested sequence is ragged ({e})") from None
            arr = arr.astype(np_dtype(dt), copy=False)
            buf = new_buffer(device, arr.size, dt)
            buffer_for(buf).copyin(arr)  # copies in C order, whatever the strides (a 0-d array stays 0-d)
            uop = view_of(buf, arr.shape)
        else:
            raise TypeError(f"Tensor: cannot make a tensor from {type(data).__name__}")
        self.uop: UOp = uop
        self.device: str = device
        live_tensors.add(self)

    # *** properties ***

    @property
    def shape(self) -> tuple[int, ...]:
        return self.uop.shape

    @property
    def dtype(self) -> DType:
        return self.uop.dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def numel(self) -> int:
        return prod(self.shape)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __repr__(self) -> str:
        return f"<Tensor {self.shape} {self.dtype!r} on {self.device}>"

    def _new(self, uop: UOp) -> Tensor:
        return Tensor(uop, device=self.device)

    # *** creation ***

    @staticmethod
    def full(
        shape: int | Sequence[int], fill_value: Scalar, dtype: DType | str | None = None, device: str | None = None
    ) -> Tensor:
        """A tensor of `shape` filled with `fill_value` (a constant: it takes no memory until realized).

        >>> Tensor.full((2, 2), 7).tolist()
        [[7, 7], [7, 7]]
        """
        shape = _shape_arg((shape,) if isinstance(shape, int) else tuple(shape), "full")
        if any(s < 0 for s in shape):
            raise ValueError(f"full: negative size in shape {shape}")
        dt = _tensor_dtype(dtype, "full") if dtype is not None else dtypes.from_py(fill_value)
        return Tensor(UOp.const(dt, fill_value), device=device)._broadcast_to(shape)

    @staticmethod
    def zeros(*shape: Any, dtype: DType | str | None = None, device: str | None = None) -> Tensor:
        """A tensor of zeros (float32 unless `dtype` says otherwise).

        >>> Tensor.zeros(2, 3).tolist()
        [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]
        """
        return Tensor.full(_shape_arg(shape, "zeros"), 0.0, dtype or dtypes.default_float, device)

    @staticmethod
    def ones(*shape: Any, dtype: DType | str | None = None, device: str | None = None) -> Tensor:
        """A tensor of ones (float32 unless `dtype` says otherwise).

        >>> Tensor.ones(3, dtype="int").tolist()
        [1, 1, 1]
        """
        return Tensor.full(_shape_arg(shape, "ones"), 1.0, dtype or dtypes.default_float, device)

    @staticmethod
    def empty(*shape: Any, dtype: DType | str | None = None, device: str | None = None) -> Tensor:
        """An uninitialised tensor (its buffer's contents are whatever the memory held)."""
        shape = _shape_arg(shape, "empty")
        if any(s < 0 for s in shape):
            raise ValueError(f"empty: negative size in shape {shape}")
        dt = _tensor_dtype(dtype, "empty") if dtype is not None else dtypes.default_float
        dev = Device.canonicalize(device)
        return Tensor(view_of(new_buffer(dev, prod(shape), dt), shape), device=dev)

    @staticmethod
    def arange(
        start: Scalar,
        stop: Scalar | None = None,
        step: Scalar = 1,
        dtype: DType | str | None = None,
        device: str | None = None,
    ) -> Tensor:
        """`start, start+step, ...` up to `stop` (exclusive), like `range` and numpy's arange.

        >>> Tensor.arange(4).tolist(), Tensor.arange(1, 2, 0.25).tolist()
        ([0, 1, 2, 3], [1.0, 1.25, 1.5, 1.75])
        """
        if stop is None:
            start, stop = 0, start
        if step == 0:
            raise ValueError("arange: step must not be zero")
        dt = _tensor_dtype(dtype, "arange") if dtype is not None else dtypes.from_py([start, stop, step])
        return Tensor(np.arange(start, stop, step).astype(np_dtype(dt)), dt, device)

    # *** realizing and reading ***

    def realize(self, *others: Tensor) -> Tensor:
        """Compute this tensor (and `others`, in the same schedule) now; returns self.

        >>> a = Tensor([1.0, 2.0]) + 1
        >>> Tensor.realize(a, a * 2) is a
        True
        """
        realize([self, *others])
        return self

    def _buffer(self):
        self.realize()
        buf = buffer_of(self.uop)
        assert buf is not None
        return buffer_for(buf)

    def numpy(self) -> np.ndarray:
        """The values as a numpy array of this tensor's dtype.

        >>> Tensor([[1, 2]]).numpy()
        array([[1, 2]], dtype=int32)
        """
        return self._buffer().numpy().reshape(self.shape)

    def item(self) -> Scalar:
        """The value of a one-element tensor as a Python scalar."""
        if self.numel() != 1:
            raise ValueError(f"item: a tensor of shape {self.shape} has {self.numel()} elements, not 1")
        return self.numpy().reshape(()).item()

    def tolist(self) -> Any:
        """The values as (nested) Python lists."""
        return self.numpy().tolist()

    def to(self, device: str) -> Tensor:
        """A copy of this tensor on `device` (self when it is there already)."""
        device = Device.canonicalize(device)
        if device == self.device:
            return self
        return Tensor(UOp(Ops.COPY, self.dtype, (self.uop,), device), device=device)

    def contiguous(self) -> Tensor:
        """This tensor's value in its own buffer: ends the kernel here (the value is not recomputed)."""
        if buffer_of(self.uop) is not None:
            return self
        return self._new(UOp(Ops.CONTIGUOUS, self.dtype, (self.uop,)))

    def assign(self, x: Tensor | Scalar | np.ndarray | list) -> Tensor:
        """Overwrite this tensor's buffer with `x` (a STORE): reads made before see the old values, reads
        made after see the new ones. Returns self.

        >>> t = Tensor([1.0, 2.0]).realize()
        >>> t.assign(t * 10).tolist()
        [10.0, 20.0]
        """
        if not isinstance(x, Tensor):
            x = Tensor(x, dtype=self.dtype, device=self.device)
        if x.device != self.device:
            raise RuntimeError(f"assign: the value is on {x.device}, the tensor on {self.device}")
        if x.shape != self.shape:
            raise ValueError(f"assign: the value's shape {x.shape} does not match the tensor's shape {self.shape}")
        if x.dtype is not self.dtype:
            raise TypeError(f"assign: the value's dtype {x.dtype!r} does not match the tensor's dtype {self.dtype!r}")
        if buffer_of(self.uop) is None:
            self.realize()  # the target must be memory; a pending assignment lands first
        target = buffer_of(self.uop)
        assert target is not None
        self.uop = target.store(x.uop)
        return self

    # *** broadcasting and elementwise ops ***

    def _broadcast_to(self, shape: tuple[int, ...]) -> Tensor:
        if self.shape == shape:
            return self
        padded = (1,) * (len(shape) - self.ndim) + self.shape
        uop = self.uop if padded == self.shape else UOp(Ops.RESHAPE, self.dtype, (self.uop,), padded)
        return self._new(uop if padded == shape else UOp(Ops.EXPAND, self.dtype, (uop,), shape))

    @staticmethod
    def _broadcast_shape(op: str, *shapes: tuple[int, ...]) -> tuple[int, ...]:
        ndim = max(len(s) for s in shapes)
        padded = [(1,) * (ndim - len(s)) + s for s in shapes]
        out = []
        for sizes in zip(*padded):
            big = {s for s in sizes if s != 1}
            if len(big) > 1:
                shown = " and ".join(str(s) for s in shapes)
                raise ValueError(f"{op}: shapes {shown} cannot be broadcast together")
            out.append(big.pop() if big else 1)
        return tuple(out)

    def _operands(self, op: str, *others: Any, dtype: DType | None = None) -> list[Tensor]:
        """self and `others` (tensors or Python scalars) promoted to one dtype and broadcast to one shape."""
        for o in others:
            if isinstance(o, Tensor):
                if o.device != self.device:
                    raise RuntimeError(f"{op}: tensors on different devices ({self.device} and {o.device})")
            elif not isinstance(o, (bool, int, float)):
                raise TypeError(f"{op}: unsupported operand type {type(o).__name__}")
        dt = dtype or result_type(self.dtype, *(o.dtype if isinstance(o, Tensor) else o for o in others))
        tensors = [self.cast(dt)] + [
            o.cast(dt) if isinstance(o, Tensor) else Tensor(UOp.const(dt, o), device=self.device) for o in others
        ]
        shape = Tensor._broadcast_shape(op, *(t.shape for t in tensors))
        return [t._broadcast_to(shape) for t in tensors]

    def _binary(self, op: Ops, x: Any, name: str, reverse: bool = False, dtype: DType | None = None) -> Tensor:
        a, b = self._operands(name, x, dtype=dtype)
        if reverse:
            a, b = b, a
        return a._new(a.uop.alu(op, b.uop))

    def _float(self) -> Tensor:
        return self if dtypes.is_float(self.dtype) else self.cast(dtypes.default_float)

    def cast(self, dtype: DType | str) -> Tensor:
        """The values converted to `dtype`.

        >>> Tensor([1.7, -1.7]).cast("int").tolist()
        [1, -1]
        """
        dt = _tensor_dtype(dtype, "cast")
        return self if dt is self.dtype else self._new(self.uop.cast(dt))

    def add(self, x: Any, reverse: bool = False) -> Tensor:
        return self._binary(Ops.ADD, x, "add", reverse)

    def sub(self, x: Any, reverse: bool = False) -> Tensor:
        return self._binary(Ops.SUB, x, "sub", reverse)

    def mul(self, x: Any, reverse: bool = False) -> Tensor:
        return self._binary(Ops.MUL, x, "mul", reverse)

    def div(self, x: Any, reverse: bool = False) -> Tensor:
        """True division: integers divide as floats (`Tensor([1, 2]) / 2` is float32)."""
        a, b = self._operands("div", x)
        if reverse:
            a, b = b, a
        a, b = a._float(), b._float()
        return a * b.reciprocal()

    def maximum(self, x: Any) -> Tensor:
        """The elementwise maximum (NaN wins, as in numpy and PyTorch).

        >>> Tensor([-1.0, 2.0]).maximum(0).tolist()
        [0.0, 2.0]
        """
        return self._binary(Ops.MAX, x, "maximum")

    def minimum(self, x: Any) -> Tensor:
        """The elementwise minimum (NaN wins).

        >>> Tensor([1, 5]).minimum(3).tolist()
        [1, 3]
        """
        a, b = self._operands("minimum", x)
        return a._new(a.uop.minimum(b.uop))

    def where(self, x: Any, y: Any) -> Tensor:
        """`x` where this (bool) tensor is true, else `y`.

        >>> (Tensor([1, -2]) > 0).where(1.0, 0.0).tolist()
        [1.0, 0.0]
        """
        cond = self.cast(dtypes.bool)
        if isinstance(x, Tensor):
            a, b = x._operands("where", y)
        elif isinstance(y, Tensor):
            b, a = y._operands("where", x)
        else:
            dt = result_type(x, y)
            a, b = Tensor(UOp.const(dt, x), device=self.device), Tensor(UOp.const(dt, y), device=self.device)
        shape = Tensor._broadcast_shape("where", cond.shape, a.shape, b.shape)
        cond, a, b = cond._broadcast_to(shape), a._broadcast_to(shape), b._broadcast_to(shape)
        return a._new(cond.uop.where(a.uop, b.uop))

    def __lt__(self, x: Any) -> Tensor:
        return self._binary(Ops.CMPLT, x, "<")

    def __gt__(self, x: Any) -> Tensor:
        return self._binary(Ops.CMPLT, x, ">", reverse=True)

    def __le__(self, x: Any) -> Tensor:
        return (self < x) | (self == x)

    def __ge__(self, x: Any) -> Tensor:
        return (self > x) | (self == x)

    def __eq__(self, x: Any) -> Tensor:  # type: ignore[override]
        return self._binary(Ops.CMPEQ, x, "==")

    def __ne__(self, x: Any) -> Tensor:  # type: ignore[override]
        return self._binary(Ops.CMPNE, x, "!=")

    def __or__(self, x: Any) -> Tensor:
        return self._binary(Ops.OR, x, "|")

    def __and__(self, x: Any) -> Tensor:
        return self._binary(Ops.AND, x, "&")

    def neg(self) -> Tensor:
        """-x (logical not for bool)."""
        return self._new(self.uop.alu(Ops.NEG))

    def _unary_float(self, op: Ops) -> Tensor:
        x = self._float()
        return x._new(x.uop.alu(op))

    def exp2(self) -> Tensor:
        """2 ** x."""
        return self._unary_float(Ops.EXP2)

    def log2(self) -> Tensor:
        return self._unary_float(Ops.LOG2)

    def sqrt(self) -> Tensor:
        return self._unary_float(Ops.SQRT)

    def sin(self) -> Tensor:
        return self._unary_float(Ops.SIN)

    def reciprocal(self) -> Tensor:
        """1 / x."""
        return self._unary_float(Ops.RECIPROCAL)

    def relu(self) -> Tensor:
        """max(x, 0)."""
        return self.maximum(0)

    def exp(self) -> Tensor:
        return (self._float() * (1 / math.log(2))).exp2()

    def log(self) -> Tensor:
        return self.log2() * math.log(2)

    def __add__(self, x: Any) -> Tensor:
        return self.add(x)

    def __mul__(self, x: Any) -> Tensor:
        return self.mul(x)

    def __sub__(self, x: Any) -> Tensor:
        return self.sub(x)

    def __truediv__(self, x: Any) -> Tensor:
        return self.div(x)

    def __neg__(self) -> Tensor:
        return self.neg()

    def __radd__(self, x: Any) -> Tensor:
        return self.add(x, reverse=True)

    def __rmul__(self, x: Any) -> Tensor:
        return self.mul(x, reverse=True)

    def __rsub__(self, x: Any) -> Tensor:
        return self.sub(x, reverse=True)

    def __rtruediv__(self, x: Any) -> Tensor:
        return self.div(x, reverse=True)

    def __iadd__(self, x: Any) -> Tensor:
        return self.assign(self + x)

    def __isub__(self, x: Any) -> Tensor:
        return self.assign(self - x)

    def __imul__(self, x: Any) -> Tensor:
        return self.assign(self * x)

    def __itruediv__(self, x: Any) -> Tensor:
        return self.assign(self / x)

    def __matmul__(self, x: Tensor) -> Tensor:
        return self.matmul(x)

    def __rmatmul__(self, x: Tensor) -> Tensor:
        return x.matmul(self)

    # *** reductions ***

    def _axes(self, axis: int | Sequence[int] | None, op: str) -> tuple[int, ...]:
        if axis is None:
            return tuple(range(self.ndim))
        axes = (axis,) if isinstance(axis, int) else tuple(axis)
        out = []
        for a in axes:
            if not isinstance(a, int) or isinstance(a, bool):
                raise TypeError(f"{op}: axis must be an int, got {a!r}")
            if not -max(self.ndim, 1) <= a < max(self.ndim, 1):
                raise IndexError(
                    f"{op}: axis {a} is out of range for a tensor of {self.ndim} dimensions (shape {self.shape})"
                )
            out.append(a % self.ndim if self.ndim else 0)
        if len(set(out)) != len(out):
            raise ValueError(f"{op}: axis {axis} repeats an axis")
        return tuple(sorted(set(out))) if self.ndim else ()

    def _reduce(self, op: Ops, axis: Any, keepdim: bool, name: str, acc_dtype: DType) -> Tensor:
        axes = self._axes(axis, name)
        x = self.cast(acc_dtype)
        uop = UOp(Ops.REDUCE_AXIS, acc_dtype, (x.uop,), (op, axes)) if axes else x.uop
        out = x._new(uop)
        if not keepdim:
            out = out.reshape(tuple(s for i, s in enumerate(self.shape) if i not in axes))
        return out

    def sum(self, axis: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
        """The sum over `axis` (all axes when None). Small integers and bool sum in int32, float16 adds in
        float32 and rounds back.

        >>> Tensor([[1, 2], [3, 4]]).sum(axis=0).tolist()
        [4, 6]
        """
        dt = self.dtype
        if dtypes.is_bool(dt) or (dtypes.is_int(dt) and dt.itemsize < 4):
            acc = dtypes.uint32 if dtypes.is_unsigned(dt) else dtypes.int32
            return self._reduce(Ops.ADD, axis, keepdim, "sum", acc)
        if dt in (dtypes.float16, dtypes.bfloat16):
            return self._float_sum(axis, keepdim, dtypes.float32).cast(dt)
        if dtypes.is_float(dt):
            return self._float_sum(axis, keepdim, dt)
        return self._reduce(Ops.ADD, axis, keepdim, "sum", dt)

    def _float_sum(self, axis: Any, keepdim: bool, acc: DType) -> Tensor:
        """A float sum over many elements adds in two stages, sums of about sqrt(n) elements each, then their
        sum: one long chain of float adds loses precision (2**25 ones would sum to 2**24)."""
        axes = self._axes(axis, "sum")
        n = prod(self.shape[a] for a in axes)
        if n <= SPLIT_SUM:
            return self._reduce(Ops.ADD, axis, keepdim, "sum", acc)
        kept = [i for i in range(self.ndim) if i not in axes]
        kept_shape = tuple(self.shape[i] for i in kept)
        x = self.cast(acc).permute(*kept, *axes).reshape(*kept_shape, n)
        chunk = 1 << (n.bit_length() // 2)
        padded = -(-n // chunk) * chunk
        if padded != n:
            x = x.pad(((0, 0),) * len(kept) + ((0, padded - n),))
        partial = x.reshape(*kept_shape, padded // chunk, chunk)._reduce(Ops.ADD, -1, False, "sum", acc)
        total = partial._reduce(Ops.ADD, -1, False, "sum", acc)
        return total.reshape(tuple(1 if i in axes else s for i, s in enumerate(self.shape))) if keepdim else total

    def max(self, axis: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
        """The maximum over `axis` (all axes when None); an empty axis has no maximum.

        >>> Tensor([[1, 5], [3, 4]]).max(axis=1).tolist()
        [5, 4]
        """
        axes = self._axes(axis, "max")
        if any(self.shape[a] == 0 for a in axes):
            raise ValueError(f"max: cannot reduce over an axis of size 0 (shape {self.shape}, axis {axis})")
        return self._reduce(Ops.MAX, axis, keepdim, "max", self.dtype)

    def min(self, axis: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
        """The minimum over `axis` (all axes when None), as the maximum of the values in reversed order.

        >>> Tensor([[1, 5], [3, 4]], dtype="uint8").min(axis=1).tolist()
        [1, 3]
        """
        return self._order_reversed().max(axis, keepdim)._order_reversed()

    def _order_reversed(self) -> Tensor:
        """An order-reversing bijection of the dtype: -x for floats, `not` for bool, and for integers ~x
        (negation would wrap: -INT_MIN is INT_MIN, and -0 is the smallest unsigned value, not the largest)."""
        dt = self.dtype
        if dtypes.is_float(dt) or dtypes.is_bool(dt):
            return self.neg()
        ones = UOp.const(dt, dtypes.max(dt) if dtypes.is_unsigned(dt) else -1)
        return self._new(self.uop.alu(Ops.XOR, ones))

    def __invert__(self) -> Tensor:
        if not dtypes.is_bool(self.dtype):
            raise TypeError(f"~ is defined on bool here, not {self.dtype!r}")
        return self.neg()

    # *** movement ***

    def reshape(self, *shape: Any) -> Tensor:
        """The same values in a new shape (one size may be -1: inferred).

        >>> Tensor.arange(6).reshape(2, -1).shape
        (2, 3)
        """
        new = list(_shape_arg(shape, "reshape"))
        if new.count(-1) > 1:
            raise ValueError(f"reshape: only one size may be -1, got {tuple(new)}")
        if any(s < -1 for s in new):
            raise ValueError(f"reshape: negative size in {tuple(new)}")
        if -1 in new:
            known = prod(s for s in new if s != -1)
            if known == 0 or self.numel() % known:
                raise ValueError(f"reshape: cannot reshape a tensor of shape {self.shape} into {tuple(new)}")
            new[new.index(-1)] = self.numel() // known
        target = tuple(new)
        if prod(target) != self.numel():
            raise ValueError(
                f"reshape: cannot reshape a tensor of shape {self.shape} ({self.numel()} elements) into {target}"
            )
        return self if target == self.shape else self._new(UOp(Ops.RESHAPE, self.dtype, (self.uop,), target))

    def permute(self, *order: Any) -> Tensor:
        """The axes in a new order.

        >>> Tensor.zeros(2, 3, 4).permute(2, 0, 1).shape
        (4, 2, 3)
        """
        axes = _shape_arg(order, "permute")
        if sorted(a % self.ndim if self.ndim else a for a in axes) != list(range(self.ndim)) or len(axes) != self.ndim:
            raise ValueError(f"permute: {axes} is not a permutation of the {self.ndim} axes of shape {self.shape}")
        norm = tuple(a % self.ndim for a in axes)
        if norm == tuple(range(self.ndim)):
            return self
        return self._new(UOp(Ops.PERMUTE, self.dtype, (self.uop,), norm))

    def transpose(self, dim0: int = 1, dim1: int = 0) -> Tensor:
        """Swap two axes."""
        order = list(range(self.ndim))
        a, b = self._axes(dim0, "transpose")[0], self._axes(dim1, "transpose")[0]
        order[a], order[b] = order[b], order[a]
        return self.permute(order)

    @property
    def T(self) -> Tensor:
        """The axes reversed (a matrix transposed)."""
        return self.permute(tuple(reversed(range(self.ndim))))

    def expand(self, *shape: Any) -> Tensor:
        """The tensor broadcast to `shape` (size-1 axes repeat; -1 keeps an axis).

        >>> Tensor([[1], [2]]).expand(2, 3).tolist()
        [[1, 1, 1], [2, 2, 2]]
        """
        new = _shape_arg(shape, "expand")
        if len(new) < self.ndim:
            raise ValueError(f"expand: cannot expand shape {self.shape} to fewer dimensions {new}")
        padded = (1,) * (len(new) - self.ndim) + self.shape
        target = tuple(p if n == -1 else n for p, n in zip(padded, new))
        for p, n in zip(padded, target):
            if p != n and p != 1:
                raise ValueError(f"expand: cannot expand shape {self.shape} to {new}")
        return self._broadcast_to(target)

    def pad(self, padding: Sequence[Any], value: Scalar = 0.0) -> Tensor:
        """Pad each axis with `value`: `padding` is ((before, after) or None) per axis, or PyTorch's flat
        (last_before, last_after, ...) form.

        >>> Tensor([1, 2]).pad(((1, 2),)).tolist()
        [0, 1, 2, 0, 0]
        """
        if all(isinstance(p, int) for p in padding):
            if len(padding) % 2 or len(padding) // 2 > self.ndim:
                raise ValueError(f"pad: flat padding {tuple(padding)} does not fit shape {self.shape}")
            pairs = [(0, 0)] * self.ndim
            for i in range(len(padding) // 2):
                pairs[self.ndim - 1 - i] = (padding[2 * i], padding[2 * i + 1])
        else:
            if len(padding) != self.ndim:
                raise ValueError(f"pad: padding {tuple(padding)} has {len(padding)} entries for shape {self.shape}")
            pairs = [(0, 0) if p is None else tuple(p) for p in padding]
        if any(len(p) != 2 or not all(isinstance(v, int) for v in p) for p in pairs):
            raise TypeError(f"pad: padding must be pairs of ints, got {tuple(padding)}")
        if any(b < 0 or a < 0 for b, a in pairs):
            shrunk = self.shrink(tuple((-min(b, 0), s + min(a, 0)) for (b, a), s in zip(pairs, self.shape)))
            return shrunk.pad(tuple((max(b, 0), max(a, 0)) for b, a in pairs), value)
        if all(p == (0, 0) for p in pairs):
            return self
        out = self._new(UOp(Ops.PAD, self.dtype, (self.uop,), tuple(pairs)))
        if value == 0:
            return out
        inside = Tensor.ones(self.shape, dtype=dtypes.bool, device=self.device).pad(tuple(pairs))
        return inside.where(out, value)

    def shrink(self, arg: Sequence[tuple[int, int] | None]) -> Tensor:
        """The slice [start, end) of each axis (None keeps an axis whole).

        >>> Tensor([1, 2, 3, 4]).shrink(((1, 3),)).tolist()
        [2, 3]
        """
        if len(arg) != self.ndim:
            raise ValueError(f"shrink: {tuple(arg)} has {len(arg)} entries for shape {self.shape}")
        bounds = tuple((0, s) if a is None else tuple(a) for a, s in zip(arg, self.shape))
        for (b, e), s in zip(bounds, self.shape):
            if not 0 <= b <= e <= s:
                raise ValueError(f"shrink: bounds {tuple(arg)} are outside shape {self.shape}")
        if all(b == 0 and e == s for (b, e), s in zip(bounds, self.shape)):
            return self
        return self._new(UOp(Ops.SHRINK, self.dtype, (self.uop,), bounds))

    def flip(self, axis: int | Sequence[int]) -> Tensor:
        """The values in reverse order along `axis`.

        >>> Tensor([1, 2, 3]).flip(0).tolist()
        [3, 2, 1]
        """
        axes = self._axes(axis, "flip")
        if not axes:
            return self
        return self._new(UOp(Ops.FLIP, self.dtype, (self.uop,), tuple(i in axes for i in range(self.ndim))))

    # *** linear algebra ***

    def matmul(self, x: Tensor) -> Tensor:
        """Matrix product, with numpy's rules for 1-D operands and broadcast batch axes: one fused kernel
        (a broadcast multiply and a sum).

        >>> (Tensor([[1.0, 2.0]]) @ Tensor([[3.0], [4.0]])).tolist()
        [[11.0]]
        """
        if not isinstance(x, Tensor):
            raise TypeError(f"matmul: expected a Tensor, got {type(x).__name__}")
        if self.ndim == 0 or x.ndim == 0:
            raise ValueError(f"matmul: both operands need at least 1 dimension, got shapes {self.shape} and {x.shape}")
        a = self.reshape(1, self.shape[0]) if self.ndim == 1 else self
        b = x.reshape(x.shape[0], 1) if x.ndim == 1 else x
        if a.shape[-1] != b.shape[-2]:
            raise ValueError(
                f"matmul: shapes {self.shape} and {x.shape} are not aligned ({a.shape[-1]} != {b.shape[-2]})"
            )
        try:
            Tensor._broadcast_shape("matmul", a.shape[:-2], b.shape[:-2])
        except ValueError:
            raise ValueError(
                f"matmul: the batch axes of shapes {self.shape} and {x.shape} cannot be broadcast together"
            ) from None
        dt = least_upper_dtype(a.dtype, b.dtype)
        a3 = a.cast(dt).reshape(*a.shape[:-1], 1, a.shape[-1])
        bt = b.cast(dt).transpose(-1, -2)
        b3 = bt.reshape(*bt.shape[:-2], 1, *bt.shape[-2:])
        out = (a3 * b3).sum(axis=-1)
        if self.ndim == 1:
            out = out.reshape(*out.shape[:-2], out.shape[-1])
        if x.ndim == 1:
            out = out.reshape(out.shape[:-1])
        return out

    dot = matmul
