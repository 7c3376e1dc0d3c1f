"""What the SINK of an optimized kernel carries: `KernelInfo(name, opts)`, and the `Opt`s of its plan.

They live with the IR (not with the optimizer in codegen/opt.py) because a SINK's arg is part of a UOp: the
listing and `pyrender` write them, and the rebuilt graph must be the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, auto


class OptOps(Enum):
    """What an `Opt` does to its axis (see the module docstring)."""

    UPCAST = auto()
    UNROLL = auto()
    THREAD = auto()
    SWAP = auto()
    PADTO = auto()
    LOCAL = auto()
    GROUP = auto()
    GROUPTOP = auto()
    TC = auto()

    def __repr__(self) -> str:
        return f"OptOps.{self.name}"


@dataclass(frozen=True)
class Opt:
    """One optimization: `op` applied to `axis` with `amount` (for SWAP, the other axis).

    >>> Opt(OptOps.UPCAST, 0, 4)
    Opt(OptOps.UPCAST, 0, 4)
    """

    op: OptOps
    axis: int
    amount: int = 0

    def __repr__(self) -> str:
        return f"Opt({self.op!r}, {self.axis}, {self.amount})"


@dataclass(frozen=True)
class KernelInfo:
    """What the SINK of an optimized kernel carries: its name and the opts applied to it."""

    name: str
    opts: tuple[Opt, ...] = ()

    def __repr__(self) -> str:
        return f"KernelInfo({self.name!r}, {self.opts!r})"
