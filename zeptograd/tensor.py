"""The Tensor front end: a lazy tensor whose ops build a UOp graph; nothing runs until a value is needed.

>>> a = Tensor([[1.0, 2.0], [3.0, 4.0]])
>>> (a * 2 + 1).sum(axis=1).tolist()
[8.0, 16.0]

Names, signatures and dtype rules follow tinygrad's public Tensor API (which is PyTorch-like).
"""

from __future__ import annotations

import contextlib
import functools
import math
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from zeptograd.dtype import (
    NARROW,
    NARROW_FLOATS,
    NARROW_INTS,
    DType,
    category,
    dtypes,
    least_upper_dtype,
    np_dtype,
    result_type,
)
from zeptograd.engine import realize as engine
from zeptograd.engine.disk import disk_copy, disk_view, disk_write, is_disk
from zeptograd.engine.realize import lazy_tensors, live_tensors, realize
from zeptograd.gradient import compute_gradient
from zeptograd.helpers import TRAINING, ArgumentError, JitError
from zeptograd.mixin.args import Scalar, axis_arg, shape_arg, tensor_dtype
from zeptograd.mixin.creation import CreationMixin
from zeptograd.mixin.elementwise import ElementwiseMixin
from zeptograd.mixin.functional import FunctionalMixin
from zeptograd.mixin.indexing import IndexingMixin
from zeptograd.mixin.interop import InteropMixin
from zeptograd.mixin.movement import MovementMixin
from zeptograd.mixin.nn import NNMixin
from zeptograd.mixin.reduce import ReduceMixin
from zeptograd.uop.buffers import buffer_of, new_buffer, view_of
from zeptograd.uop.ops import GroupOp, Ops, UOp
from zeptograd.uop.shape import prod

_NP_TO_DTYPE = {np.dtype(dt.fmt): dt for dt in dtypes.all if dt.fmt is not None}


def _device(device: str | None, op: str) -> str:
    try:
        return engine.device_name(device)
    except (TypeError, ValueError) as e:
        raise type(e)(f"{op}: {e}") from None


def _py_dtype(value: Any, op: str) -> DType:
    try:
        return dtypes.from_py(value)
    except TypeError as e:
        raise TypeError(f"{op}: {e}") from None


def _scalar_dtype(value: Any, dtype: DType | str | None, op: str) -> DType:
    """The dtype of a tensor made from the Python scalar `value`: `dtype`, else the value's default dtype;
    an int must fit in it (see _fit_ints)."""
    dt = tensor_dtype(dtype, op) if dtype is not None else _py_dtype(value, op)
    if isinstance(value, int) and not isinstance(value, bool):
        dt = _fit_ints(dt, value, value, dtype is not None, op)
    return dt


def _fit_ints(dt: DType, lo: int, hi: int, explicit: bool, op: str) -> DType:
    """Python ints keep their values, as in torch: an inferred int32 widens to int64 when they don't fit, and
    an integer dtype asked for that can't hold them is an error (not a silent wrap)."""
    if not dtypes.is_int(dt) or dtypes.min(dt) <= lo <= hi <= dtypes.max(dt):
        return dt
    if not explicit and dt is dtypes.default_int and dtypes.min(dtypes.int64) <= lo <= hi <= dtypes.max(dtypes.int64):
        return dtypes.int64
    bad = lo if lo < dtypes.min(dt) else hi
    raise RuntimeError(f"{op}: value {bad} cannot be converted to {dt.name} without overflow")


def _host_items(data: Any) -> tuple[Any, bool]:
    """A nested sequence as nested lists numpy can read: tensors inside become their values (numpy arrays),
    ranges lists. Also says whether it held only Python scalars (which get the default dtypes)."""
    if isinstance(data, Tensor):
        return data.numpy(), False
    if isinstance(data, (list, tuple, range)):
        converted = [_host_items(x) for x in data]
        return [c[0] for c in converted], all(c[1] for c in converted)
    return data, not isinstance(data, np.generic)


def _from_numpy_dtype(dt: np.dtype) -> DType:
    if dt in _NP_TO_DTYPE:
        return _NP_TO_DTYPE[dt]
    # ml_dtypes' types (bfloat16, float8_e4m3fn, int4, ...) go by the names zeptograd's dtypes have
    if (narrow := dtypes.fields().get(dt.name)) in NARROW:
        return narrow
    raise TypeError(f"Tensor: numpy dtype {dt} has no zeptograd dtype")


def _promote(operands: Sequence[Any]) -> DType:
    """The dtype of an op over tensors and Python scalars, with PyTorch's three tiers: tensors with
    dimensions decide; a 0-d tensor counts only when it is of a higher kind (bool < int < float) than all of
    them (so `x * Tensor(2.0)` keeps a float16 `x` float16); a Python scalar is weakest (`result_type`)."""
    tensors = [o for o in operands if isinstance(o, Tensor)]
    scalars = [o for o in operands if not isinstance(o, Tensor)]
    dims = [t.dtype for t in tensors if t.ndim]
    zero_d = [t.dtype for t in tensors if not t.ndim]
    if not dims:
        return result_type(*zero_d, *scalars)
    dt = least_upper_dtype(*dims)
    top = max((category(z) for z in zero_d), default=-1)
    if top > category(dt):
        dt = least_upper_dtype(*(z for z in zero_d if category(z) == top))
    return result_type(dt, *scalars)


def _unpickled(data: np.ndarray, dtype: str, device: str, requires_grad: bool | None) -> Tensor:
    """A tensor from what `Tensor.__reduce__` pickled."""
    return Tensor(data, dtype=dtype, device=device, requires_grad=requires_grad)


# one movement op of a view: (op, arg, shape of its input, its symbolic starts: the sources after the input)
_Mop = tuple[Ops, Any, tuple[int, ...], tuple[UOp, ...]]


def _movement_chain(uop: UOp, src: UOp) -> tuple[_Mop, ...]:
    """The movement ops that make `uop` from `src`, first op first; () when `uop` is not such a chain."""
    chain: list[_Mop] = []
    while uop is not src and uop.op in GroupOp.Movement:
        chain.append((uop.op, uop.arg, uop.src[0].shape, uop.src[1:]))
        uop = uop.src[0]
    return tuple(reversed(chain)) if uop is src else ()


def _apply_movement(uop: UOp, mops: tuple[_Mop, ...]) -> UOp:
    """The view `mops` of `uop`."""
    for op, arg, _, starts in mops:
        uop = UOp(op, uop.dtype, (uop, *starts), arg)
    return uop


def _filled(dtype: DType, value: Scalar, shape: tuple[int, ...]) -> UOp:
    """A constant broadcast to `shape`."""
    c = UOp.const(dtype, value)
    return UOp(Ops.EXPAND, dtype, (UOp(Ops.RESHAPE, dtype, (c,), (1,) * len(shape)),), shape) if shape else c


def _place_back(mop: _Mop, value: UOp, hit: UOp) -> tuple[UOp, UOp]:
    """Undo one movement op for a write: `value` (and the bool mask `hit` of the written elements) moved back to
    the op's input shape. Elements no view element maps to get hit False."""
    op, arg, in_shape, starts = mop

    def both(inv_op: Ops, inv_arg: Any) -> tuple[UOp, UOp]:
        # a symbolic shrink's starts are its inverse pad's extra padding before (and less after)
        return UOp(inv_op, value.dtype, (value, *starts), inv_arg), UOp(inv_op, dtypes.bool, (hit, *starts), inv_arg)

    if op is Ops.RESHAPE:
        return both(Ops.RESHAPE, in_shape)
    if op is Ops.PERMUTE:
        return both(Ops.PERMUTE, tuple(sorted(range(len(arg)), key=lambda i: arg[i])))
    if op is Ops.FLIP:
        return both(Ops.FLIP, arg)
    if op is Ops.SHRINK:  # shrink -> pad back to the full extent
        return both(Ops.PAD, tuple((b, s - e) for (b, e), s in zip(arg, in_shape)))
    if op is Ops.PAD:  # pad -> shrink: what was written to the padding is dropped
        return both(Ops.SHRINK, tuple((b, b + s) for (b, _), s in zip(arg, in_shape)))
    # expand (known not to overlap): at most one element along each expanded axis is written; sum it back
    axes = tuple(i for i, (a, s) in enumerate(zip(arg, in_shape)) if a != s)
    if not axes:
        return value, hit
    kept = hit.where(value, _filled(value.dtype, 0, arg))
    summed = Tensor(kept).sum(axes, keepdim=True).cast(value.dtype).uop
    any_hit = Tensor(hit).any(axes, keepdim=True).uop
    return summed, any_hit


def _overlapping(mops: tuple[_Mop, ...], shape: tuple[int, ...]) -> bool:
    """Do two elements of view `mops` of a tensor of `shape` lie on one element (an expand that broadcasts)?
    Decided on the view's map of element positions, as PyTorch decides on strides."""
    if not any(op is Ops.EXPAND and arg != s for op, arg, s, _ in mops):
        return False
    pos = np.arange(prod(shape)).reshape(shape)
    for op, arg, _, _ in mops:
        if op is Ops.RESHAPE:
            pos = pos.reshape(arg)
        elif op is Ops.PERMUTE:
            pos = pos.transpose(arg)
        elif op is Ops.FLIP:
            pos = np.flip(pos, tuple(i for i, f in enumerate(arg) if f))
        elif op is Ops.SHRINK:
            pos = pos[tuple(slice(b, e) for b, e in arg)]
        elif op is Ops.PAD:
            pos = np.pad(pos, arg, constant_values=-1)
        else:
            pos = np.broadcast_to(pos, arg)
    real = pos[pos >= 0]
    return np.unique(real).size != real.size


_broadcast_scalars: dict[tuple, UOp] = {}

# the losses that backward() ran from: an optimizer's step realizes those still lazy with the gradients, in one
# schedule. Read after the step (`loss.item()`), a lazy loss needed a copy of every weight it reads, made before
# the update, and a forward pass of its own; with the gradients it shares theirs
backward_roots: weakref.WeakSet[Tensor] = weakref.WeakSet()


def lazy_losses() -> list[Tensor]:
    """The tensors backward() ran from that are not computed yet (for an optimizer's step to realize)."""
    return [t for t in list(backward_roots) if buffer_of(t.uop) is None]


def _broadcast_scalar(dt: DType, scalar_type: type, x: Any, shape: tuple[int, ...]) -> UOp:
    """The constant `x` of `dt` broadcast to `shape` (RESHAPE to ones, then EXPAND), remembered: a loop adds the
    same scalar to tensors of the same shape at every step."""
    key = (dt, scalar_type, x, math.copysign(1.0, x) if scalar_type is float else 0, shape)
    if (ret := _broadcast_scalars.get(key)) is None:
        ret = UOp.const(dt, x)
        if shape:
            ret = UOp(Ops.RESHAPE, dt, (ret,), (1,) * len(shape))
            if ret.arg != shape:
                ret = UOp(Ops.EXPAND, dt, (ret,), shape)
        if len(_broadcast_scalars) >= 1024:
            _broadcast_scalars.clear()
        _broadcast_scalars[key] = ret
    return ret


_scalar_result_types: dict[tuple[DType, type], DType] = {}


def _scalar_result_type(dt: DType, scalar_type: type) -> DType:
    """_promote([tensor of dt, Python scalar of scalar_type]): a weak scalar counts by its kind only."""
    if (ret := _scalar_result_types.get((dt, scalar_type))) is None:
        ret = _scalar_result_types[(dt, scalar_type)] = result_type(dt, scalar_type(1))
    return ret


@functools.lru_cache(maxsize=256)
def _arange_uop(key: tuple, start: Scalar, stop: Scalar, step: Scalar) -> UOp:
    """The graph of `Tensor.arange` (`key` holds the arguments' reprs, its dtype and device): built once per
    arguments, since arange sits under indexing, one_hot and gather in every step of a loop."""
    dt, device = key[3], key[4]
    n = max(0, math.ceil((stop - start) / step))  # numpy's length
    if n >= 2**31:
        raise ArgumentError(f"arange: {n} elements (start {start}, stop {stop}, step {step}) are too many")
    if n == 0:
        return Tensor.zeros(0, dtype=dt, device=device).uop
    # 0, 1, ..., n-1 as a kernel: the running count of ones minus one (the codegen folds the count's reduction to
    # its closed form, so it is an elementwise loop, and it fuses into the kernels that read it)
    ones = Tensor.full((n,), 1, dtype=dtypes.int32, device=device)
    count = ones._windows(0)._reduce(Ops.ADD, -2, False, "arange", dtypes.int32) - 1
    if all(isinstance(v, int) for v in (start, step)) and dtypes.is_int(dt):
        return (count.cast(dt) * step + start).uop
    # numpy's values: start + i * (the step as the first two values differ), in float64, then rounded once
    delta = (start + step) - start
    values = count.cast(dtypes.float64) * delta + start
    return (values.cast(dtypes.float32).cast(dt) if dt in NARROW_FLOATS else values.cast(dt)).uop


class _TensorType(type):
    """Tensor's metaclass: `Tensor.training` reads and sets the TRAINING flag, so `Tensor.training = True`,
    `with Tensor.train():` and `with Context(TRAINING=1):` are one switch."""

    @property
    def training(cls) -> bool:
        return bool(TRAINING.value)

    @training.setter
    def training(cls, mode: bool) -> None:
        TRAINING.value = int(bool(mode))


class train(contextlib.ContextDecorator):
    """Training mode for a block or a function (`Tensor.train()`): dropout drops and BatchNorm normalizes
    with the batch's statistics (and updates its running ones); the old mode comes back after.

    >>> with Tensor.train():
    ...     Tensor.training
    True
    >>> Tensor.training
    False
    """

    def __init__(self, mode: bool = True):
        self.mode = mode

    def __enter__(self) -> None:
        self.saved = TRAINING.value
        TRAINING.value = int(bool(self.mode))

    def __exit__(self, *exc: object) -> None:
        TRAINING.value = self.saved


class Tensor(
    ElementwiseMixin,
    ReduceMixin,
    MovementMixin,
    IndexingMixin,
    CreationMixin,
    FunctionalMixin,
    NNMixin,
    InteropMixin,
    metaclass=_TensorType,
):
    """A lazy n-dimensional array on a device.

    >>> Tensor([1, 2, 3]).dtype, Tensor(2.5).shape, Tensor.zeros(2, 3).device
    (dtypes.int32, (), 'CPU')
    """

    __slots__ = ("uop", "device", "grad", "requires_grad", "_base", "_mops", "_views", "_graph", "__weakref__")
    train = train
    __hash__ = object.__hash__  # == builds a comparison, so tensors hash by identity

    def __init__(
        self, data: Any, dtype: DType | str | None = None, device: str | None = None, requires_grad: bool | None = None
    ):
        device = _device(device, "Tensor")
        if requires_grad is not None and not isinstance(requires_grad, bool):
            raise TypeError(f"Tensor: requires_grad must be a bool or None, got {requires_grad!r}")
        dt = tensor_dtype(dtype, "Tensor") if dtype is not None else None
        rounded = False
        if isinstance(data, UOp):
            if data.dtype is dtypes.index:  # a Variable's expression: a scalar of the default int dtype
                data = data.cast(dtypes.default_int)
            uop = data if dt is None or data.dtype is dt else data.cast(dt)
            if is_disk(device):
                uop = disk_view(uop, device)
        elif is_disk(device):
            raise RuntimeError(
                f"Tensor: cannot make a tensor from {type(data).__name__} on {device}: a DISK tensor is a view of a "
                "file (Tensor.empty(n, dtype=dtypes.uint8, device='disk:<file>')); Tensor(data).to('disk:<file>') "
                "writes one"
            )
        elif isinstance(data, (bool, int, float)) and not isinstance(data, np.generic):
            uop = UOp.const(_scalar_dtype(data, dt, "Tensor"), data)
        elif isinstance(data, (list, tuple, range, np.ndarray, np.generic)):
            if isinstance(data, (np.ndarray, np.generic)):
                arr = np.asarray(data)
                dt = dt or _from_numpy_dtype(arr.dtype)
            else:
                items, pure = _host_items(data)
                try:
                    arr = np.array(items)
                except ValueError as e:
                    raise ArgumentError(f"Tensor: the nested sequence is ragged ({e})") from None
                except OverflowError:
                    raise RuntimeError("Tensor: an int in the data does not fit in 64 bits") from None
                # Python values get the default dtypes; numpy scalars and tensors inside keep theirs, as in torch
                dt = dt or (_py_dtype(items, "Tensor") if pure else _from_numpy_dtype(arr.dtype))
                if pure and arr.size and arr.dtype.kind in "iuO":
                    dt = _fit_ints(dt, int(arr.min()), int(arr.max()), dtype is not None, "Tensor")
            # bfloat16, fp8 and the narrow ints have no numpy dtype: their values arrive as float32 (int32) and
            # convert on the device
            narrow = dt if dt in NARROW else None
            dt = (dtypes.int32 if narrow in NARROW_INTS else dtypes.float32) if narrow else dt
            arr = arr.astype(np_dtype(dt), copy=False)
            buf = new_buffer(device, arr.size, dt)
            engine.buffer_of_view(buf).copyin(arr)  # copies in C order, whatever the strides (a 0-d array stays 0-d)
            uop = view_of(buf, arr.shape)
            if narrow is not None:
                uop, rounded = uop.cast(narrow), True
        else:
            raise TypeError(f"Tensor: cannot make a tensor from {type(data).__name__}")
        self.uop: UOp = uop
        self.device: str = device
        self.grad: Tensor | None = None
        # None: no preference (backward fills .grad of every float tensor in the graph); False: never
        self.requires_grad: bool | None = requires_grad
        # a view (a chain of movement ops of another tensor) knows its base and the ops from it, so a write to
        # the view is a write to the base; a base knows its live views, so they read what it holds after a write
        self._base: Tensor | None = None
        self._mops: tuple[_Mop, ...] = ()
        self._views: weakref.WeakSet[Tensor] | None = None
        # a one-element float tensor (a loss) realized by its own realize keeps the graph it had, for backward()
        self._graph: UOp | None = None
        live_tensors.add(self)
        if buffer_of(uop) is None:
            lazy_tensors.add(self)
        if rounded:  # data rounded to bfloat16 or fp8: a tensor made from data is a buffer
            self.realize()

    # *** properties ***

    @property
    def shape(self) -> tuple[int, ...]:
        # the node's cached shape when it has one: tensor ops read shapes a few times each, and the UOp property
        # is a second call
        shape = self.uop._shape
        return shape if shape is not None else self.uop.shape

    @property
    def dtype(self) -> DType:
        return self.uop.dtype

    @property
    def ndim(self) -> int:
        shape = self.uop._shape
        return len(shape if shape is not None else self.uop.shape)

    def numel(self) -> int:
        return prod(self.shape)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def size(self, dim: int | None = None) -> tuple[int, ...] | int:
        """The shape, or the size of axis `dim` (PyTorch's `size()`).

        >>> Tensor.zeros(2, 3).size(), Tensor.zeros(2, 3).size(-1)
        ((2, 3), 3)
        """
        return self.shape if dim is None else self.shape[self._axes(dim, "size")[0]]

    def element_size(self) -> int:
        """Bytes per element."""
        return self.dtype.itemsize

    def nbytes(self) -> int:
        """Bytes of the whole tensor."""
        return self.numel() * self.dtype.itemsize

    def is_floating_point(self) -> bool:
        return dtypes.is_float(self.dtype)

    def __repr__(self) -> str:
        return f"<Tensor {self.shape} {self.dtype!r} on {self.device}>"

    def _scalar(self, kind: str) -> Scalar:
        if self.numel() != 1:
            raise RuntimeError(f"{kind}() of a tensor with {self.numel()} elements (shape {self.shape}) is ambiguous")
        return self.item()

    def __bool__(self) -> bool:
        """The truth of a one-element tensor, as in PyTorch (`if (x > 0).all(): ...`); it computes the value now.

        >>> bool(Tensor([1, 2]).sum() > 2)
        True
        """
        return bool(self._scalar("bool"))

    def __int__(self) -> int:
        return int(self._scalar("int"))

    def __float__(self) -> float:
        return float(self._scalar("float"))

    @staticmethod
    def _from_uop(uop: UOp, device: str) -> Tensor:
        """A tensor of graph `uop` on canonical `device`: what `Tensor(uop, device=device)` makes, without the
        checks (the hot path of every op)."""
        if device[:5] == "DISK:":  # a view of a file, or an error: the DISK device runs no kernels
            uop = disk_view(uop, device)
        t = object.__new__(Tensor)
        t.uop, t.device, t.grad, t.requires_grad = uop, device, None, None
        t._base, t._mops, t._views, t._graph = None, (), None, None
        live_tensors.add(t)
        if buffer_of(uop) is None:
            lazy_tensors.add(t)
        return t

    def _new(self, uop: UOp) -> Tensor:
        out = Tensor._from_uop(uop, self.device)
        if mops := _movement_chain(uop, self.uop):
            self._viewed_by(out, mops)
        return out

    def _viewed_by(self, out: Tensor, mops: tuple[_Mop, ...]) -> None:
        """Make `out` the view `mops` of this tensor: of its base, which refreshes its views after a write."""
        base = self if self._base is None else self._base
        out._base, out._mops = base, self._mops + mops
        if base._views is None:
            base._views = weakref.WeakSet()
        base._views.add(out)

    def _not_a_view(self) -> Tensor:
        """This value as a tensor of its own, for ops that copy in PyTorch (pad, repeat, roll): writing to the
        result must not reach the input. A lazy node is enough (it is realized into a buffer of its own); memory
        itself is copied."""
        if buffer_of(self.uop) is not None:
            return Tensor(UOp(Ops.CONTIGUOUS, self.dtype, (self.uop,)), device=self.device)
        return self if self._base is None else Tensor(self.uop, device=self.device)

    # *** creation ***

    @staticmethod
    def full(
        shape: int | Sequence[int],
        fill_value: Scalar,
        dtype: DType | str | None = None,
        device: str | None = None,
        _op: str = "full",
    ) -> Tensor:
        """A tensor of `shape` filled with `fill_value` (a constant: it takes no memory until realized).

        >>> Tensor.full((2, 2), 7).tolist()
        [[7, 7], [7, 7]]
        """
        shape = shape_arg((shape,) if isinstance(shape, int) else tuple(shape), _op)
        if any(s < 0 for s in shape):
            raise ArgumentError(f"{_op}: negative size in shape {shape}")
        dt = _scalar_dtype(fill_value, dtype, _op)
        # a tensor of its own (a write to it is not a write through a broadcast of one value)
        return Tensor(UOp.const(dt, fill_value), device=_device(device, _op))._broadcast_to(shape)._not_a_view()

    @staticmethod
    def zeros(*shape: Any, dtype: DType | str | None = None, device: str | None = None) -> Tensor:
        """A tensor of zeros (float32 unless `dtype` says otherwise).

        >>> Tensor.zeros(2, 3).tolist()
        [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]
        """
        return Tensor.full(shape_arg(shape, "zeros"), 0.0, dtype or dtypes.default_float, device, "zeros")

    @staticmethod
    def ones(*shape: Any, dtype: DType | str | None = None, device: str | None = None) -> Tensor:
        """A tensor of ones (float32 unless `dtype` says otherwise).

        >>> Tensor.ones(3, dtype="int").tolist()
        [1, 1, 1]
        """
        return Tensor.full(shape_arg(shape, "ones"), 1.0, dtype or dtypes.default_float, device, "ones")

    @staticmethod
    def empty(*shape: Any, dtype: DType | str | None = None, device: str | None = None) -> Tensor:
        """An uninitialised tensor (its buffer's contents are whatever the memory held). On a DISK device
        (`device="disk:/path/to/file"`) it is a view of the file's first bytes, mapped and read only where a copy
        to another device reads it (runtime/ops_disk.py)."""
        shape = shape_arg(shape, "empty")
        if any(s < 0 for s in shape):
            raise ArgumentError(f"empty: negative size in shape {shape}")
        dt = tensor_dtype(dtype, "empty") if dtype is not None else dtypes.default_float
        dev = _device(device, "empty")
        buf = new_buffer(dev, prod(shape), dt)
        if is_disk(dev):
            try:
                engine.buffer_of_view(buf).allocate()  # maps the file now: a missing or short file fails here
            except (OSError, ValueError) as e:
                raise type(e)(f"empty: {e}") from None
        return Tensor(view_of(buf, shape), device=dev)

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
            raise ArgumentError("arange: step must not be zero")
        dt = tensor_dtype(dtype, "arange") if dtype is not None else _py_dtype([start, stop, step], "arange")
        device = _device(device, "arange")
        key = (repr(start), repr(stop), repr(step), dt, device)  # repr: 1, 1.0 and True, 0.0 and -0.0 differ
        return Tensor._from_uop(_arange_uop(key, start, stop, step), device)

    # *** realizing and reading ***

    def realize(self, *others: Tensor) -> Tensor:
        """Compute this tensor (and `others`, in the same schedule) now; returns self.

        >>> a = Tensor([1.0, 2.0]) + 1
        >>> Tensor.realize(a, a * 2) is a
        True
        """
        for i, t in enumerate(others):
            if not isinstance(t, Tensor):
                raise TypeError(f"realize: argument {i + 1} must be a Tensor, got {type(t).__name__}")
        for t in (self, *others):
            if t.uop.op is not Ops.STORE and t.numel() == 1 and dtypes.is_float(t.dtype) and not t._is_buffer():
                t._keep_graph_for_backward()
        realize([self, *others])
        return self

    def _buffer(self):
        self.realize()
        return engine.buffer_of_view(self.uop)

    def numpy(self) -> np.ndarray:
        """The values as a numpy array of this tensor's dtype (float32 for bfloat16 and fp8, int8 or uint8 for the
        narrow ints: numpy lacks them).

        >>> Tensor([[1, 2]]).numpy()
        array([[1, 2]], dtype=int32)
        """
        if engine.capturing is not None:
            # a replay launches the kernels again but cannot redo what Python did with the values read here
            raise JitError(
                f"TinyJit: the function read a {self.shape} tensor back to Python (numpy/item/tolist) while its "
                "kernels were captured; a replay would not read it again. Return the tensor instead."
            )
        if is_disk(self.device):  # the DISK device computes nothing: the values are read by a copy
            return self.to("CPU").numpy()
        if self.dtype in NARROW_FLOATS:  # numpy has no bfloat16 or fp8: their float32 values, as torch's .float()
            return self.cast(dtypes.float32).numpy()
        if (narrow := NARROW_INTS.get(self.dtype)) is not None:  # nor int4 ...: their int8 (uint8) values
            return self.cast(dtypes.int8 if narrow.signed else dtypes.uint8).numpy()
        return self._buffer().numpy().reshape(self.shape)

    def item(self) -> Scalar:
        """The value of a one-element tensor as a Python scalar."""
        if self.numel() != 1:
            raise ArgumentError(f"item: a tensor of shape {self.shape} has {self.numel()} elements, not 1")
        return self.numpy().reshape(()).item()

    def tolist(self) -> Any:
        """The values as (nested) Python lists."""
        return self.numpy().tolist()

    def to(self, device: str) -> Tensor:
        """A copy of this tensor on `device` (self when it is there already). From a DISK device, only the bytes
        of the tensor's window of the file are read. To a DISK device (`"disk:/path"`), the values are computed and
        written now, as the whole file (C order, little-endian; bfloat16 and fp8 as their bits), which replaces
        any file there; the result is the DISK tensor over them.

        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "t.bin")
        >>> Tensor([[1, 2], [3, 4]], dtype="int16").to(f"disk:{path}").T[1].tolist()
        [2, 4]
        """
        device = _device(device, "to")
        if device == self.device:
            return self
        if is_disk(device):
            values = self if not is_disk(self.device) else self.to("CPU")
            if values.dtype in NARROW:
                values = values.bitcast(NARROW[values.dtype].storage)
            disk_write(device, values.numpy())
            return Tensor.empty(self.shape, dtype=self.dtype, device=device)
        if is_disk(self.device):
            return Tensor(disk_copy(self.uop, device), device=device)
        return Tensor(UOp(Ops.COPY, self.dtype, (self.uop,), device), device=device)

    def clone(self) -> Tensor:
        """A copy of the values in a buffer of its own: assigning to one does not change the other. `.grad` is
        cloned along, as in tinygrad.

        >>> a = Tensor([1, 2]).realize()
        >>> b = a.clone()
        >>> a += 1
        >>> b.tolist()
        [1, 2]

        As in tinygrad, the copy keeps `requires_grad` and a copy of `.grad`.
        """
        out = self._new(UOp(Ops.CONTIGUOUS, self.dtype, (self.uop,)))
        out.requires_grad = self.requires_grad
        if self.grad is not None:  # tinygrad's clone keeps the gradient (a copy of it)
            out.grad = self.grad.clone()
        return out

    def __copy__(self) -> Tensor:
        """`copy.copy(t)`: a second tensor of t's value that shares t's memory, as torch's shallow copy does (a view
        of t, or of t's base when t is a view: a write to either reaches both). `requires_grad` is kept, `.grad` is
        not (torch's).

        >>> import copy
        >>> t = Tensor([1.0, 2.0]).realize()
        >>> c = copy.copy(t)
        >>> _ = t.assign(Tensor([3.0, 4.0]))
        >>> c.tolist()
        [3.0, 4.0]
        """
        out = Tensor._from_uop(self.uop, self.device)
        out.requires_grad = self.requires_grad
        self._viewed_by(out, ())
        return out

    def __reduce__(self) -> tuple:
        """pickle: a tensor pickles as its values (realized now), dtype, device and requires_grad, as torch's does: the
        unpickled tensor has memory of its own. (A graph names this process's buffers, which another process, or
        this one later, does not have.)

        >>> import pickle
        >>> pickle.loads(pickle.dumps(Tensor([1.0, 2.0]) + 1)).tolist()
        [2.0, 3.0]
        """
        # a DISK tensor's values unpickle into memory: the DISK device is read-only
        device = "CPU" if is_disk(self.device) else self.device
        return (_unpickled, (self.numpy(), self.dtype.name, device, self.requires_grad))

    def __deepcopy__(self, memo: dict) -> Tensor:
        """`copy.deepcopy(t)`: a realized copy in a buffer of its own, with a copy of `.grad`, as torch's."""
        out = self.clone().realize()
        memo[id(self)] = out
        return out

    def contiguous(self) -> Tensor:
        """This tensor's value in its own buffer: ends the kernel here (the value is not recomputed)."""
        if buffer_of(self.uop) is not None and self._base is None:
            return self
        return self._new(UOp(Ops.CONTIGUOUS, self.dtype, (self.uop,)))

    def assign(self, x: Tensor | Scalar | np.ndarray | list) -> Tensor:
        """Overwrite this tensor's buffer with `x` (a STORE): reads made before see the old values, reads
        made after see the new ones. On a view (movement ops of a base) the write lands in the base's buffer at
        the view's elements, and every view of that base reads it. Returns self.

        >>> t = Tensor([1.0, 2.0]).realize()
        >>> t.assign(t * 10).tolist()
        [10.0, 20.0]
        >>> _ = t.flip(0)[0:1].assign(Tensor([7.0]))
        >>> t.tolist()
        [10.0, 7.0]
        """
        if is_disk(self.device):
            raise RuntimeError(
                f"assign: a tensor on {self.device} is a view of a file, which the DISK device maps read-only"
            )
        if not isinstance(x, Tensor):
            try:
                x = Tensor(x, dtype=self.dtype, device=self.device)
            except (TypeError, ValueError, RuntimeError) as e:
                raise type(e)(f"assign: {str(e).removeprefix('Tensor: ')}") from None
        if x.device != self.device:
            raise RuntimeError(f"assign: the value is on {x.device}, the tensor on {self.device}")
        if x.shape != self.shape:
            # the value broadcasts to the tensor's shape (as tinygrad and torch's copy_), never the other way
            if len(x.shape) > self.ndim or any(
                n not in (1, m) for n, m in zip(x.shape[::-1], self.shape[::-1], strict=False)
            ):
                raise ArgumentError(
                    f"assign: the value's shape {x.shape} does not broadcast to the tensor's shape {self.shape}"
                )
            x = x.expand(self.shape)
        if x.dtype is not self.dtype:
            raise TypeError(f"assign: the value's dtype {x.dtype!r} does not match the tensor's dtype {self.dtype!r}")
        if self._base is not None:
            self._base._write_through(self._mops, x)  # refreshes self with the base's other views
            return self
        if buffer_of(self.uop) is None:
            # the target must be memory: its pending assignment lands first, and with it every other pending one,
            # in one schedule (a model's BatchNorms each reassign their running statistics at every training call:
            # landed one by one, each realize walked every other pending graph, quadratic in the depth)
            pending = [t for t in lazy_tensors.tensors() if t is not self and t.uop.op is Ops.STORE]
            Tensor.realize(self, *pending)
        target = buffer_of(self.uop)
        assert target is not None
        self.uop = target.store(x.uop)
        self._graph = None
        lazy_tensors.add(self)
        for v in list(self._views or ()):
            v.uop = _apply_movement(self.uop, v._mops)
            lazy_tensors.add(v)
        return self

    def _write_through(self, mops: tuple[_Mop, ...], x: Tensor) -> None:
        """Assign `x` to this base's view `mops`: one STORE of the base, the new value where the view's elements
        lie (`hit.where(placed_x, base)`) and the old one elsewhere. Its kernel loops over the view's elements only
        (`kernelize.written_view`), unless the view broadcasts (an expand): then over the whole base."""
        if _overlapping(mops, self.shape):
            raise ArgumentError(
                "assign: unsupported operation: more than one element of the written-to view refers to a single "
                "memory location (an expand); clone() it before writing"
            )
        if buffer_of(self.uop) is None:
            self.realize()
        target = buffer_of(self.uop)
        broadcasts = any(op is Ops.EXPAND and arg != s for op, arg, s, _ in mops)
        if broadcasts and any(u is target for u in x.uop.toposort()):
            # the value reads the base, and a broadcast view's write rewrites the whole base: its kernel could not
            # prove the reads at the elements it writes, and would copy the whole base aside; storing the value first
            # costs a buffer of the view's size instead. (A view's own kernel reads `v += 1`'s v where it writes.)
            x = x.contiguous()
        hit, placed = _filled(dtypes.bool, True, x.shape), x.uop
        for m in reversed(mops):
            placed, hit = _place_back(m, placed, hit)
        self.assign(Tensor(hit.where(placed, self.uop), device=self.device))

    # *** autograd ***

    def detach(self) -> Tensor:
        """The same values, cut from the graph: no gradient flows through it.

        >>> x = Tensor([3.0])
        >>> (x * x.detach()).sum().gradient(x)[0].tolist()
        [3.0]
        """
        return self._new(UOp(Ops.DETACH, self.dtype, (self.uop,)))

    def _custom_grad(self, name: str, *inputs: Tensor, params: tuple = ()) -> Tensor:
        """This value with the gradient registered as `name` (`gradient.custom_gradient`, which maps
        (grad, out, *inputs, *params) to a gradient per input) instead of one traced through the ops that computed
        it; `params` (hashable) are passed to it after the inputs."""
        if not dtypes.is_float(self.dtype) or not any(dtypes.is_float(i.dtype) for i in inputs):
            return self
        arg = (name, *params) if params else name
        return self._new(UOp(Ops.CUSTOM_GRAD, self.dtype, (self.uop, *(i.uop for i in inputs)), arg))

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        """Set `requires_grad` (True: `backward()` fills this tensor's `.grad`; False: an optimizer skips it); returns
        self."""
        self.requires_grad = requires_grad
        return self

    def _loss_seed(self, gradient: Tensor | None, op: str) -> Tensor:
        if not dtypes.is_float(self.dtype):
            raise TypeError(f"{op}: the loss has dtype {self.dtype!r}; only floating-point tensors have gradients")
        if gradient is None:
            if self.numel() != 1:
                raise RuntimeError(
                    f"{op}: the loss has shape {self.shape}, not one element; pass gradient= (the seed, of that shape)"
                )
            return Tensor.ones(self.shape, dtype=self.dtype, device=self.device)
        if not isinstance(gradient, Tensor):
            raise TypeError(f"{op}: gradient must be a Tensor, got {type(gradient).__name__}")
        if gradient.shape != self.shape:
            raise ArgumentError(f"{op}: gradient has shape {gradient.shape}, the loss has shape {self.shape}")
        return gradient.cast(self.dtype)

    def gradient(self, *targets: Tensor, gradient: Tensor | None = None) -> list[Tensor]:
        """The gradients of this tensor (a scalar loss, or any shape with `gradient=` as the seed) with respect
        to each of `targets`, as lazy tensors. A target the loss does not depend on is an error; one it
        depends on only through steps (floor, comparisons) gets zeros.

        >>> w = Tensor([1.0, 2.0])
        >>> dw, = (w * w * 3).sum().gradient(w)
        >>> dw.tolist()
        [6.0, 12.0]
        """
        seed = self._loss_seed(gradient, "gradient")
        for i, t in enumerate(targets):
            if not isinstance(t, Tensor):
                raise TypeError(f"gradient: target {i} is a {type(t).__name__}, not a Tensor")
            if not dtypes.is_float(t.dtype):
                raise TypeError(
                    f"gradient: target {i} has dtype {t.dtype!r}; only floating-point tensors have gradients"
                )
        grads = compute_gradient(self._differentiable(), seed, [t.uop for t in targets])
        for i, t in enumerate(targets):
            if t.uop not in grads:
                raise RuntimeError(
                    f"gradient: target {i} (shape {t.shape}) is not in the graph of the loss "
                    "(it was not used, was detached, or was realized before the loss was built from it)"
                )
        return [grads[t.uop] for t in targets]

    def _keep_graph_for_backward(self) -> None:
        """A loss read before backward() (`loss.item()`, as torch code does) keeps the graph it had, to differentiate
        later: only a one-element tensor whose graph has a tensor that requires a gradient, since the graph holds its
        inputs' buffers alive as long as the tensor lives."""
        params = {t.uop for t in list(live_tensors) if t.requires_grad}
        if params and any(u in params for u in self.uop.toposort()):
            self._graph = self.uop

    def _is_buffer(self) -> bool:
        return buffer_of(self.uop) is not None

    def _differentiable(self) -> UOp:
        """The graph to differentiate: the tensor's, or the one it had when it was read (a realized loss)."""
        return self._graph if self._graph is not None and self._is_buffer() else self.uop

    def backward(self, gradient: Tensor | None = None) -> Tensor:
        """Add the gradient of this loss to `.grad` of every live floating-point tensor it was computed from that
        requires a gradient (`requires_grad` True: an nn layer's parameters, an optimizer's, or set by the caller),
        as in PyTorch and tinygrad; returns self. The gradients are lazy until read (an optimizer's `step()` computes
        them, and this loss with them if it is still lazy). Other tensors get none: the input batches of a training
        loop would otherwise each keep a lazy gradient, one more sum of it every step. A loss read first
        (`loss.item()`) keeps its graph for this, as in torch (the forward is then computed again with the
        gradients); a tensor of more than one element that was realized is a buffer with no graph.

        >>> w = Tensor([1.0, 2.0], requires_grad=True)
        >>> _ = (w * w).sum().backward()
        >>> w.grad.tolist()
        [2.0, 4.0]
        """
        seed = self._loss_seed(gradient, "backward")
        root = self._differentiable()
        nodes = set(root.toposort(gate=lambda u: u.op is not Ops.DETACH))
        tensors = [
            t
            for t in list(live_tensors)
            if t is not self and t.requires_grad and dtypes.is_float(t.dtype) and t.uop in nodes
        ]
        if not tensors:
            # torch raises here too; returning with no gradient set would leave an optimizer step silently a no-op
            raise RuntimeError(
                "backward: no tensor that requires a gradient is in the graph of the loss: set requires_grad=True "
                "on the parameters; a tensor of more than one element realized before (.numpy(), .realize()) is a "
                "buffer that keeps no graph to differentiate: call backward() before reading it"
            )
        grads = compute_gradient(root, seed, list(dict.fromkeys(t.uop for t in tensors)))
        backward_roots.add(self)
        for t in tensors:
            g = grads[t.uop]
            if g._base is not None:
                # the gradient as a tensor of its own, not a view (a reshape of the sum over a broadcast axis): its
                # lazy base would outlive the gradient's realize, and every later realize would walk it (an SGD step
                # also copied aside the weights that base reads)
                g = Tensor._from_uop(g.uop, g.device)
            t.grad = g if t.grad is None else t.grad + g
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
                raise ArgumentError(f"{op}: shapes {shown} cannot be broadcast together")
            out.append(big.pop() if big else 1)
        return tuple(out)

    def _operands(self, op: str, *others: Any, dtype: DType | None = None) -> list[Tensor]:
        """self and `others` (tensors or Python scalars) promoted to one dtype and broadcast to one shape."""
        # numpy scalars are Python scalars here (weak, as in torch)
        others = tuple(o.item() if isinstance(o, np.generic) else o for o in others)
        for o in others:
            if isinstance(o, Tensor):
                if o.device != self.device:
                    raise RuntimeError(f"{op}: tensors on different devices ({self.device} and {o.device})")
            elif not isinstance(o, (bool, int, float)):
                raise TypeError(f"{op}: unsupported operand type {type(o).__name__}")
        if dtype is None and all(isinstance(o, Tensor) and o.dtype is self.dtype for o in others):
            tensors = [self, *others]  # one dtype: nothing to promote or cast (the common `a * b`)
        else:
            dt = dtype or _promote([self, *others])
            tensors = [self.cast(dt)] + [
                o.cast(dt) if isinstance(o, Tensor) else Tensor(UOp.const(dt, o), device=self.device) for o in others
            ]
        shape = self.shape
        if any(t.shape != shape for t in tensors):
            shape = Tensor._broadcast_shape(op, *(t.shape for t in tensors))
        return [t._broadcast_to(shape) for t in tensors]

    def _binary(self, op: Ops, x: Any, name: str, reverse: bool = False, dtype: DType | None = None) -> Tensor:
        tx = type(x)
        if dtype is None and (tx is float or tx is int or tx is bool):
            # the common `x + 1`: a Python scalar needs no operand tensors, only its constant broadcast to our shape
            dt = _scalar_result_type(self.dtype, tx)
            a_uop = self.uop if dt is self.dtype else self.uop.cast(dt)
            b_uop = _broadcast_scalar(dt, tx, x, a_uop.shape)
            if reverse:
                a_uop, b_uop = b_uop, a_uop
            return Tensor._from_uop(a_uop.alu(op, b_uop), self.device)
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
        dt = tensor_dtype(dtype, "cast")
        return self if dt is self.dtype else self._new(self.uop.cast(dt))

    def _axes(self, axis: int | Sequence[int] | None, op: str) -> tuple[int, ...]:
        ndim = self.ndim
        if axis is None:
            return tuple(range(ndim))
        axis = axis_arg(axis, op)
        axes = (axis,) if isinstance(axis, int) else tuple(axis)
        bound = max(ndim, 1)
        out = []
        for a in axes:
            if type(a) is not int and (not isinstance(a, int) or isinstance(a, bool)):
                raise TypeError(f"{op}: axis must be an int, got {a!r}")
            if not -bound <= a < bound:
                raise IndexError(
                    f"{op}: axis {a} is out of range for a tensor of {ndim} dimensions (shape {self.shape})"
                )
            out.append(a % ndim if ndim else 0)
        if len(set(out)) != len(out):
            raise ArgumentError(f"{op}: axis {axis} repeats an axis")
        return tuple(sorted(out)) if ndim else ()

    def _reduce(self, op: Ops, axis: Any, keepdim: bool, name: str, acc_dtype: DType) -> Tensor:
        axes = self._axes(axis, name)
        x = self.cast(acc_dtype)
        uop = UOp(Ops.REDUCE_AXIS, acc_dtype, (x.uop,), (op, axes)) if axes else x.uop
        out = x._new(uop)
        if not keepdim:
            out = out.reshape(tuple(s for i, s in enumerate(self.shape) if i not in axes))
        return out
