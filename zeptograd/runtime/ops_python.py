"""The PYTHON device: executes a linear program op by op. It is the reference semantics of the IR: what
each op means here (through `exec_alu` for the ALU) is what every compiled backend must agree with.

It is slow (a Python step per op per loop iteration): use it on small tensors, to check a backend, or to
step through what a kernel does.

It also runs programs made for a GPU-style device (`launch`): each work-group's work-items step through the program
together, one after another up to the next BARRIER or WMMA, where they meet. Local memory (DEFINE_LOCAL) is one
per work-group, and a WMMA is executed for each warp (the work-items `threads` apart in the group's flat order,
x fastest) by its definition (codegen/tensor_cores.py). That is how the tensor-core layouts are tested without a
GPU.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Sequence
from typing import Any

from zeptograd.codegen import ProgramSpec
from zeptograd.codegen.gpudims import launch_sizes
from zeptograd.dtype import DType, PtrDType, dtypes, truncate
from zeptograd.runtime.buffer import Buffer
from zeptograd.uop.alu import exec_alu
from zeptograd.uop.ops import GroupOp, Ops, UOp


def cast_value(value: Any, dt: DType) -> Any:
    """`value` converted to `dt` as C converts it (a float to an int truncates toward zero)."""
    if dt is dtypes.bool:
        return bool(value)
    if dtypes.is_float(dt):
        return truncate(float(value), dt)
    if isinstance(value, float):
        if not math.isfinite(value):
            return 0  # undefined in C; any value will do, and 0 is what the folding rules assume nothing of
        value = math.trunc(value)
    return truncate(int(value), dt)


def bitcast_value(value: Any, src: DType, dst: DType) -> Any:
    if src.fmt is None or dst.fmt is None:
        raise NotImplementedError(f"bitcast from {src!r} to {dst!r} on the PYTHON device")
    return struct.unpack(dst.fmt, struct.pack(src.fmt, value))[0]


def _scalar_op(u: UOp, operands: list[Any]) -> Any:
    if u.op is Ops.CAST:
        return cast_value(operands[0], u.dtype.scalar())
    if u.op is Ops.BITCAST:
        return bitcast_value(operands[0], u.src[0].dtype.scalar(), u.dtype.scalar())
    ret = exec_alu(u.op, u.dtype.scalar(), operands)
    return 0 if ret is None else ret  # undefined in C (x // 0): any value will do


def _lanewise(u: UOp, operands: list[Any]) -> Any:
    """An ALU op, CAST or BITCAST: on scalars, or lane by lane on vectors (tuples)."""
    count = u.dtype.count
    if count == 1:
        return _scalar_op(u, operands)
    lanes = [x if isinstance(x, tuple) else (x,) * count for x in operands]
    return tuple(_scalar_op(u, [x[k] for x in lanes]) for k in range(count))


def _lanes_of_memory(dt: DType, index: UOp) -> int:
    """How many consecutive elements a LOAD or STORE of `dt` through `index` touches (a vector access through a
    pointer to scalars touches one per lane; through a pointer to vectors, one vector)."""
    ptr = index.src[0].dtype
    return dt.count if isinstance(ptr, PtrDType) and ptr.base.count == 1 else 1


def _check_span(mem: Any, i: int, count: int) -> Any:
    # numpy would wrap a negative index: the reference device checks every access instead
    if not (i >= 0 and i + count <= len(mem)):
        what = f"element {i}" if count == 1 else f"elements {i}..{i + count - 1}"
        raise IndexError(f"kernel accesses {what} of a buffer of {len(mem)}")
    return mem[i : i + count]


class PythonProgram:
    """A linear program, ready to run on buffers held in numpy arrays."""

    def __init__(self, uops: Sequence[UOp]):
        self.uops = list(uops)
        self.pos = {u: i for i, u in enumerate(self.uops)}
        # the variables' values come after the buffers, in this order (runtime.buffer.VariableValue)
        self.variables = [u for u in self.uops if u.op is Ops.DEFINE_VAR]
        # where each block's closer is, to jump over a loop that runs zero times or a false IF
        self.jump: dict[UOp, int] = {}
        # the loops each END closes, innermost first
        self.closes: dict[UOp, list[UOp]] = {}
        for i, u in enumerate(self.uops):
            if u.op is Ops.END:
                for r in u.src[1:]:
                    self.jump[r] = i
                self.closes[u] = sorted(u.src[1:], key=self.pos.__getitem__, reverse=True)
            elif u.op is Ops.ENDIF:
                self.jump[u.src[0]] = i

    def __call__(self, bufs: Sequence[Buffer]) -> None:
        if any(u.op is Ops.SPECIAL and u.arg[:4] in ("gidx", "lidx") for u in self.uops):
            self.launch(bufs)
            return
        # a kernel split into chunks (for the cores) runs them one after another here
        chunks = next((u.src[0].arg for u in self.uops if u.op is Ops.SPECIAL), 1)
        for chunk in range(chunks):
            for _ in self.run(bufs, chunk):
                raise RuntimeError("a BARRIER or WMMA in a program launched without work-groups")

    def launch(self, bufs: Sequence[Buffer]) -> None:
        """Run a GPU-style program: every work-group, its work-items in step (see the module docstring)."""
        global_size, local_size = launch_sizes(self.uops)
        groups = [g // n for g, n in zip(global_size, local_size)]
        for gz in range(groups[2]):
            for gy in range(groups[1]):
                for gx in range(groups[0]):
                    shared: dict[UOp, list[Any]] = {}
                    items = [
                        self.run(
                            bufs,
                            ids={"gidx0": gx, "gidx1": gy, "gidx2": gz, "lidx0": x, "lidx1": y, "lidx2": z},
                            shared=shared,
                        )
                        for z in range(local_size[2])
                        for y in range(local_size[1])
                        for x in range(local_size[0])
                    ]
                    self._in_step(items)

    @staticmethod
    def _in_step(items: list[Any]) -> None:
        """Step the work-items of one group (generators from `run`) from one meeting point to the next."""
        replies: list[Any] = [None] * len(items)
        while True:
            requests = []
            for item, reply in zip(items, replies):
                try:
                    requests.append(item.send(reply))
                except StopIteration:
                    requests.append(StopIteration)
            if all(r is StopIteration for r in requests):
                return
            first = requests[0]
            if any(r is StopIteration or r[0] is not first[0] for r in requests):
                raise RuntimeError(
                    "the work-items of a group met at different points (a BARRIER or WMMA not all reach)"
                )
            wmma = first[0]
            if wmma.op is Ops.BARRIER:
                replies = [None] * len(items)
                continue
            tc, replies = wmma.arg, []
            if len(items) % tc.threads:
                raise RuntimeError(f"a WMMA needs whole warps of {tc.threads}; the group has {len(items)} work-items")
            for start in range(0, len(items), tc.threads):
                warp = requests[start : start + tc.threads]
                replies.extend(tc.execute([r[1] for r in warp], [r[2] for r in warp], [r[3] for r in warp]))

    def run(
        self,
        bufs: Sequence[Buffer],
        chunk: int = 0,
        ids: dict[str, int] | None = None,
        shared: dict[UOp, list[Any]] | None = None,
    ) -> Any:
        """One call of the kernel: chunk `chunk` of a kernel split for the cores, or the work-item with launch
        indices `ids`. A generator: it stops at each BARRIER (yielding it) and WMMA (yielding it with the operands,
        and taking the result back), where the work-items of a group meet."""
        n_vars = len(self.variables)
        arrays = [b.array() for b in (bufs[: len(bufs) - n_vars] if n_vars else bufs)]
        tail: Sequence[Any] = bufs[len(bufs) - n_vars :] if n_vars else ()
        var_values = {v: b.value for v, b in zip(self.variables, tail)}
        values: dict[UOp, Any] = {}
        regs: dict[UOp, list[Any]] = {}
        pc = 0
        uops = self.uops
        while pc < len(uops):
            u = uops[pc]
            op = u.op
            if op is Ops.RANGE:
                end = values[u.src[0]]
                if end <= 0:
                    # a loop that runs zero times: skip past its END (an END that closes several loops closes
                    # them around one innermost body, so nothing of an enclosing loop is left to run either)
                    pc = self.jump[u] + 1
                    continue
                values[u] = 0
            elif op is Ops.END:
                back = self._end(u, values)
                if back is not None:
                    pc = back
                    continue
            elif op is Ops.IF:
                if not values[u.src[0]]:
                    pc = self.jump[u] + 1
                    continue
            elif op in (Ops.ENDIF, Ops.SINK, Ops.GROUP):
                pass
            elif op is Ops.DEFINE_GLOBAL:
                values[u] = arrays[u.arg]
            elif op is Ops.DEFINE_REG:
                assert isinstance(u.dtype, PtrDType)
                regs[u] = [None] * u.dtype.size
                values[u] = regs[u]
            elif op is Ops.DEFINE_VAR:
                values[u] = var_values[u]
            elif op is Ops.CONST:
                values[u] = u.arg if u.dtype.count == 1 else (u.arg,) * u.dtype.count
            elif op is Ops.SPECIAL:
                values[u] = ids[u.arg] if ids is not None and u.arg in ids else chunk
            elif op is Ops.DEFINE_LOCAL:
                assert isinstance(u.dtype, PtrDType) and shared is not None
                values[u] = shared.setdefault(u, [0] * u.dtype.size)
            elif op is Ops.BARRIER:
                yield (u,)
            elif op is Ops.WMMA:
                values[u] = yield (u, *(values[s] for s in u.src))
            elif op is Ops.VECTORIZE:
                values[u] = tuple(values[s] for s in u.src)
            elif op is Ops.GEP:
                vec = values[u.src[0]]
                values[u] = vec[u.arg[0]] if len(u.arg) == 1 else tuple(vec[i] for i in u.arg)
            elif op is Ops.AFTER:
                values[u] = values[u.src[0]]
            elif op is Ops.INDEX:
                gate = values[u.src[2]] if len(u.src) == 3 else True
                # an address is only checked when it is read or written (inside an IF it may be out of range)
                values[u] = (values[u.src[0]], values[u.src[1]], gate)
            elif op is Ops.LOAD:
                mem, i, gate = values[u.src[0]]
                if isinstance(gate, tuple):  # a gate per lane: only the lanes it lets through are read
                    alt = values[u.src[1]]
                    lanes = [_check_span(mem, i + k, 1)[0] if g else alt[k] for k, g in enumerate(gate)]
                    values[u] = tuple(x.item() if hasattr(x, "item") else x for x in lanes)
                elif not gate:
                    values[u] = values[u.src[1]]
                elif _lanes_of_memory(u.dtype, u.src[0]) > 1:
                    values[u] = tuple(_check_span(mem, i, u.dtype.count).tolist())
                else:
                    x = _check_span(mem, i, 1)[0]
                    values[u] = x.item() if hasattr(x, "item") else x
            elif op is Ops.STORE:
                mem, i, gate = values[u.src[0]]
                if not gate:
                    raise RuntimeError("a gated STORE reached the PYTHON device: it must be lowered to IF/ENDIF")
                if _lanes_of_memory(u.src[1].dtype, u.src[0]) > 1:
                    _check_span(mem, i, u.src[1].dtype.count)
                    mem[i : i + u.src[1].dtype.count] = values[u.src[1]]
                else:
                    _check_span(mem, i, 1)
                    mem[i] = values[u.src[1]]
            elif op in (Ops.CAST, Ops.BITCAST) or op in GroupOp.ALU:
                values[u] = _lanewise(u, [values[s] for s in u.src])
            else:
                raise NotImplementedError(f"the PYTHON device cannot execute {op.name}")
            pc += 1

    def _end(self, end: UOp, values: dict[UOp, Any]) -> int | None:
        # count up the innermost loop this END closes; when it is done, the next one out
        for r in self.closes[end]:
            values[r] += 1
            if values[r] < values[r.src[0]]:
                return self.pos[r] + 1
        return None


class PythonDevice:
    """Interprets linear programs; the reference for every other device."""

    name = "PYTHON"
    variables = True  # kernels take symbolic variables' values as arguments

    def __init__(self) -> None:
        from zeptograd.renderer.listing import ListingRenderer

        self.renderer = ListingRenderer()

    def runner(self, program: ProgramSpec) -> Callable[[Sequence[Buffer]], None]:
        return PythonProgram(program.uops)
