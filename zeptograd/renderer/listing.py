"""The PYTHON device's "source": the linear program as a listing (what DEBUG=4 prints for it)."""

from __future__ import annotations

from collections.abc import Sequence

from zeptograd.uop.ops import UOp
from zeptograd.uop.render import render_listing


class ListingRenderer:
    device = "PYTHON"

    def render(self, name: str, uops: Sequence[UOp]) -> str:
        return f"# {name}\n{render_listing(uops)}\n"
