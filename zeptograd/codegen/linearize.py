"""Linearize: order a kernel's graph into a program, with loops and conditionals as properly nested blocks.

Each node sits inside the blocks (RANGE loops, IF conditionals) it depends on and no others. The order is
a topological sort with priorities: a node is placed as soon as its block is the innermost open one (so
loop-invariant work is hoisted out of inner loops), a block is closed as soon as its END or ENDIF is
ready, and a new block is opened only when nothing else can be placed.
"""

from __future__ import annotations

from zeptograd.codegen.lowering import live_ranges
from zeptograd.uop.ops import Ops, UOp

_OPENERS = (Ops.RANGE, Ops.IF)
_CLOSERS = (Ops.END, Ops.ENDIF)


class LinearizeError(RuntimeError):
    """The graph's blocks cannot be nested (a compiler bug, never a user error)."""


def _closes(u: UOp) -> tuple[UOp, ...]:
    return u.src[1:] if u.op is Ops.END else (u.src[0],)


def linearize(sink: UOp) -> list[UOp]:
    """The nodes of `sink` in program order (the SINK last)."""
    nodes = sink.toposort()
    position = {u: i for i, u in enumerate(nodes)}
    blocks = live_ranges(sink)
    waiting = {u: len(set(u.src)) for u in nodes}
    users: dict[UOp, list[UOp]] = {u: [] for u in nodes}
    for u in nodes:
        for s in set(u.src):
            users[s].append(u)
    ready = {u for u in nodes if waiting[u] == 0}
    stack: list[UOp] = []
    program: list[UOp] = []

    # a loop whose END needs another loop's result, and does not contain that loop, runs after it: open
    # it only once the other loop is done (a reduction that no output index depends on runs first)
    closer = {r: u for u in nodes if u.op is Ops.END for r in u.src[1:]}
    before: dict[UOp, set[UOp]] = {}
    for r, end in closer.items():
        ends_below = {n for n in end.toposort() if n.op is Ops.END and n is not end}
        before[r] = {q for e in ends_below for q in e.src[1:] if r not in blocks[e.src[0]]}
    opened: set[UOp] = set()
    # a loop opens only inside the loops its END lives in: a loop whose body needs an outer loop's index is
    # never opened before that loop is (its body could not be placed)
    outer = {r: {q for q in blocks[end] if q.op is Ops.RANGE} for r, end in closer.items()}

    def must_wait(u: UOp) -> bool:
        return u.op is Ops.RANGE and any(q not in opened for q in before.get(u, ()))

    def placeable(u: UOp) -> bool:
        if u.op is Ops.RANGE:
            return outer.get(u, set()) <= set(stack)
        inside = blocks[u] - {u} if u.op is Ops.IF else blocks[u]
        if not inside <= set(stack):
            return False
        return not stack or stack[-1] in inside

    def choose() -> UOp | None:
        body = [u for u in ready if u.op not in _OPENERS and u.op not in _CLOSERS and placeable(u)]
        if body:
            return min(body, key=position.__getitem__)
        for u in ready:
            if u.op in _CLOSERS:
                closes = _closes(u)
                if len(closes) <= len(stack) and set(stack[len(stack) - len(closes) :]) == set(closes):
                    return u
        openers = [u for u in ready if u.op in _OPENERS and placeable(u) and not must_wait(u)]
        if not openers:
            # running a reduction before the loops it does not need is a preference: two reductions that each skip
            # a loop the other needs (one over r0, r1, one over r1..r4) cannot both go first, and one runs inside
            openers = [u for u in ready if u.op in _OPENERS and placeable(u)]
        if openers:
            # a conditional first (its store follows at once), then the outermost loop axis
            return min(openers, key=lambda u: (u.op is Ops.RANGE, u.arg if u.op is Ops.RANGE else 0, position[u]))
        return None

    while ready:
        chosen = choose()
        if chosen is None:
            stuck = ", ".join(f"{n.op.name}" for n in sorted(ready, key=position.__getitem__))
            raise LinearizeError(f"cannot place any of the ready nodes [{stuck}] inside open blocks {stack}")
        u = chosen
        ready.discard(u)
        program.append(u)
        if u.op in _OPENERS:
            stack.append(u)
            opened.add(u)
        elif u.op in _CLOSERS:
            del stack[len(stack) - len(_closes(u)) :]
        for user in users[u]:
            waiting[user] -= 1
            if waiting[user] == 0:
                ready.add(user)
    if len(program) != len(nodes):
        raise LinearizeError(f"placed {len(program)} of {len(nodes)} nodes")
    return program
