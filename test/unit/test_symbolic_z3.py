"""z3 proofs of the symbolic rules: random index expressions are proven equal to their simplified form
and inside their [vmin, vmax] for EVERY binding in the variables' ranges (not only the sampled ones), and
the floor division and modulo laws the rules rely on are proven as theorems over symbolic constants.

z3's integer `/` and `%` are Euclidean (the remainder is never negative), so floor division is written
out: for b > 0 it is `a / b`, for b < 0 it is `(-a) / (-b)`. A query z3 answers `unknown` (timeout,
nonlinear arithmetic) skips its sample; it is neither a pass nor a failure.
"""

from __future__ import annotations

import importlib
import math
import random
import sys
from pathlib import Path
from typing import Any

import pytest

from zeptograd.dtype import dtypes
from zeptograd.uop.ops import Ops, UOp

z3 = pytest.importorskip("z3")

# the random trees and the reference evaluator of the property tests (a counterexample z3 finds is replayed
# on the evaluator, so a slip in the z3 translation cannot pass for a bug of zeptograd)
sys.path.insert(0, str(Path(__file__).resolve().parent))
prop = importlib.import_module("test_symbolic_property")

TIMEOUT_MS = 5000


class Unsupported(Exception):
    """A node the z3 translation does not cover (the tree is skipped)."""


def floor_div(a: Any, b: Any) -> Any:
    return z3.If(b > 0, a / b, (-a) / (-b))


def floor_mod(a: Any, b: Any) -> Any:
    return a - b * floor_div(a, b)


def var_name(v: UOp) -> str:
    return v.arg[0] if v.op is Ops.DEFINE_VAR else f"r{v.arg}"


def translate(root: UOp) -> tuple[dict[UOp, Any], list[Any]]:
    """Every node of `root`'s graph as a z3 term (Int, or Bool for bool nodes), and the divisors of its
    IDIV and MOD nodes (the graph is defined where none of them is zero)."""
    terms: dict[UOp, Any] = {}
    divisors: list[Any] = []
    for n in root.toposort():
        op, is_bool = n.op, n.dtype is dtypes.bool
        if n.dtype not in (dtypes.index, dtypes.bool):
            raise Unsupported(f"dtype {n.dtype!r}")
        s = [terms[x] for x in n.src]
        if op is Ops.CONST:
            t = z3.BoolVal(n.arg) if is_bool else z3.IntVal(n.arg)
        elif op in (Ops.DEFINE_VAR, Ops.RANGE):
            t = z3.Int(var_name(n))
        elif op is Ops.ADD:
            t = s[0] + s[1]
        elif op is Ops.SUB:
            t = s[0] - s[1]
        elif op is Ops.MUL:
            t = s[0] * s[1]
        elif op is Ops.NEG:
            t = z3.Not(s[0]) if is_bool else -s[0]
        elif op in (Ops.IDIV, Ops.MOD):
            divisors.append(s[1])
            t = floor_div(s[0], s[1]) if op is Ops.IDIV else floor_mod(s[0], s[1])
        elif op is Ops.MAX:
            t = z3.Or(s[0], s[1]) if is_bool else z3.If(s[0] >= s[1], s[0], s[1])
        elif op is Ops.CMPLT:
            t = z3.And(z3.Not(s[0]), s[1]) if n.src[0].dtype is dtypes.bool else s[0] < s[1]
        elif op is Ops.CMPNE:
            t = s[0] != s[1]
        elif op is Ops.CMPEQ:
            t = s[0] == s[1]
        elif op in (Ops.AND, Ops.OR, Ops.XOR) and is_bool:
            t = {Ops.AND: z3.And, Ops.OR: z3.Or, Ops.XOR: z3.Xor}[op](s[0], s[1])
        elif op in (Ops.SHL, Ops.SHR) and n.src[1].op is Ops.CONST and 0 <= n.src[1].arg < 64:
            t = s[0] * (2 ** n.src[1].arg) if op is Ops.SHL else floor_div(s[0], z3.IntVal(2 ** n.src[1].arg))
        elif op is Ops.WHERE:
            t = z3.If(s[0], s[1], s[2])
        elif op is Ops.CAST and is_bool:
            t = s[0] if n.src[0].dtype is dtypes.bool else s[0] != 0
        elif op is Ops.CAST and n.src[0].dtype is dtypes.bool:
            t = z3.If(s[0], z3.IntVal(1), z3.IntVal(0))
        else:
            raise Unsupported(f"{op!r} of {n.dtype!r}")
        terms[n] = t
    return terms, divisors


def var_bounds(root: UOp) -> list[Any]:
    ret = []
    for v in prop.variables(root):
        lo, hi = prop.bounds(v)
        ret += [z3.Int(var_name(v)) >= lo, z3.Int(var_name(v)) <= hi]
    return ret


def as_int(t: Any) -> Any:
    return z3.If(t, z3.IntVal(1), z3.IntVal(0)) if z3.is_bool(t) else t


def in_range(n: UOp, t: Any) -> Any:
    """`n.vmin <= t <= n.vmax` (an infinite bound of an unbounded `index` range is no constraint)."""
    t = as_int(t)
    lo = True if n.vmin == -math.inf else int(n.vmin) <= t
    hi = True if n.vmax == math.inf else t <= int(n.vmax)
    return z3.And(lo, hi)


def prove(hypotheses: list[Any], goal: Any) -> tuple[str, Any]:
    """'proved', 'refuted' (with a model of the counterexample) or 'unknown'."""
    s = z3.Solver()
    s.set("timeout", TIMEOUT_MS)
    s.add(*hypotheses)
    s.add(z3.Not(goal))
    r = s.check()
    if r == z3.unsat:
        return "proved", None
    if r == z3.sat:
        return "refuted", s.model()
    return "unknown", None


def binding_of(model: Any, vs: list[UOp]) -> dict[UOp, int]:
    return {v: model.eval(z3.Int(var_name(v)), model_completion=True).as_long() for v in vs}


def check_tree_z3(tree: UOp) -> tuple[str, list[str]]:
    """('proved' | 'unknown' | 'unsupported', failures) for one tree: before == after, and every node of
    both graphs inside its [vmin, vmax], under the variables' bounds and the original's divisors != 0."""
    head = f"tree {tree}  [{prop.legend(tree)}]"
    simple = tree.simplify()
    try:
        before, before_divisors = translate(tree)
        after, after_divisors = translate(simple)
    except Unsupported:
        return "unsupported", []
    if simple.dtype is not tree.dtype:
        return "proved", [f"{head}: simplify changed the dtype {tree.dtype!r} -> {simple.dtype!r}"]
    hyps = var_bounds(tree) + [d != 0 for d in before_divisors]
    goals = {
        "same value": z3.And(*[d != 0 for d in after_divisors], before[tree] == after[simple]),
        "in range": z3.And(*[in_range(n, t) for terms in (before, after) for n, t in terms.items()]),
    }
    failures: list[str] = []
    status = "proved"
    vs = prop.variables(tree)
    for what, goal in goals.items():
        verdict, model = prove(hyps, goal)
        if verdict == "unknown":
            status = "unknown"
        elif verdict == "refuted":
            env = binding_of(model, vs)
            # replay the counterexample on the reference evaluator
            try:
                got_before = prop.evaluate(tree, env)
                got_after: dict[UOp, Any] | str = prop.evaluate(simple, env)
            except prop.Undefined as e:
                got_before, got_after = {}, f"undefined ({e})"
            if what == "same value":
                shown = got_after if isinstance(got_after, str) else got_after.get(simple)
                failures.append(
                    f"{head}: simplified to {simple}, not equal at {prop._show(env)}: "
                    f"{got_before.get(tree)!r} vs {shown!r}"
                )
            else:
                outside = [
                    f"{n} = {v} outside [{n.vmin}, {n.vmax}]"
                    for vals in (got_before, got_after if isinstance(got_after, dict) else {})
                    for n, v in vals.items()
                    if not n.vmin <= v <= n.vmax
                ]
                failures.append(f"{head}: a node leaves its range at {prop._show(env)}: {outside[:2]}")
    return status, failures


CHUNKS, TREES = 4, 100  # 400 random index trees


def run_z3_trees(seed: int, n_trees: int, **gen_options: bool) -> None:
    rng = random.Random(seed)
    # no integer AND/OR/XOR: they have no plain z3 Int form
    gen = prop.TreeGen(rng, dtypes.index, bitwise=False, **gen_options)
    counts = {"proved": 0, "unknown": 0, "unsupported": 0}
    failures: list[str] = []
    for _ in range(n_trees):
        status, problems = check_tree_z3(gen.tree(max_depth=5))
        counts[status] += 1
        failures += problems
    assert not failures, f"{len(failures)} failure(s), {counts}; the first:\n" + "\n".join(failures[:6])
    # most trees must be decided, or the test proves nothing
    assert counts["proved"] >= 0.8 * n_trees, counts


@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_z3_random_index_trees(chunk: int):
    run_z3_trees(7000 + chunk, TREES)


def test_z3_random_index_trees_beyond_int64():
    """Constants past the int64 range: z3's Ints are unbounded, like `index`."""
    run_z3_trees(7100, 100, huge=True)


def test_z3_random_trees_with_bool_neg():
    """NEG nodes of dtype bool (`not`, as in alu.python_alu)."""
    run_z3_trees(7200, 100, bool_neg=True)


# *** the laws the rules rely on, as theorems ***

a, b, c, g, k, x = z3.Ints("a b c g k x")


def ceil_div(p: Any, q: Any) -> Any:
    return -floor_div(-p, q)


LAWS = {
    "(a*c+b)//c == a + b//c": ([c > 0], floor_div(a * c + b, c) == a + floor_div(b, c)),
    "(a*c+b)//c == a + b//c, c < 0": ([c < 0], floor_div(a * c + b, c) == a + floor_div(b, c)),
    "(a*c+b)%c == b%c": ([c > 0], floor_mod(a * c + b, c) == floor_mod(b, c)),
    "(a*c+b)%c == b%c, c < 0": ([c < 0], floor_mod(a * c + b, c) == floor_mod(b, c)),
    "(a*g)//(c*g) == a//c": ([c > 0, g > 0], floor_div(a * g, c * g) == floor_div(a, c)),
    "(a*g)%(c*g) == (a%c)*g": ([c > 0, g > 0], floor_mod(a * g, c * g) == floor_mod(a, c) * g),
    "(x//a)//b == x//(a*b)": ([a > 0, b > 0], floor_div(floor_div(x, a), b) == floor_div(x, a * b)),
    "(x%(b*k))%b == x%b": ([b > 0, k > 0], floor_mod(floor_mod(x, b * k), b) == floor_mod(x, b)),
    "x*g+k < c <=> x < ceil((c-k)/g)": ([g > 0], (x * g + k < c) == (x < ceil_div(c - k, g))),
    "c < x*g+k <=> (c-k)//g < x": ([g > 0], (c < x * g + k) == (floor_div(c - k, g) < x)),
    "x*g+k != c when g does not divide c-k": ([g > 0, floor_mod(c - k, g) != 0], x * g + k != c),
    "x*g+k == c <=> x == (c-k)//g when g divides c-k": (
        [g > 0, floor_mod(c - k, g) == 0],
        (x * g + k == c) == (x == floor_div(c - k, g)),
    ),
    "(x//c)*c + x%c == x": ([c != 0], floor_div(x, c) * c + floor_mod(x, c) == x),
    "not (x < y) <=> y < x+1": ([], z3.Not(x < a) == (a < x + 1)),
    "0 <= x%c < c for c > 0": ([c > 0], z3.And(0 <= floor_mod(x, c), floor_mod(x, c) < c)),
    "c < x%c <= 0 for c < 0": ([c < 0], z3.And(c < floor_mod(x, c), floor_mod(x, c) <= 0)),
    "x//c is monotone in x for c > 0": ([c > 0, x <= a], floor_div(x, c) <= floor_div(a, c)),
    "x//c < d <=> x < c*d": ([c > 0], (floor_div(x, c) < a) == (x < c * a)),
}


@pytest.mark.parametrize("name", list(LAWS))
def test_z3_divmod_law(name: str):
    hyps, goal = LAWS[name]
    verdict, model = prove(hyps, goal)
    if verdict == "unknown":
        pytest.skip(f"z3 gave up on {name!r} within {TIMEOUT_MS} ms")
    assert verdict == "proved", f"{name} fails at {model}"


def test_z3_mod_then_div_law_for_each_divisor():
    """(x%(d*k))//d == (x//d)%k, the law of the rule `(x%c)//d -> (x//d)%(c//d)`. With d and k symbolic the
    product makes it nonlinear and z3 gives up, so it is proven for every d, k in 1..12 (linear each time)."""
    for dv in range(1, 13):
        for kv in range(1, 13):
            verdict, model = prove([], floor_div(floor_mod(x, dv * kv), dv) == floor_mod(floor_div(x, dv), kv))
            assert verdict == "proved", f"d={dv}, k={kv}: {verdict} at {model}"


@pytest.mark.parametrize(
    "law, hyps, goal",
    [
        ("x//c == (x+c-1)//c", [c > 1], floor_div(x, c) == floor_div(x + c - 1, c)),
        ("(x%c)%c2 == x%c2 for any c", [c > 0, b > 0], floor_mod(floor_mod(x, c), b) == floor_mod(x, b)),
    ],
)
def test_z3_finds_counterexamples_to_false_laws(law: str, hyps: list[Any], goal: Any):
    """The prover is not vacuous: false laws are refuted."""
    verdict, _ = prove(hyps, goal)
    assert verdict == "refuted", f"{law}: {verdict}"


def _mesa_vulkan_loaded() -> bool:
    """Has this process loaded Mesa's Vulkan driver (lavapipe, by a WEBGPU test)? z3 then aborts reading a
    numeral's value (SIGABRT in Z3_get_numeral_string and Z3_get_numeral_int64)."""
    try:
        return "libvulkan_lvp" in Path("/proc/self/maps").read_text()
    except OSError:
        return False


def test_z3_translation_matches_the_evaluator():
    if _mesa_vulkan_loaded():
        pytest.skip("z3 aborts reading numerals in a process that has loaded Mesa's Vulkan driver (lavapipe)")
    """The z3 terms agree with the reference evaluator on random trees and points (the translation is
    checked, so a proof is a proof about the semantics the property tests use)."""
    rng = random.Random(99)
    gen = prop.TreeGen(rng, dtypes.index, bitwise=False)
    done = 0
    for _ in range(60):
        tree = gen.tree(max_depth=4)
        try:
            terms, _ = translate(tree)
        except Unsupported:
            continue
        vs = prop.variables(tree)
        for env in prop.bindings(tree, rng, n_random=3, max_corners=4):
            try:
                want = prop.evaluate(tree, env)[tree]
            except prop.Undefined:
                continue
            sub = [(z3.Int(var_name(v)), z3.IntVal(env[v])) for v in vs]
            got = z3.simplify(z3.substitute(terms[tree], *sub)) if sub else z3.simplify(terms[tree])
            value = z3.is_true(got) if z3.is_bool(got) else got.as_long()
            assert value == want, f"{tree} at {prop._show(env)}: z3 {got} vs {want}"
            done += 1
    assert done >= 100
