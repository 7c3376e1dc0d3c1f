"""graph_rewrite: fixed points, both traversal orders, memoization, deep graphs, loop errors, tracing."""

from __future__ import annotations

import pytest

from zeptograd.dtype import AddrSpace, dtypes
from zeptograd.helpers import Context
from zeptograd.uop import Ops, PatternMatcher, RewriteLoopError, UOp, UPat, graph_rewrite, track_rewrites
from zeptograd.uop import rewrite as rewrite_module
from zeptograd.uop.symbolic import symbolic

x = UOp.variable("x", 0, 9)


def test_rewrites_to_a_fixed_point():
    # each rule application removes one +1; the pass keeps going until none is left
    pm = PatternMatcher([(UPat.var("a") + 1, lambda a: a, "a+1 -> a")])
    e = x + 1 + 1 + 1
    assert graph_rewrite(e, pm) is x
    # a rule's result is rewritten again: (x*2)*2 -> x*2 -> x
    halve = PatternMatcher([(UPat.var("a") * 2, lambda a: a, "a*2 -> a")])
    assert graph_rewrite(UOp(Ops.MUL, dtypes.index, (x * 2, UOp.const(dtypes.index, 2))), halve) is x


def test_children_first_and_top_down_orders():
    order_children: list[Ops] = []
    order_top: list[Ops] = []

    def record(into):
        return lambda a: into.append(a.op)

    pm_c = PatternMatcher([(UPat((Ops.ADD, Ops.MUL), name="a"), record(order_children))])
    pm_t = PatternMatcher([(UPat((Ops.ADD, Ops.MUL), name="a"), record(order_top))])
    e = (x * 2) + 1
    graph_rewrite(e, pm_c)
    graph_rewrite(e, pm_t, bottom_up=True)
    assert order_children == [Ops.MUL, Ops.ADD]
    assert order_top == [Ops.ADD, Ops.MUL]


def test_top_down_sees_the_node_before_its_sources():
    # top-down, the whole pattern (x*2)+1 is seen before its MUL is rewritten away
    pm = PatternMatcher(
        [
            (UPat.var("a") * 2 + 1, lambda a: a, "a*2+1 -> a"),
            (UPat.var("a") * 2, lambda a: a + a, "a*2 -> a+a"),
        ]
    )
    assert graph_rewrite(x * 2 + 1, pm, bottom_up=True) is x
    assert graph_rewrite(x * 2 + 1, pm) is (x + x) + 1


def test_memoized_shared_subgraphs_rewrite_once():
    calls = []
    pm = PatternMatcher([(UPat(Ops.MUL, name="m"), lambda m: calls.append(m) or None)])
    shared = x * 3
    e = UOp(Ops.SINK, dtypes.void, tuple(shared + i for i in range(50)))
    graph_rewrite(e, pm)
    assert calls == [shared]


def test_ctx_reaches_rules():
    pm = PatternMatcher([(UPat(Ops.DEFINE_VAR, name="v"), lambda ctx, v: ctx[v.arg[0]])])
    e = x + UOp.variable("y", 0, 9)
    out = graph_rewrite(e, pm, ctx={"x": UOp.const(dtypes.index, 2), "y": UOp.const(dtypes.index, 5)})
    assert out is UOp.const(dtypes.index, 2) + UOp.const(dtypes.index, 5)


def test_deep_graph_has_no_recursion_limit():
    node = x
    for _ in range(50_000):
        node = node + 0
    assert graph_rewrite(node, symbolic) is x


def test_rule_returning_a_non_uop_is_a_clear_error():
    pm = PatternMatcher([(UPat(Ops.ADD), lambda: 3, "bad rule")])
    with pytest.raises(TypeError, match="rule bad rule returned int"):
        graph_rewrite(x + 1, pm, name="mypass")


def test_bad_arguments():
    with pytest.raises(TypeError, match="takes a UOp"):
        graph_rewrite(3, symbolic)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="takes a PatternMatcher"):
        graph_rewrite(x, [])  # type: ignore[arg-type]


def store_target_ping_pong() -> tuple[PatternMatcher, UOp]:
    """A classic loop: one rule rewrites STORE(target, value) to store into a wrapped target, the other
    unwraps the target; each produces the other's input."""
    target = UOp(Ops.DEFINE_REG, dtypes.float32.ptr(1, AddrSpace.REG), (), 0)
    value = UOp.const(dtypes.float32, 1.0)
    pm = PatternMatcher(
        [
            (
                UPat(Ops.STORE, src=(UPat(Ops.DEFINE_REG, name="t"), UPat.var("v")), name="st"),
                lambda st, t, v: st.replace(src=(t.after(), v)),
                "store_into_after",
            ),
            (UPat(Ops.AFTER, src=(UPat(Ops.DEFINE_REG, name="t"),)), lambda t: t, "after_of_reg_is_reg"),
        ]
    )
    return pm, target.store(value)


@pytest.mark.no_spec  # builds illegal nodes to check the spec's errors
def test_seed_001_store_rewrite_loop_is_reported_with_both_rules():
    pm, store = store_target_ping_pong()
    with pytest.raises(RewriteLoopError) as info:
        graph_rewrite(store, pm, name="fix_kernel_ast")
    message = str(info.value)
    assert "pass 'fix_kernel_ast'" in message
    assert "store_into_after" in message and "after_of_reg_is_reg" in message
    assert "cycle" in message and "rules that fired most" in message
    assert "STORE" in message  # the steps show the nodes


def test_growing_rewrite_runs_out_of_budget():
    # c -> c+1 never repeats a node and no node waits on itself, so only the budget stops it
    count_up = PatternMatcher([(UPat.cvar("c", dtypes.index), lambda c: c.const_like(c.arg + 1), "count_up")])
    with pytest.raises(RewriteLoopError) as info:
        graph_rewrite(x + 1, count_up, name="growing", budget=500)
    message = str(info.value)
    assert "budget of 500" in message and "pass 'growing'" in message and "count_up (x500)" in message
    assert "the same 1 rule(s) keep firing in turn: count_up" in message


def test_budget_report_names_the_rules_that_alternate():
    # two rules that grow a constant in turn (never a repeated node): the report shows the pair
    pm = PatternMatcher(
        [
            (UPat.cvar("c", dtypes.index), lambda c: c.const_like(c.arg + 1) if c.arg % 2 else None, "odd_up"),
            (UPat.cvar("c", dtypes.index), lambda c: c.const_like(c.arg + 3) if c.arg % 2 == 0 else None, "even_up"),
        ]
    )
    with pytest.raises(RewriteLoopError, match=r"keep firing in turn: (odd_up -> even_up|even_up -> odd_up)"):
        graph_rewrite(x + 1, pm, name="alternating", budget=100)


def test_rule_whose_result_needs_the_node_itself_is_a_cycle():
    # x -> -x: the new node's source is x, which is still being rewritten
    wrap = PatternMatcher([(UPat(Ops.DEFINE_VAR, name="v"), lambda v: UOp(Ops.NEG, v.dtype, (v,)), "wrap_var")])
    with pytest.raises(RewriteLoopError, match="wrap_var"):
        graph_rewrite(x, wrap, name="wrapping")


def test_two_rule_cycle_between_nodes():
    pm = PatternMatcher(
        [
            (UPat.var("a") * 2, lambda a: a + a, "a*2 -> a+a"),
            (UPat.var("a") + UPat.var("a"), lambda a: a * 2, "a+a -> a*2"),
        ]
    )
    with pytest.raises(RewriteLoopError, match=r"a\*2 -> a\+a") as info:
        graph_rewrite(x * 2, pm, name="pingpong")
    assert "a+a -> a*2" in str(info.value)


def test_track_rewrites_records_every_rule_application():
    with track_rewrites() as events:
        out = graph_rewrite((x + 0) * 1, symbolic, name="traced")
    assert out is x
    assert [e.rule for e in events] == ["x+0 -> x", "<sources rewritten>", "x*1 -> x"]
    assert all(e.pass_name == "traced" for e in events)
    assert events[0].before is x + 0 and events[0].after is x
    assert events[-1].after is x


def test_track_rewrites_env_flag_fills_the_log():
    rewrite_module.rewrite_log.clear()
    with Context(TRACK_REWRITES=1):
        graph_rewrite(x * 1, symbolic, name="logged")
    assert [(e.pass_name, e.rule) for e in rewrite_module.rewrite_log] == [("logged", "x*1 -> x")]
    rewrite_module.rewrite_log.clear()
    graph_rewrite(x * 1, symbolic, name="not logged")
    assert rewrite_module.rewrite_log == []
