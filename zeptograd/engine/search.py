"""BEAM search: a kernel's plan found by timing real runs instead of by the heuristic.

The engine asks for a kernel's plan here before it compiles it (`beam_opts`) and passes the plan to codegen.
`BEAM=n` keeps the n fastest plans at each step. A step tries every opt that fits each kept plan (UPCAST,
UNROLL, THREAD, SWAP), compiles each candidate, runs it on scratch buffers of the kernel's sizes and keeps the
fastest; the search stops when a step makes nothing faster. The winner is cached on disk (a JSON file per
kernel and device under `$ZEPTOGRAD_CACHE_DIR/beam`), so a kernel is searched once per machine.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from pathlib import Path
from typing import Any

import numpy as np

from zeptograd.codegen import get_program, plannable, prepare
from zeptograd.codegen.opt import Opt, OptError, OptOps, apply_opts, output_axes, reduce_axes
from zeptograd.codegen.opt import max_local as work_group_limit
from zeptograd.dtype import PtrDType
from zeptograd.helpers import BEAM, THREADS, cache_dir
from zeptograd.renderer import Renderer
from zeptograd.runtime.buffer import Buffer, VariableValue
from zeptograd.runtime.device import Device
from zeptograd.uop.ops import Ops, UOp
from zeptograd.uop.render import pyrender

UPCASTS = (2, 3, 4, 8, 16)
UNROLLS = (2, 4, 8, 16, 32)
MAX_LANES = 256  # a plan whose vectors need more lanes than this spills registers: not tried


def _cache_file(ast: UOp, device: str) -> Path:
    key = hashlib.sha256(f"{device}\0{pyrender(ast)}".encode()).hexdigest()[:32]
    return cache_dir() / "beam" / f"{device.lower()}_{key}.json"


LOCALS = (2, 4, 8, 16, 32, 64)
GROUPS = (4, 8, 16, 32)


def candidates(ast: UOp, max_local: int = 0) -> list[Opt]:
    """Every single opt worth trying on `ast` (some may not fit: apply_opt decides); the GPU opts where the device
    has work-groups of up to `max_local` work-items."""
    outs, reds = output_axes(ast), reduce_axes(ast)
    opts = [Opt(OptOps.UPCAST, i, n) for i in range(len(outs)) for n in UPCASTS]
    opts += [Opt(OptOps.UNROLL, i, n) for i in range(len(reds)) for n in UNROLLS]
    opts += [Opt(OptOps.SWAP, i, j) for i in range(len(outs)) for j in range(i + 1, len(outs))]
    if max_local:
        opts += [Opt(OptOps.LOCAL, i, n) for i in range(len(outs)) for n in LOCALS if n <= max_local]
        opts += [Opt(op, i, n) for op in (OptOps.GROUP, OptOps.GROUPTOP) for i in range(len(reds)) for n in GROUPS]
    elif THREADS.value > 1 and not any(u.op is Ops.SPECIAL for u in ast.toposort()):
        opts += [Opt(OptOps.THREAD, i, THREADS.value) for i in range(len(outs))]
    return opts


def _lanes(ast: UOp) -> int:
    return math.prod(u.src[0].arg for u in ast.toposort() if u.op is Ops.UNROLL)


class _Timer:
    """Compiles and times plans of one kernel on scratch buffers."""

    def __init__(self, ast: UOp, device: str) -> None:
        self.ast, self.device = ast, Device[device]
        globals_ = sorted((u for u in ast.toposort() if u.op is Ops.DEFINE_GLOBAL), key=lambda u: u.arg)
        rng = np.random.default_rng(0)
        self.bufs = []
        for g in globals_:
            assert isinstance(g.dtype, PtrDType)
            buf = Buffer(device, max(g.dtype.size, 1), g.dtype.base)
            data = buf.array()
            data[:] = rng.standard_normal(data.shape).astype(data.dtype) if data.dtype.kind == "f" else 1
            self.bufs.append(buf)

    def time(self, opts: list[Opt], runs: int = 3) -> float:
        program = get_program(self.ast, self.device.renderer, opts)
        run = self.device.runner(program)
        # a variable's value changes no kernel's work (shapes are constants): time it at the top of its range
        args = [*self.bufs, *(VariableValue(v, v.arg[2]) for v in program.variables)]
        run(args)
        best = math.inf
        for _ in range(runs):
            start = time.perf_counter()
            run(args)
            best = min(best, time.perf_counter() - start)
        return best


def _progress(total: int, desc: str) -> Any:
    try:
        from tqdm import tqdm  # type: ignore[import-untyped]
    except ImportError:  # the bar is a nicety: search without it
        return None
    return tqdm(total=total, desc=desc, leave=False)


def beam_opts(ast: UOp, renderer: Renderer) -> list[Opt] | None:
    """The plan to compile kernel `ast` with on `renderer`'s device: BEAM search's with `BEAM=n` (n >= 1), else
    None, which leaves the plan to codegen (the heuristic's; none with NOOPT or for a scatter, which no search
    plans either)."""
    if BEAM.value < 1:
        return None
    prepared = prepare(ast, renderer)
    return beam_search(prepared, renderer, BEAM.value) if plannable(prepared) else None


def beam_search(ast: UOp, renderer: Renderer, width: int) -> list[Opt]:
    """The fastest plan found for `ast` on the device of `renderer`, keeping `width` plans a step."""
    if width < 1:
        raise ValueError(f"a beam keeps at least 1 plan a step, got width {width}")
    ast = prepare(ast, renderer)  # the AST codegen applies the plan to: its axes are the ones the opts name
    device = renderer.device
    path = _cache_file(ast, device)
    if path.exists():
        saved = json.loads(path.read_text())
        return [Opt(OptOps[op], axis, amount) for op, axis, amount in saved]
    limit = work_group_limit(renderer)
    timer = _Timer(ast, device)
    beam: list[tuple[float, list[Opt], UOp]] = [(timer.time([]), [], ast)]
    best_time, best_plan = beam[0][0], beam[0][1]
    while True:
        tried: list[tuple[float, list[Opt], UOp]] = []
        shared = renderer.has_shared  # no GROUP where there is no local memory (Triton)
        todo = [
            (plan, node, opt)
            for _, plan, node in beam
            for opt in candidates(node, limit)
            if shared or opt.op not in (OptOps.GROUP, OptOps.GROUPTOP)
        ]
        bar = _progress(len(todo), f"BEAM {ast.arg if isinstance(ast.arg, str) else ''}")
        for plan, node, opt in todo:
            if bar is not None:
                bar.update(1)
            try:
                new = apply_opts(node, [opt], limit)
            except OptError:
                continue
            if _lanes(new) > MAX_LANES:
                continue
            tried.append((timer.time([*plan, opt]), [*plan, opt], new))
        if bar is not None:
            bar.close()
        tried.sort(key=lambda t: t[0])
        if not tried or tried[0][0] >= best_time:
            break
        best_time, best_plan = tried[0][0], tried[0][1]
        beam = tried[:width]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps([(o.op.name, o.axis, o.amount) for o in best_plan]))
    return best_plan
