"""The table of ONNX ops: each op type maps to the functions that build it from Tensor ops, one per opset range.

An op is a plain function of its inputs (Tensors, None for an absent optional input, Python values for the inputs
it reads as constants) and its attributes as keyword-only arguments whose defaults are the ONNX specification's:

>>> from zeptograd.onnx.registry import onnx_op, lookup
>>> @onnx_op("MyRelu", domain="example")
... def my_relu(x, *, alpha=0.0):
...     return x.relu() + alpha
>>> lookup("example", "MyRelu", 1).fn is my_relu
True

`since` is the first opset version a function handles; the newest one at or below the model's opset serves it.
`static` names the input positions read as Python values (a Reshape's shape, a Slice's starts): the runner turns
those Tensors into lists before the call, once per input shape where the value follows from shapes and constants
alone. A function that wants the node's context (its name, how many outputs it has, the opset, subgraph runs) takes
a keyword-only `ctx` argument.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


class OnnxError(ValueError):
    """A model zeptograd cannot run: an op, opset, attribute value or dtype it lacks, or a malformed graph."""


@dataclass(frozen=True)
class OnnxOp:
    """One implementation of an ONNX op: `fn` builds it for opsets from `since` until the next one registered."""

    op_type: str
    domain: str
    since: int
    fn: Callable[..., Any]
    static: tuple[int, ...] = ()
    attributes: frozenset[str] = frozenset()
    wants_ctx: bool = False


_OPS: dict[tuple[str, str], list[OnnxOp]] = {}


def _attributes(fn: Callable[..., Any]) -> tuple[frozenset[str], bool]:
    params = inspect.signature(fn).parameters.values()
    names = frozenset(p.name for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY and p.name != "ctx")
    return names, any(p.name == "ctx" for p in params)


def onnx_op(
    op_type: str, since: int = 1, *, static: tuple[int, ...] = (), domain: str = ""
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register `fn` as ONNX op `op_type` (in `domain`, "" being ai.onnx) for opsets from `since` on.

    Decorators stack: one function may serve several op types or opset ranges.
    """

    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        attributes, wants_ctx = _attributes(fn)
        impls = _OPS.setdefault((domain, op_type), [])
        if any(impl.since == since for impl in impls):
            raise ValueError(f"ONNX op {domain or 'ai.onnx'}::{op_type} since opset {since} is registered twice")
        impls.append(OnnxOp(op_type, domain, since, fn, tuple(static), attributes, wants_ctx))
        impls.sort(key=lambda impl: impl.since)
        return fn

    return register


def lookup(domain: str, op_type: str, opset: int) -> OnnxOp | None:
    """The implementation of `op_type` for `opset` (the newest registered at or below it), or None."""
    found = None
    for impl in _OPS.get((domain, op_type), ()):
        if impl.since <= opset:
            found = impl
    return found


def registered() -> dict[tuple[str, str], tuple[int, ...]]:
    """Every registered op, by (domain, op type), with the opsets its implementations start at."""
    return {key: tuple(impl.since for impl in impls) for key, impls in sorted(_OPS.items())}
