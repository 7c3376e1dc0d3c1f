"""Tensor creation beyond full/zeros/ones/empty/arange: linspace, eye, *_like, tril/triu, meshgrid, random numbers."""

from __future__ import annotations


class CreationMixin:
    """Tensor creation beyond full/zeros/ones/empty/arange: linspace, eye, *_like, tril/triu, meshgrid, random."""

    __slots__ = ()
