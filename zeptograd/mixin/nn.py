"""Neural-network Tensor ops: convolution, pooling, losses, normalization, attention and initializers.

Everything here is built from the other Tensor ops, so it fuses, runs on every device and has gradients.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from zeptograd.tensor import Tensor  # noqa: F401


class NNMixin:
    """Tensor methods for neural networks."""

    __slots__ = ()
