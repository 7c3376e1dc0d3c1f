"""The PYTHON device's "source": the linear program as a listing (what DEBUG=4 prints for it)."""

from __future__ import annotations

from collections.abc import Sequence

from zeptograd.dtype import DType
from zeptograd.renderer import Renderer
from zeptograd.uop.ops import Ops, UOp
from zeptograd.uop.render import render_listing


class ListingRenderer(Renderer):
    device = "PYTHON"
    # EXP2, LOG2, SIN, COS, TAN (...) are computed exactly (Python's math), not as the polynomials compiled targets
    # use: the reference says what the ops mean, and a step per op keeps the interpreter usable
    native_transcendentals = True

    def max_lanes(self, op: Ops, dt: DType) -> int:
        """The interpreter executes every op on vectors of any width; 8 keeps programs like the CPU's."""
        return 8

    def masked_load(self, dt: DType) -> bool:
        """A vector read under a gate per lane: the interpreter reads only the lanes whose gate is true, as
        AVX-512's masked loads do (the reference executes every form of LOAD the CPU's programs have)."""
        return True

    def render(self, name: str, uops: Sequence[UOp]) -> str:
        return f"# {name}\n{render_listing(uops)}\n"
