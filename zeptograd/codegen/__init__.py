"""Codegen: a kernel AST becomes a linear program, then source text for a device.

The passes run in this order, each a named graph_rewrite (the spec of the stage is checked between
passes when SPEC=1):

1. `opt`: upcast, unroll, local/group, splitting the outer loop across threads, tensor cores.
2. `expand`: upcast axes become vector dtypes (VECTORIZE / GEP).
3. `devectorize`: vectors narrowed to what the target supports.
4. `accumulators`: REDUCE -> DEFINE_REG accumulator read through AFTER.
5. `gated stores`: STORE through a gated INDEX -> IF / STORE / ENDIF.
6. `commit index dtype`: `index` -> int32 or int64, from the value ranges.
7. `linearize`: the graph -> an ordered program.

The first three are the boundaries where the speed work plugs in; today they have no rules, and a
kernel is scalar loops.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from zeptograd.codegen.linearize import linearize
from zeptograd.codegen.lowering import (
    AccumulatorContext,
    accumulators,
    commit_index_dtype,
    constant_gates,
    gated_stores,
    index_dtype_for,
    live_ranges,
)
from zeptograd.codegen.transcendental import decompositions
from zeptograd.dtype import PtrDType, dtypes
from zeptograd.helpers import SPEC
from zeptograd.uop.ops import GroupOp, Ops, UOp
from zeptograd.uop.pattern import PatternMatcher
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


# the passes where optimisation plugs in; see the module docstring
opt = PatternMatcher([])
expand = PatternMatcher([])
devectorize = PatternMatcher([])


def estimate_cost(sink: UOp) -> tuple[int, int]:
    """(floating/integer value ops executed, bytes of the buffers touched), from the loop trip counts."""
    blocks = live_ranges(sink)
    flops = 0
    mem = 0
    for u in sink.toposort():
        if u.op in GroupOp.ALU and u.dtype is not dtypes.index:
            trips = math.prod(r.src[0].arg for r in blocks[u] if r.op is Ops.RANGE and r.src[0].op is Ops.CONST)
            flops += trips
        if u.op is Ops.DEFINE_GLOBAL and isinstance(u.dtype, PtrDType):
            mem += u.dtype.size * u.dtype.base.itemsize
    return flops, mem


def _check(root: UOp, stage: str) -> None:
    if SPEC.value:
        verify(root, kernel_spec, stage)


def full_rewrite(ast: UOp) -> list[UOp]:
    """The linear program of a kernel AST."""
    _check(ast, "kernel AST")
    sink = ast
    for name, pm in (("opt", opt), ("expand", expand), ("devectorize", devectorize)):
        if pm.rules:
            sink = graph_rewrite(sink, pm, name=name)
            _check(sink, f"after {name}")
    sink = graph_rewrite(sink, decompositions, name="decompositions")  # EXP2 LOG2 SIN -> arithmetic (vectorizes)
    sink = graph_rewrite(sink, accumulators, AccumulatorContext(), name="accumulators")
    sink = graph_rewrite(sink, symbolic + constant_gates, name="simplify")
    _check(sink, "after accumulators")
    sink = graph_rewrite(sink, gated_stores, name="gated stores")
    sink = commit_index_dtype(sink, index_dtype_for(sink))
    program = linearize(sink)
    if SPEC.value:
        verify(program, program_spec, "linear program")
    return program


def get_program(ast: UOp, renderer) -> ProgramSpec:
    """Compile-ready form of a kernel AST for a device's renderer."""
    flops, mem = estimate_cost(ast)
    top = ast.src[0]
    global_size = tuple(r.src[0].arg for r in top.src[1:]) if top.op is Ops.END else ()
    program = full_rewrite(ast)
    name = ast.arg or "kernel"
    return ProgramSpec(name, tuple(program), renderer.render(name, program), global_size, flops, mem)
