"""GPU-style launches: on a device with work-groups (`renderer.has_local`), the kernel's output loops become launch
indices instead of loops.

After the opts, every output loop of constant size that is still a loop becomes a SPECIAL `gidxN`, the index of
the work-group along launch dimension N: the innermost loop is dimension 0, the next 1, the next 2 (OpenCL has
three; a fourth and further outer loops stay loops inside each work-item). The LOCAL and GROUP opts (opt.py)
made the `lidxN` indices, a work-item's place in its work-group, already. A program is launched over
`groups[N] * local[N]` work-items per dimension, in work-groups of `local[N]` (`launch_sizes`).

>>> from zeptograd.uop.ops import UOp
>>> launch_sizes([UOp(Ops.SPECIAL, dtypes.index, (UOp.const(dtypes.index, 8),), "gidx0")])
((8, 1, 1), (1, 1, 1))
"""

from __future__ import annotations

from collections.abc import Sequence

from zeptograd.codegen.opt import _rebuild, output_axes
from zeptograd.dtype import dtypes
from zeptograd.uop.ops import Ops, UOp

MAX_DIMS = 3  # OpenCL's launch dimensions


class LaunchError(ValueError):
    """A kernel that cannot be launched as planned (local memory inside a loop each work-item runs)."""


def gpu_dims(ast: UOp) -> UOp:
    """`ast` with its innermost (up to three) constant output loops as work-group indices `gidx0..2`."""
    loops = [r for r in output_axes(ast) if r.src[0].op is Ops.CONST]
    taken = {u.arg for u in ast.toposort() if u.op is Ops.SPECIAL}
    dim = 0
    for r in reversed(loops):
        while f"gidx{dim}" in taken:
            dim += 1
        if dim >= MAX_DIMS:
            break
        ast = _rebuild(ast, r, UOp(Ops.SPECIAL, dtypes.index, (r.src[0],), f"gidx{dim}"), ())
        dim += 1
    if any(u.op is Ops.DEFINE_LOCAL for u in ast.toposort()) and output_axes(ast):
        # a loop around local memory would need a barrier before each next write; not planned
        raise LaunchError("a kernel with local memory (GROUP) has more than 3 output axes left as loops")
    return ast


def launch_sizes(uops: Sequence[UOp]) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """(global work size, local work size) of a program, per dimension, from its `gidxN` and `lidxN` indices: a
    dimension's global size is its work-groups times its work-group size."""
    groups, local = [1, 1, 1], [1, 1, 1]
    for u in uops:
        if u.op is Ops.SPECIAL and u.arg[:4] in ("gidx", "lidx"):
            (groups if u.arg[0] == "g" else local)[int(u.arg[4:])] = u.src[0].arg
    return (groups[0] * local[0], groups[1] * local[1], groups[2] * local[2]), (local[0], local[1], local[2])
