"""Rules: `UPat` describes a shape of graph, `PatternMatcher` is a table of (pattern, function) rules.

A pattern names an op (or several), a dtype (or several), its sources and an arg; `name` binds the matched
node, and the rule's function receives every binding as a keyword argument (and `ctx` if it asks for it).
A `src` tuple matches in order; a `src` list matches in any order (for commutative ops). Arithmetic on
UPats builds patterns, so a rule reads like the algebra it implements:

>>> x_plus_0 = (UPat.var("x") + 0, lambda x: x, "x+0 -> x")
>>> pm = PatternMatcher([x_plus_0])
>>> x = UOp.variable("x", 0, 5)
>>> pm.rewrite(x + 0) is x
True
"""

from __future__ import annotations

import inspect
import itertools
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from zeptograd.dtype import ConstType, DType
from zeptograd.uop.ops import GroupOp, MathMixin, Ops, UOp


def _as_tuple(x: Any, kind: type, what: str) -> tuple | None:
    if x is None:
        return None
    items = tuple(x) if isinstance(x, (tuple, list, set, frozenset)) else (x,)
    for item in items:
        if not isinstance(item, kind):
            raise TypeError(f"UPat: {what} must be {kind.__name__}, got {type(item).__name__}: {item!r}")
    return items


class UPat(MathMixin):
    """A pattern over UOps.

    `op`/`dtype`: one or a collection (None: any); a dtype pattern also matches vectors of that dtype.
    `src`: a tuple (in order), a list (any permutation), or one UPat (every source, any count); None: any.
    `arg`: compared with `==` (None: any). `name`: bind the matched node under this keyword.
    `allow_any_len`: with a tuple `src`, match a node with more sources than listed (a prefix).
    """

    __slots__ = ("op", "dtype", "src", "arg", "name", "allow_any_len", "_src_kind", "_perms", "_child_ops")

    def __init__(
        self,
        op: Ops | Iterable[Ops] | None = None,
        dtype: DType | Iterable[DType] | None = None,
        src: UPat | tuple[UPat, ...] | list[UPat] | None = None,
        arg: Any = None,
        name: str | None = None,
        allow_any_len: bool = False,
    ):
        self.op: tuple[Ops, ...] | None = _as_tuple(op, Ops, "op")
        self.dtype: tuple[DType, ...] | None = _as_tuple(dtype, DType, "dtype")
        if name is not None and (not isinstance(name, str) or not name.isidentifier() or name == "ctx"):
            raise ValueError(f"UPat: name must be a Python identifier other than 'ctx', got {name!r}")
        self.name = name
        self.arg = arg
        self.allow_any_len = allow_any_len
        self._perms: tuple[tuple[UPat, ...], ...] = ()
        if src is None:
            self._src_kind = "any"
            self.src: tuple[UPat, ...] = ()
        elif isinstance(src, UPat):
            self._src_kind = "each"
            self.src = (src,)
        elif isinstance(src, (tuple, list)):
            for i, s in enumerate(src):
                if not isinstance(s, UPat):
                    raise TypeError(f"UPat: src[{i}] must be a UPat, got {type(s).__name__}: {s!r}")
            self.src = tuple(src)
            self._src_kind = "ordered" if isinstance(src, tuple) else "permuted"
            if isinstance(src, list):
                # distinct orderings only: [x, x] needs one try, not two
                self._perms = tuple(dict.fromkeys(itertools.permutations(self.src)))
        else:
            raise TypeError(f"UPat: src must be a UPat, a tuple or a list of UPats, got {type(src).__name__}")
        if allow_any_len and self._src_kind != "ordered":
            raise ValueError("UPat: allow_any_len needs src given as a tuple")
        # a quick reject before the full match: ops that some source must have, one set per listed source
        self._child_ops: tuple[frozenset[Ops], ...] = ()
        if self._src_kind in ("ordered", "permuted"):
            self._child_ops = tuple(frozenset(s.op) for s in self.src if s.op is not None)

    # *** constructors that read well in rules ***

    @staticmethod
    def var(name: str | None = None, dtype: DType | Iterable[DType] | None = None) -> UPat:
        """Any node, bound to `name`."""
        return UPat(dtype=dtype, name=name)

    @staticmethod
    def cvar(name: str | None = None, dtype: DType | Iterable[DType] | None = None) -> UPat:
        """Any constant, bound to `name`."""
        return UPat(Ops.CONST, dtype, name=name)

    @staticmethod
    def const(dtype: DType | Iterable[DType] | None, value: ConstType) -> UPat:
        """The constant `value` (of `dtype`, or of any dtype when None)."""
        return UPat(Ops.CONST, dtype, arg=value)

    def alu(self, op: Ops, *src: Any) -> UPat:
        operands = [self, *(s if isinstance(s, UPat) else self.const_like(s) for s in src)]
        return UPat(op, src=operands if op in GroupOp.Commutative else tuple(operands))

    def const_like(self, b: ConstType) -> UPat:
        return UPat.const(None, b)

    def where(self, x: Any, y: Any) -> UPat:
        return self.alu(Ops.WHERE, x, y)

    def captures(self) -> set[str]:
        """Every name this pattern binds."""
        names = {self.name} if self.name is not None else set()
        for s in self.src:
            names |= s.captures()
        return names

    # *** matching ***

    def match(self, uop: UOp, store: dict[str, UOp]) -> list[dict[str, UOp]]:
        """Every way `uop` matches, each a dict of bindings extending `store` (empty: no match)."""
        if self.op is not None and uop.op not in self.op:
            return []
        if self.dtype is not None and uop.dtype not in self.dtype and uop.dtype.scalar() not in self.dtype:
            return []
        if self.arg is not None and not _arg_equal(self.arg, uop.arg):
            return []
        if self.name is not None:
            bound = store.get(self.name)
            if bound is not None and bound is not uop:
                return []
            store = {**store, self.name: uop}
        kind = self._src_kind
        if kind == "any":
            return [store]
        if kind == "each":
            stores = [store]
            for s in uop.src:
                stores = [out for st in stores for out in self.src[0].match(s, st)]
                if not stores:
                    break
            return stores
        if len(uop.src) != len(self.src) and not (self.allow_any_len and len(uop.src) >= len(self.src)):
            return []
        for ops in self._child_ops:
            if not any(s.op in ops for s in uop.src):
                return []
        if kind == "ordered":
            return _match_sources(self.src, uop.src, store)
        return [out for perm in self._perms for out in _match_sources(perm, uop.src, store)]

    def __repr__(self) -> str:
        parts = []
        if self.op is not None:
            parts.append("op=" + ("|".join(o.name for o in self.op)))
        if self.dtype is not None:
            parts.append(f"dtype={self.dtype}")
        if self.name is not None:
            parts.append(f"name={self.name!r}")
        if self.arg is not None:
            parts.append(f"arg={self.arg!r}")
        if self._src_kind != "any":
            inner = ", ".join(map(repr, self.src))
            brackets = {"each": "each(%s)", "ordered": "(%s)", "permuted": "[%s]"}[self._src_kind]
            parts.append("src=" + brackets % inner)
        return f"UPat({', '.join(parts)})"


def _arg_equal(a: Any, b: Any) -> bool:
    # the constant 0 matches 0 and 0.0 (a pattern is dtype-agnostic), but True matches only bools
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return bool(a == b)


def _match_sources(pats: Sequence[UPat], srcs: Sequence[UOp], store: dict[str, UOp]) -> list[dict[str, UOp]]:
    stores = [store]
    for pat, s in zip(pats, srcs):
        stores = [out for st in stores for out in pat.match(s, st)]
        if not stores:
            return []
    return stores


def _fn_location(fn: Callable) -> str:
    code = getattr(fn, "__code__", None)
    if code is None:
        return repr(fn)
    return f"{code.co_filename.rsplit('/', 1)[-1]}:{code.co_firstlineno}"


class Rule:
    """One rule of a PatternMatcher: a pattern, the function it calls, and a name for traces and errors."""

    __slots__ = ("pat", "fn", "name", "takes_ctx")

    def __init__(self, pat: UPat, fn: Callable, name: str | None = None):
        if not isinstance(pat, UPat):
            raise TypeError(f"a rule's pattern must be a UPat, got {type(pat).__name__}: {pat!r}")
        if not callable(fn):
            raise TypeError(f"a rule's function must be callable, got {type(fn).__name__}: {fn!r}")
        location = _fn_location(fn)
        fn_name = getattr(fn, "__name__", "<lambda>")
        if name is None:
            name = location if fn_name == "<lambda>" else f"{fn_name} ({location})"
        self.pat, self.fn, self.name = pat, fn, name
        self.takes_ctx = _check_signature(pat, fn, name)

    def __repr__(self) -> str:
        return f"Rule({self.name})"


def _check_signature(pat: UPat, fn: Callable, name: str) -> bool:
    """Raise if `fn` cannot take exactly the bindings `pat` makes; return whether it takes `ctx`."""
    params = inspect.signature(fn).parameters
    captures = pat.captures()
    positional_only = [p for p, v in params.items() if v.kind is inspect.Parameter.POSITIONAL_ONLY]
    if positional_only:
        raise TypeError(f"rule {name}: the function's parameters {positional_only} are positional-only")
    if any(v.kind is inspect.Parameter.VAR_KEYWORD for v in params.values()):
        return True
    named = {p for p, v in params.items() if v.kind is not inspect.Parameter.VAR_POSITIONAL}
    required = {p for p in named if params[p].default is inspect.Parameter.empty}
    missing = required - captures - {"ctx"}
    unaccepted = captures - named
    if missing or unaccepted:
        problems = []
        if missing:
            problems.append(f"takes {sorted(missing)}, which the pattern does not bind")
        if unaccepted:
            problems.append(f"does not take {sorted(unaccepted)}, which the pattern binds")
        raise ValueError(f"rule {name}: the function {'; '.join(problems)} (pattern binds {sorted(captures)})")
    return "ctx" in named


RuleSpec = tuple[UPat, Callable] | tuple[UPat, Callable, str] | Rule


class PatternMatcher:
    """A table of rules, indexed by op so a node is only tried against rules that can match it.

    Rules are `(pattern, fn)` or `(pattern, fn, name)`; they are tried in order and the first one whose
    function returns something other than None wins. Matchers compose with `+`.
    """

    def __init__(self, rules: Sequence[RuleSpec]):
        self.rules: list[Rule] = []
        for r in rules:
            if isinstance(r, Rule):
                self.rules.append(r)
            elif isinstance(r, tuple) and len(r) in (2, 3):
                self.rules.append(Rule(*r))
            else:
                raise TypeError(f"a rule is (UPat, fn) or (UPat, fn, name), got {r!r}")
        self.by_op: dict[Ops, list[Rule]] = {op: [] for op in Ops}
        for rule in self.rules:
            for op in rule.pat.op if rule.pat.op is not None else tuple(Ops):
                self.by_op[op].append(rule)

    def __add__(self, other: PatternMatcher) -> PatternMatcher:
        if not isinstance(other, PatternMatcher):
            return NotImplemented
        return PatternMatcher(self.rules + other.rules)

    def __len__(self) -> int:
        return len(self.rules)

    def rewrite_with_rule(self, uop: UOp, ctx: Any = None) -> tuple[Any, Rule | None]:
        """The first rule result for `uop` that is not None, and the rule that gave it; (None, None) if none."""
        for rule in self.by_op[uop.op]:
            for store in rule.pat.match(uop, {}):
                ret = rule.fn(ctx=ctx, **store) if rule.takes_ctx else rule.fn(**store)
                if ret is not None:
                    return ret, rule
        return None, None

    def rewrite(self, uop: UOp, ctx: Any = None) -> Any:
        """The first rule result for `uop` that is not None (None when no rule applies)."""
        return self.rewrite_with_rule(uop, ctx)[0]
