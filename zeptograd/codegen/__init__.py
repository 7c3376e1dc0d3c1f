"""Codegen: a kernel AST becomes a linear program, then source text for a device.

The passes run in this order, each a named graph_rewrite (the spec of the stage is checked between
passes when SPEC=1):

0. `narrow floats`: bfloat16 and fp8 become their storage bits in memory and float32 values (narrowfloat.py), the
   narrow ints (int4, uint4, int2, uint2) their bytes and int32 values,
   and so do the floats the renderer cannot compute in (`renderer.emulated_floats`: float16 in OpenCL without
   cl_khr_fp16);
   on a device without float64, `float64 -> float32`: the float64 math inside float32 ops (demote.py);
   `closed forms`: a sum of an indicator over a range becomes a count (closedform.py).
1. `opt`: the kernel's plan (a list of `Opt`s: upcast, unroll, threads, loop order, padding, work-groups)
   applied to its loops; the plan is the caller's (the engine's `BEAM` search, engine/search.py) or the
   hand-written heuristic's, none with `NOOPT=1` (opt.py, heuristic.py). On a GPU-style device the output loops
   then become work-group indices (gpudims.py).
2. `decompositions`: EXP2, EXP, TANH, LOG2, SIN, COS and TAN become range reduction and polynomials
   (transcendental.py), so they vectorize like any arithmetic (for every target but the PYTHON device, which
   computes them exactly, and HIP, which calls ocml). The reductions of SIN, COS and TAN are those the renderer's
   target can run (a fused multiply-add, 64-bit ints: `target_of`).
3. `expand`: upcast and unrolled lanes become vector dtypes (VECTORIZE / GEP; expander.py).
4. `devectorize`: vectors narrowed to what the target renders, contiguous accesses as vector LOAD/STORE
   (devectorizer.py).
5. `accumulators`: REDUCE -> DEFINE_REG accumulator read through AFTER, and a WHERE marked RARE -> a register
   and an IF on "any lane" (lowering.py); then `x*y+z` becomes a fused multiply-add (MULACC) unless NOOPT.
6. `gated stores`: STORE through a gated INDEX -> IF / STORE / ENDIF.
7. `commit index dtype`: `index` -> int32 or int64, from the value ranges.
8. `linearize`: the graph -> an ordered program.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from zeptograd.codegen.closedform import fold_closed_forms, scatters
from zeptograd.codegen.demote import demote_float64
from zeptograd.codegen.devectorizer import devectorize, fuse_multiply_add
from zeptograd.codegen.expander import expand
from zeptograd.codegen.gpudims import gpu_dims, launch_sizes
from zeptograd.codegen.heuristic import hand_coded_opts
from zeptograd.codegen.linearize import linearize
from zeptograd.codegen.lowering import (
    AccumulatorContext,
    accumulators,
    commit_index_dtype,
    constant_gates,
    gated_stores,
    index_dtype_for,
    lane_loads,
    live_ranges,
    merge_loops,
)
from zeptograd.codegen.narrowfloat import lower_narrow_floats
from zeptograd.codegen.opt import Opt, OptError, OptOps, applied_opts, apply_opts, ast_name, max_local
from zeptograd.codegen.transcendental import decompositions, target_of
from zeptograd.dtype import NARROW, PtrDType, dtypes
from zeptograd.helpers import DEBUG, NOOPT, SPEC
from zeptograd.renderer import Renderer
from zeptograd.uop.ops import GroupOp, Ops, UOp
from zeptograd.uop.rewrite import graph_rewrite
from zeptograd.uop.spec import kernel_spec, program_spec, verify
from zeptograd.uop.symbolic import symbolic


@dataclass(frozen=True)
class ProgramSpec:
    """A kernel ready for a device: its linear program, its source text, and what it costs."""

    name: str
    uops: tuple[UOp, ...]
    src: str
    global_size: tuple[int, ...]
    flops: int
    mem_bytes: int
    opts: tuple[Opt, ...] = ()
    chunks: int = 1  # how many calls run the kernel, on the cores in turn (a SPECIAL "chunk" index tells them apart)
    # a GPU-style launch (codegen/gpudims.py): work-items per dimension in all, and in one work-group
    launch_global: tuple[int, ...] = ()
    launch_local: tuple[int, ...] = ()
    # the kernel's symbolic variables (DEFINE_VAR), in the order of their parameters: after the buffers
    variables: tuple[UOp, ...] = ()


def estimate_cost(sink: UOp) -> tuple[int, int]:
    """(floating/integer value ops executed, bytes of the buffers touched), from the loop trip counts: an ALU op
    once per iteration of the loops it sits in, a REDUCE once per iteration of its own loops too."""
    blocks = live_ranges(sink)
    flops = 0
    mem = 0
    for u in sink.toposort():
        inside = blocks[u.src[0]] if u.op is Ops.REDUCE else blocks[u] if u.op in GroupOp.ALU else None
        if inside is not None and u.dtype is not dtypes.index:
            flops += math.prod(r.src[0].arg for r in inside if r.op is Ops.RANGE and r.src[0].op is Ops.CONST)
        if u.op is Ops.DEFINE_GLOBAL and isinstance(u.dtype, PtrDType):
            mem += u.dtype.size * u.dtype.base.itemsize
    return flops, mem


def _check(root: UOp, stage: str) -> None:
    if SPEC.value:
        verify(root, kernel_spec, stage)


def optimize(ast: UOp, renderer: Renderer, opts: Sequence[Opt] | None = None) -> UOp:
    """The kernel AST with its plan for `renderer`'s target applied: `opts` if given (the engine's BEAM search
    passes its plan), else none with NOOPT or for a scatter, else the heuristic's plan."""
    if opts is None:
        if not plannable(ast):
            return ast
        opts = hand_coded_opts(ast, renderer)
    if not renderer.has_shared:
        for o in opts:
            if o.op in (OptOps.GROUP, OptOps.GROUPTOP):
                raise OptError(f"{o}: the {renderer.device} device has no local memory to group a reduction in")
    return apply_opts(ast, list(opts), max_local(renderer), renderer.tensor_cores)


def plannable(ast: UOp) -> bool:
    """Whether a plan may be chosen for a prepared kernel AST (`prepare`): not with NOOPT, and not for a scatter,
    whose loops run in order (closedform.scatter_form)."""
    return not NOOPT and not scatters(ast)


def prepare(ast: UOp, renderer: Renderer) -> UOp:
    """A kernel AST as its plan is applied to it: narrow floats lowered, float64 demoted where the device lacks
    it, closed forms folded (pass 0). Preparing a prepared AST changes nothing."""
    _check_narrow_storage(ast, renderer)
    ast = fold_closed_forms(lower_narrow_floats(ast, renderer.emulated_floats))
    if dtypes.float64 not in renderer.supported_dtypes():
        ast = demote_float64(ast)  # float64 math inside float32 ops, in float32 (demote.py)
    return ast


def _check_narrow_storage(ast: UOp, renderer: Renderer) -> None:
    """UnsupportedDType naming a narrow dtype (int4, bfloat16, ...) whose storage the device lacks (WebGPU has no
    8-bit ints), before it is lowered to that storage."""
    supported = renderer.supported_dtypes()
    for u in ast.toposort():
        dt = u.dtype.base if isinstance(u.dtype, PtrDType) else u.dtype
        if (fmt := NARROW.get(dt.scalar())) is not None and fmt.storage not in supported:
            raise UnsupportedDType(
                f"the {renderer.device} device does not support {dt.scalar()!r}: it is stored as {fmt.storage!r}, "
                f"which the device lacks (its dtypes: {', '.join(sorted(d.name for d in supported))})"
            )


def full_rewrite(ast: UOp, renderer: Renderer | None = None, opts: Sequence[Opt] | None = None) -> list[UOp]:
    """The linear program of a kernel AST for `renderer`'s target, optimized for it unless NOOPT, or with `opts`.
    None is no device: the base `Renderer`'s capabilities (scalar code, no work-groups), and no plan but `opts`.

    >>> from zeptograd.engine.facts import device_facts
    >>> from zeptograd.schedule.kernelize import create_schedule
    >>> (item,), _ = create_schedule([(Tensor.ones(4, 8).contiguous().realize() * 2).uop], ["CPU"], device_facts)
    >>> any(u.dtype.count > 1 for u in full_rewrite(item.ast))
    False
    """
    target = Renderer() if renderer is None else renderer
    _check(ast, "kernel AST")
    ast = prepare(ast, target)
    sink = optimize(ast, target, opts) if renderer is not None or opts is not None else ast
    if target.has_local:
        sink = gpu_dims(sink, merge=not target.runs_on_cpu)
    _check(sink, "after opt")
    # EXP2 LOG2 SIN COS TAN ... -> arithmetic, before expand so the polynomials become vector code; a target that
    # has them (the PYTHON device: exact math) keeps the ops. The reductions of SIN, COS and TAN depend on the target
    # (fused multiply-add, 64-bit integers)
    if not target.native_transcendentals:
        sink = graph_rewrite(sink, decompositions, target_of(target), name="decompositions")
    sink = expand(sink)
    _check(sink, "after expand")
    sink = devectorize(
        sink, target.max_lanes, target.masked_load, target.fragment_load_lanes, target.paired_gated_stores
    )
    _check(sink, "after devectorize")
    sink = merge_loops(graph_rewrite(sink, accumulators, AccumulatorContext(), name="accumulators"))
    # a GPU's vector loads are a WMMA operand's 16-byte runs (fragment_load_lanes), kept whole when lanes are taken
    gpu_fragments = target.fragment_load_lanes > 1
    rules = symbolic + constant_gates if gpu_fragments else symbolic + constant_gates + lane_loads
    sink = graph_rewrite(sink, rules, name="simplify")
    if applied_opts(sink) or (renderer is not None and not NOOPT):
        sink = graph_rewrite(sink, fuse_multiply_add, name="fused multiply-add")
    _check(sink, "after accumulators")
    sink = graph_rewrite(sink, gated_stores, name="gated stores")
    sink = commit_index_dtype(sink, index_dtype_for(sink))
    program = linearize(sink)
    if SPEC.value:
        verify(program, program_spec, "linear program")
    return program


class UnsupportedDType(TypeError):
    """A kernel computes or stores a dtype its device lacks (`renderer.supported_dtypes()` does not list it)."""


def check_dtypes(program: Sequence[UOp], renderer: Renderer) -> None:
    """Raise UnsupportedDType, naming the device and the dtype, when `program` uses a dtype `renderer` lacks."""
    supported = renderer.supported_dtypes()
    for u in program:
        dt = u.dtype.base if isinstance(u.dtype, PtrDType) else u.dtype
        scalar = dt.scalar()
        if scalar not in supported and scalar is not dtypes.void and scalar is not dtypes.index:
            raise UnsupportedDType(
                f"the {renderer.device} device does not support {scalar!r} (its dtypes: "
                f"{', '.join(sorted(d.name for d in supported))})"
            )


def get_program(ast: UOp, renderer: Renderer, opts: Sequence[Opt] | None = None) -> ProgramSpec:
    """Compile-ready form of a kernel AST for a device's renderer (with `opts` as its plan, if given)."""
    ast = fold_closed_forms(ast)  # counted and named as the loop it becomes
    flops, mem = estimate_cost(ast)
    top = ast.src[0]
    global_size = tuple(r.src[0].arg for r in top.src[1:]) if top.op is Ops.END else ()
    program = full_rewrite(ast, renderer, opts)
    name = ast_name(ast)
    sink = program[-1]
    applied = applied_opts(sink)
    chunks = next((u.src[0].arg for u in program if u.op is Ops.SPECIAL and u.arg == "chunk"), 1)
    if DEBUG >= 3:
        print(f"{name}: {list(applied)}")
    check_dtypes(program, renderer)
    src = renderer.render(name, program)
    launch = launch_sizes(program) if renderer.has_local else ((), ())
    variables = tuple(u for u in program if u.op is Ops.DEFINE_VAR)
    return ProgramSpec(
        name, tuple(program), src, global_size, flops, mem, applied, chunks, launch[0], launch[1], variables
    )
