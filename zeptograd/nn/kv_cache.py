"""A key/value cache for decoding a transformer one step at a time.

Two tensors (batch, max_len, heads, head_dim) are made and realized once. Each step writes its keys and values at
positions [start_pos, start_pos + T) with `assign` through a slice, then attention reads the whole cache under a
mask of what is written: query t (at position start_pos + t) sees positions 0 .. start_pos + t. With `start_pos` a
bound `Variable`, every step builds the same graph, so one compiled kernel per step serves every position and one
TinyJit capture replays the whole generation. (A read of the whole cache costs max_len positions at every step;
what it buys is one shape for every position, as a static cache in PyTorch does.)

>>> import numpy as np
>>> from zeptograd import Tensor, Variable
>>> cache = KVCache(batch=1, max_len=4, heads=1, head_dim=2)
>>> pos = Variable("pos", 0, 3)
>>> for i in range(2):
...     k = v = Tensor([[[[float(i), 1.0]]]])
...     keys, values, mask = cache(k, v, pos.bind(i))
>>> keys.shape, mask.tolist()
((1, 1, 4, 2), [[True, True, False, False]])
"""

from __future__ import annotations

from zeptograd.dtype import DType, dtypes
from zeptograd.helpers import ArgumentError
from zeptograd.tensor import Tensor
from zeptograd.uop.ops import UOp


class KVCache:
    """The keys and values of the positions decoded so far, for one attention layer: `cache(k, v, start_pos)`
    stores `k` and `v` (batch, T, heads, head_dim) at [start_pos, start_pos + T) and returns every position's keys
    and values (batch, heads, max_len, head_dim) with the bool mask (T, max_len) of what query t may see.

    `start_pos` is an int or a bound `Variable` whose range keeps start_pos + T within max_len. A model's caches are
    working memory, not state: `get_state_dict` leaves them out (`persistent = False`)."""

    persistent = False

    def __init__(
        self,
        batch: int,
        max_len: int,
        heads: int,
        head_dim: int,
        dtype: DType | None = None,
        device: str | None = None,
    ) -> None:
        for name, value in (("batch", batch), ("max_len", max_len), ("heads", heads), ("head_dim", head_dim)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ArgumentError(f"KVCache: {name} must be a positive int, got {value!r}")
        self.max_len = max_len
        self.shape = (batch, max_len, heads, head_dim)
        dt = dtype or dtypes.default_float
        self.keys = Tensor.zeros(*self.shape, dtype=dt, device=device).contiguous().realize()
        self.values = Tensor.zeros(*self.shape, dtype=dt, device=device).contiguous().realize()

    def __call__(self, k: Tensor, v: Tensor, start_pos: int | UOp) -> tuple[Tensor, Tensor, Tensor]:
        if k.shape != v.shape or k.ndim != 4 or k.shape[0] != self.shape[0] or k.shape[2:] != self.shape[2:]:
            raise ArgumentError(
                f"KVCache: keys {k.shape} and values {v.shape} must both be (batch, T, heads, head_dim) with batch, "
                f"heads and head_dim {self.shape[0]}, {self.shape[2]}, {self.shape[3]}"
            )
        T = k.shape[1]
        if isinstance(start_pos, int) and not 0 <= start_pos <= self.max_len - T:
            raise ArgumentError(f"KVCache: positions [{start_pos}, {start_pos + T}) are outside [0, {self.max_len})")
        for cache, new in ((self.keys, k), (self.values, v)):
            cache[:, start_pos : start_pos + T].assign(new.cast(cache.dtype)).realize()
        position = Tensor(start_pos) if isinstance(start_pos, UOp) else start_pos
        seen = Tensor.arange(self.max_len).reshape(1, self.max_len) <= Tensor.arange(T).reshape(T, 1) + position
        return self.keys.transpose(1, 2), self.values.transpose(1, 2), seen
