"""Indexing: __getitem__, __setitem__, gather, scatter, masks and one_hot."""

from __future__ import annotations


class IndexingMixin:
    """Indexing: __getitem__, __setitem__, gather, scatter, masks and one_hot."""

    __slots__ = ()
