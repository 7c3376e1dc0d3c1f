"""Float constants as a kernel's argument, once its structure has been compiled with other values.

A kernel bakes its constants into its code, so `x * 0.5` and `x * 0.25` are two programs and each new value costs a
compile (50-90 ms of gcc and codegen on the CPU). A loop whose constants change (a hand-written schedule, `x * t`
for each t) would compile at every step. So the first kernel of a structure keeps its constants in its code (the
kernel a user reads, `DEBUG=4`), and when a kernel of the same structure comes with other float32 constants, its
constants are read from a small buffer instead, the kernel's last argument: one more program, which then serves
every value (as torch.compile treats a size that changed once as dynamic). 0, 1 and -1 stay in the code: the
rewrite rules fold them (`x * 1 -> x`), so a kernel that has them is another structure. So do inf and NaN.

    >>> from zeptograd.dtype import dtypes
    >>> from zeptograd.uop.ops import UOp
    >>> x = UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(4), (), 1).index(UOp.range(4, 0)).load()
    >>> lifted, values = lift_constants((x * 0.25 + 1.0).sink())
    >>> values
    (0.25,)
"""

from __future__ import annotations

import math

import numpy as np

from zeptograd.dtype import dtypes
from zeptograd.runtime.buffer import Buffer
from zeptograd.uop.ops import Ops, UOp

# the devices whose kernels get their constants from a buffer once a structure repeats: the CPU ones, whose compiles
# are what a new constant costs here (a GPU's storage buffers are few: WEBGPU allows 8 to a kernel)
LIFTING_DEVICES = ("CPU", "LLVM")
# constant buffers kept, by device and values (a loop over new values would otherwise keep one for each)
CONST_BUFFERS_KEPT = 1024

_buffers: dict[tuple[str, tuple[float, ...]], Buffer] = {}


def _varies(v: float) -> bool:
    """Is a float constant one a buffer may carry: not 0, 1 or -1 (which the rewrite rules fold), and finite?"""
    return math.isfinite(v) and v not in (0.0, 1.0, -1.0)


def lift_constants(ast: UOp) -> tuple[UOp, tuple[float, ...]]:
    """`ast` with its float32 constants (but 0, 1, -1, inf and NaN) read from a new buffer argument, one element
    each in the order the kernel's graph meets them, and their values; `(ast, ())` where it has none."""
    nodes = ast.toposort()
    consts = [u for u in nodes if u.op is Ops.CONST and u.dtype is dtypes.float32 and not u.src and _varies(u.arg)]
    if not consts:
        return ast, ()
    arg = 1 + max(u.arg for u in nodes if u.op is Ops.DEFINE_GLOBAL)
    table = UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(len(consts)), (), arg)
    reads = {c: table.index(UOp.const(dtypes.index, i)).load() for i, c in enumerate(consts)}
    return ast.substitute(reads), tuple(float(c.arg) for c in consts)


def constant_buffer(device: str, values: tuple[float, ...]) -> Buffer:
    """A float32 buffer on `device` holding `values` (made once for each device and values while kept)."""
    key = (device, values)
    if (buf := _buffers.get(key)) is None:
        if len(_buffers) >= CONST_BUFFERS_KEPT:
            _buffers.clear()
        buf = Buffer(device, len(values), dtypes.float32).allocate().copyin(np.array(values, np.float32))
        _buffers[key] = buf
    return buf
