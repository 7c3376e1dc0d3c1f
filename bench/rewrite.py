"""Rewrite-engine throughput, to compare changes against (a benchmark, not a test).

    python bench/rewrite.py

1. graph_rewrite with the symbolic rules over one graph of ~100k nodes: a sink over many index
   expressions that share variables (the shape of a kernel's index math), reported in input nodes per second.
2. simplify() on 10k random index expressions, one call each, in nodes per second and expressions per second.
"""

from __future__ import annotations

import random
import statistics
import time

from zeptograd.dtype import dtypes
from zeptograd.uop import Ops, UOp, graph_rewrite
from zeptograd.uop.symbolic import symbolic


def big_graph(target_nodes: int = 100_000) -> UOp:
    """Index expressions `((g*S + r)*k + c) // k % S` etc. over shared loop variables, until the graph has
    `target_nodes` nodes."""
    rs = [UOp.range(64, axis) for axis in range(4)]
    n = UOp.variable("n", 1, 1024)
    exprs: list[UOp] = []
    i = 0
    while i % 500 != 0 or len(UOp(Ops.SINK, dtypes.void, tuple(exprs)).toposort()) < target_nodes:
        r0, r1 = rs[i % 4], rs[(i + 1) % 4]
        flat = (r0 * 64 + r1) * (i + 2) + i
        e = ((flat // (i + 2)) % 4096 + n * i) // 1 * 1 + 0
        gate = (e < 4096 + n * i) & (r1 * 3 + i >= 0)
        exprs.append(gate.where(e, e.const_like(0)))
        i += 1
    return UOp(Ops.SINK, dtypes.void, tuple(exprs))


def random_index_expr(rng: random.Random, variables: list[UOp], depth: int) -> UOp:
    if depth == 0 or rng.random() < 0.2:
        return rng.choice(variables) if rng.random() < 0.7 else UOp.const(dtypes.index, rng.randint(-8, 64))
    a = random_index_expr(rng, variables, depth - 1)
    kind = rng.randrange(6)
    if kind == 0:
        return a + random_index_expr(rng, variables, depth - 1)
    if kind == 1:
        return a * rng.randint(-4, 8)
    if kind == 2:
        return a // rng.randint(1, 16)
    if kind == 3:
        return a % rng.randint(1, 16)
    if kind == 4:
        return a.maximum(random_index_expr(rng, variables, depth - 1))
    return (a < rng.randint(0, 64)).where(a, random_index_expr(rng, variables, depth - 1))


def main() -> None:
    t0 = time.perf_counter()
    root = big_graph()
    nodes = len(root.toposort())
    build = time.perf_counter() - t0
    t0 = time.perf_counter()
    out = graph_rewrite(root, symbolic, name="bench")
    elapsed = time.perf_counter() - t0
    print(f"graph_rewrite(symbolic) on {nodes} nodes: {elapsed:.2f} s, {nodes / elapsed:,.0f} nodes/s")
    print(f"  (built in {build:.2f} s; {len(out.toposort())} nodes after)")

    rng = random.Random(0)
    variables = [UOp.variable(name, 0, hi) for name, hi in (("a", 7), ("b", 63), ("c", 1000))]
    variables += [UOp.range(16, 0), UOp.range(256, 1)]
    exprs = [random_index_expr(rng, variables, 5) for _ in range(10_000)]
    total_nodes = sum(len(e.toposort()) for e in exprs)
    times = []
    t_all = time.perf_counter()
    for e in exprs:
        t0 = time.perf_counter()
        e.simplify()
        times.append(time.perf_counter() - t0)
    elapsed = time.perf_counter() - t_all
    print(
        f"simplify() on 10000 random index expressions ({total_nodes} nodes): {elapsed:.2f} s, "
        f"{total_nodes / elapsed:,.0f} nodes/s, {len(exprs) / elapsed:,.0f} expressions/s, "
        f"median {statistics.median(times) * 1e6:.0f} us"
    )


if __name__ == "__main__":
    main()
