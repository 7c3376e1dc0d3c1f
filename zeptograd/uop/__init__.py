"""The UOp IR and its rewrite engine: the one representation every stage of zeptograd works on."""

from zeptograd.uop.ops import ARITY, GroupOp, MathMixin, Ops, UOp, Variable, sint, smax, smin
from zeptograd.uop.pattern import PatternMatcher, Rule, UPat
from zeptograd.uop.render import PYRENDER_GLOBALS, pyrender, render_expr, render_listing
from zeptograd.uop.rewrite import RewriteEvent, RewriteLoopError, graph_rewrite, track_rewrites

__all__ = [
    "ARITY",
    "GroupOp",
    "MathMixin",
    "Ops",
    "PYRENDER_GLOBALS",
    "PatternMatcher",
    "RewriteEvent",
    "RewriteLoopError",
    "Rule",
    "UOp",
    "UPat",
    "Variable",
    "graph_rewrite",
    "pyrender",
    "render_expr",
    "render_listing",
    "sint",
    "smax",
    "smin",
    "track_rewrites",
]
