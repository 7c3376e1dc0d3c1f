"""GPU-style launches: on a device with work-groups (`renderer.has_local`), the kernel's output loops become launch
indices instead of loops.

After the opts, every output loop of constant size that is still a loop becomes a SPECIAL `gidxN`, the index of
the work-group along launch dimension N: the innermost loop is dimension 0, the next 1, the next 2 (OpenCL has
three). A kernel with more loops than that runs the outer ones together on the last dimension, instead of as
loops inside each work-item (a copy into a 7-axis order had run 256 x 256 iterations a work-item on 64 work-groups).
The LOCAL and GROUP opts (opt.py) made the `lidxN` indices, a work-item's place in its work-group, already. A
program is launched over `groups[N] * local[N]` work-items per dimension, in work-groups of `local[N]`
(`launch_sizes`).

>>> from zeptograd.uop.ops import UOp
>>> launch_sizes([UOp(Ops.SPECIAL, dtypes.index, (UOp.const(dtypes.index, 8),), "gidx0")])
((8, 1, 1), (1, 1, 1))
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from zeptograd.codegen.opt import _rebuild, output_axes
from zeptograd.dtype import dtypes
from zeptograd.uop.ops import Ops, UOp

MAX_DIMS = 3  # OpenCL's launch dimensions
MERGED_MAX = 65535  # groups along a dimension that runs several loops: what CUDA and WebGPU allow on y and z


class LaunchError(ValueError):
    """A kernel that cannot be launched as planned (local memory inside a loop each work-item runs)."""


def gpu_dims(ast: UOp, merge: bool = True) -> UOp:
    """`ast` with its constant output loops as work-group indices `gidx0..2`, innermost first. Where there are more
    loops than free dimensions, the last free dimension runs the rest together (each loop's index is a quotient and
    remainder of it), as far as MERGED_MAX groups, when `merge` (a GPU: work-groups are its parallelism; not a
    CPU's OpenCL, where a work-group is a loop already and the quotients only cost); other loops stay loops inside
    each work-item."""
    loops = [r for r in output_axes(ast) if r.src[0].op is Ops.CONST]
    taken = {u.arg for u in ast.toposort() if u.op is Ops.SPECIAL}
    free = [d for d in range(MAX_DIMS) if f"gidx{d}" not in taken]
    inner = list(reversed(loops))  # innermost first
    own, rest = (inner[: len(free) - 1], inner[len(free) - 1 :]) if merge and free else (inner[: len(free)], [])
    for r, dim in zip(own, free):
        ast = _rebuild(ast, r, UOp(Ops.SPECIAL, dtypes.index, (r.src[0],), f"gidx{dim}"), ())
    merged: list[UOp] = []
    for r in rest:  # innermost first, while the product fits (the first always: it would have the dimension alone)
        if merged and math.prod(m.src[0].arg for m in merged) * r.src[0].arg > MERGED_MAX:
            break
        merged.append(r)
    if merged:
        size = math.prod(r.src[0].arg for r in merged)
        index = UOp(Ops.SPECIAL, dtypes.index, (UOp.const(dtypes.index, size),), f"gidx{free[-1]}")
        stride = 1
        for r in merged:
            quotient = index // stride if stride > 1 else index
            last = r is merged[-1]
            ast = _rebuild(ast, r, quotient if last else quotient % r.src[0].arg, ())
            stride *= r.src[0].arg
    if any(u.op is Ops.DEFINE_LOCAL for u in ast.toposort()) and output_axes(ast):
        # a loop around local memory would need a barrier before each next write; not planned
        raise LaunchError("a kernel with local memory (GROUP) has output loops left over its launch dimensions")
    return ast


def launch_sizes(uops: Sequence[UOp]) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """(global work size, local work size) of a program, per dimension, from its `gidxN` and `lidxN` indices: a
    dimension's global size is its work-groups times its work-group size."""
    groups, local = [1, 1, 1], [1, 1, 1]
    for u in uops:
        if u.op is Ops.SPECIAL and u.arg[:4] in ("gidx", "lidx"):
            (groups if u.arg[0] == "g" else local)[int(u.arg[4:])] = u.src[0].arg
    return (groups[0] * local[0], groups[1] * local[1], groups[2] * local[2]), (local[0], local[1], local[2])
