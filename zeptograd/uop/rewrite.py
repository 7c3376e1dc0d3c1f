"""`graph_rewrite`: the one engine that applies a PatternMatcher to a graph until nothing changes.

It is iterative (no recursion limit on deep graphs) and memoized (a shared subgraph is rewritten once).
Termination is engineered: a rule result that the pass is still working out (a node waiting on itself)
is a cycle, and every pass has a budget of rule applications. Both raise `RewriteLoopError`, which names
the pass, prints the cycle as (rule: before -> after) steps and lists the rules that fired most.

>>> from zeptograd.uop.symbolic import symbolic
>>> x = UOp.variable("x", 0, 9)
>>> graph_rewrite((x + 0) * 1, symbolic, name="demo") is x
True
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from zeptograd.helpers import TRACK_REWRITES
from zeptograd.uop.ops import UOp
from zeptograd.uop.pattern import PatternMatcher
from zeptograd.uop.render import render_expr

REBUILT = "<sources rewritten>"
"""The rule name recorded when a node is rebuilt because its sources were rewritten."""

BUDGET_PER_NODE = 64
BUDGET_BASE = 10_000


class RewriteLoopError(RuntimeError):
    """A rewrite pass that would not terminate: a cycle between rules, or a budget run out."""


@dataclass(frozen=True)
class RewriteEvent:
    """One rule application: in pass `pass_name`, rule `rule` rewrote `before` into `after`."""

    pass_name: str
    rule: str
    before: UOp
    after: UOp


_trackers: list[list[RewriteEvent]] = []
rewrite_log: list[RewriteEvent] = []
"""Every rule application of every pass while TRACK_REWRITES=1 (for debugging and the viewer)."""


@contextlib.contextmanager
def track_rewrites() -> Iterator[list[RewriteEvent]]:
    """Record every rule application made inside the block.

    >>> from zeptograd.uop.symbolic import symbolic
    >>> with track_rewrites() as events:
    ...     _ = graph_rewrite(UOp.variable("x", 0, 9) * 1, symbolic, name="demo")
    >>> [e.rule for e in events]
    ['x*1 -> x']
    """
    events: list[RewriteEvent] = []
    _trackers.append(events)
    try:
        yield events
    finally:
        _trackers.remove(events)


def _one_line(u: UOp) -> str:
    text = render_expr(u, limit=200)
    return text if len(text) <= 100 else text[:97] + "..."


def _repeating_rules(events: list[tuple[str, UOp, UOp]]) -> list[str] | None:
    """The shortest sequence of rule names that the last events repeat three times over, if any."""
    names = [rule for rule, _, _ in events[-300:] if rule != REBUILT]
    for period in range(1, min(len(names) // 3, 50) + 1):
        tail = names[-period:]
        if names[-2 * period : -period] == tail and names[-3 * period : -2 * period] == tail:
            return tail
    return None


class _Pass:
    """The state of one graph_rewrite call."""

    def __init__(self, pm: PatternMatcher, ctx: Any, name: str, budget: int):
        self.pm, self.ctx, self.name, self.budget = pm, ctx, name, budget
        self.events: list[tuple[str, UOp, UOp]] = []
        self.fired: Counter[str] = Counter()
        self.applied = 0
        self.tracking = bool(TRACK_REWRITES) or bool(_trackers)

    def record(self, rule: str, before: UOp, after: UOp) -> None:
        self.events.append((rule, before, after))
        if rule != REBUILT:
            self.fired[rule] += 1
        if self.tracking:
            event = RewriteEvent(self.name, rule, before, after)
            for tracker in _trackers:
                tracker.append(event)
            if TRACK_REWRITES:
                rewrite_log.append(event)

    def apply(self, node: UOp) -> UOp | None:
        """One rule application to `node`, or None when no rule applies."""
        ret, rule = self.pm.rewrite_with_rule(node, self.ctx)
        if rule is None:
            return None
        if not isinstance(ret, UOp):
            raise TypeError(f"pass {self.name!r}: rule {rule.name} returned {type(ret).__name__}, not a UOp or None")
        if ret is node:
            return None  # a rule that returns its input changed nothing
        if self.applied == self.budget:
            raise RewriteLoopError(self.report(f"the budget of {self.budget} rule applications ran out", None))
        self.applied += 1
        self.record(rule.name, node, ret)
        return ret

    def report(self, what: str, repeated: UOp | None) -> str:
        lines = [f"rewrite loop in pass {self.name!r}: {what}"]
        steps = self.events
        if repeated is not None:
            first = next(
                (i for i, (_, before, after) in enumerate(steps) if before is repeated or after is repeated), 0
            )
            steps = steps[first:]
            lines.append(f"the node {_one_line(repeated)} came back while it was being rewritten; the cycle:")
        else:
            steps = steps[-12:]
            if (period := _repeating_rules(self.events)) is not None:
                lines.append(f"the same {len(period)} rule(s) keep firing in turn: {' -> '.join(period)}")
            lines.append("the last rule applications:")
        for i, (rule, before, after) in enumerate(steps[-24:], 1):
            lines.append(f"  {i}. {rule}: {_one_line(before)}  ->  {_one_line(after)}")
        lines.append("rules that fired most: " + ", ".join(f"{r} (x{n})" for r, n in self.fired.most_common(5)))
        return "\n".join(lines)


def graph_rewrite(
    root: UOp,
    pm: PatternMatcher,
    ctx: Any = None,
    bottom_up: bool = False,
    name: str | None = None,
    budget: int | None = None,
    memo: dict[UOp, UOp] | None = None,
) -> UOp:
    """Rewrite `root` with the rules of `pm` until no rule applies anywhere (a fixed point).

    By default a node's sources are rewritten before the node (children first); with `bottom_up=True`
    the rules are tried on a node before its sources are entered (top-down, as tinygrad names it).
    `ctx` is passed to every rule function that takes a `ctx` argument. `budget` caps the number of rule
    applications (default: 10000 + 64 per node of the input graph). `memo`, when given, is filled with every node
    the rewrite entered (each node of `root`'s graph among them) and what it became.
    """
    if not isinstance(root, UOp):
        raise TypeError(f"graph_rewrite takes a UOp, got {type(root).__name__}")
    if not isinstance(pm, PatternMatcher):
        raise TypeError(f"graph_rewrite takes a PatternMatcher, got {type(pm).__name__}")
    if budget is None:
        budget = BUDGET_BASE + BUDGET_PER_NODE * len(root.toposort())
    state = _Pass(pm, ctx, name or "graph_rewrite", budget)
    done: dict[UOp, UOp] = {} if memo is None else memo
    in_progress: set[UOp] = set()
    # stack entries: (node, stage, result); stage 0 enters a node, 1 rebuilds it from its rewritten
    # sources and applies the rules, 2 takes the result of the node it was rewritten into
    stack: list[tuple[UOp, int, UOp | None]] = [(root, 0, None)]
    while stack:
        node, stage, result = stack.pop()
        if stage == 0:
            if node in done:
                continue
            if node in in_progress:
                raise RewriteLoopError(state.report("a rule produced a node that depends on itself", node))
            in_progress.add(node)
            if bottom_up and (rewritten := state.apply(node)) is not None:
                stack.append((node, 2, rewritten))
                stack.append((rewritten, 0, None))
                continue
            stack.append((node, 1, None))
            stack.extend((s, 0, None) for s in reversed(node.src) if s not in done)
        elif stage == 1:
            new_src = tuple(done[s] for s in node.src)
            new = node
            if any(a is not b for a, b in zip(new_src, node.src)):
                new = node.replace(src=new_src)
                state.record(REBUILT, node, new)
            if new is not node:
                # a new node: enter it like any other (rules, in either mode, see it fresh)
                stack.append((node, 2, new))
                stack.append((new, 0, None))
                continue
            if not bottom_up and (rewritten := state.apply(node)) is not None:
                stack.append((node, 2, rewritten))
                stack.append((rewritten, 0, None))
                continue
            done[node] = node
        else:
            assert result is not None
            done[node] = done[result]
    return done[root]
