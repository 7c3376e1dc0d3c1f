"""Interop with numpy, PyTorch and any DLPack library: the DLPack protocol both ways (`__dlpack__`,
`__dlpack_device__`, `Tensor.from_dlpack`), `Tensor.from_numpy`, `Tensor.from_torch` and `.torch()`. Memory is shared,
not copied, where it can be (a realized tensor on a host-memory device: CPU, LLVM, PYTHON); engine/interop.py has the
rules, runtime/dlpack.py the C structs.

>>> import numpy as np
>>> a = np.arange(3, dtype=np.float32)
>>> t = Tensor.from_numpy(a)
>>> a[0] = 5.0
>>> t.tolist()
[5.0, 1.0, 2.0]
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from zeptograd.tensor import Tensor


class InteropMixin:
    """Sharing memory with numpy, PyTorch and DLPack libraries."""

    __slots__ = ()

    def __dlpack__(
        self: Tensor,
        *,
        stream: Any = None,
        max_version: tuple[int, int] | None = None,
        dl_device: tuple[int, int] | None = None,
        copy: bool | None = None,
    ) -> Any:
        """A DLPack capsule lending this tensor's memory (the protocol `np.from_dlpack` and `torch.from_dlpack` call).

        The tensor is realized first if it is lazy. A realized tensor on a host-memory device (CPU, LLVM, PYTHON) is
        lent as it is, and so is a view of one made of reshapes, permutes, shrinks and expands (with its strides):
        writes on either side are seen by the other. A flip or pad view is lent as a copy (consumers take no negative
        strides), and so is a tensor on a GPU device, and only when asked for with `dl_device=(1, 0)` (kDLCPU);
        `copy=True` always copies, `copy=False` raises a BufferError where a copy is needed. The memory stays
        allocated while the consumer holds it, even after this tensor is gone. `stream` is unused (host memory).

        >>> import numpy as np
        >>> t = Tensor([[1, 2], [3, 4]]).realize()
        >>> a = np.from_dlpack(t.T)
        >>> _ = t.assign(t * 10).realize()
        >>> a.tolist()
        [[10, 30], [20, 40]]
        """
        from zeptograd.engine.interop import export

        return export(self, stream=stream, max_version=max_version, dl_device=dl_device, copy=copy)

    def __dlpack_device__(self: Tensor) -> tuple[int, int]:
        """DLPack's (device type, device id) of this tensor's memory: (1, 0), kDLCPU, on the host-memory devices.

        >>> Tensor([1.0]).__dlpack_device__()
        (1, 0)
        """
        from zeptograd.engine.interop import dlpack_device

        return dlpack_device(self)

    @staticmethod
    def from_dlpack(obj: Any, device: str | None = None, copy: bool | None = None) -> Tensor:
        """A tensor over the memory of `obj`, any DLPack producer (a torch tensor, a numpy array, a capsule).

        Shared, not copied, where the memory is host memory, writable, aligned and C-contiguous: writes on either
        side are seen by the other, and the producer's memory stays alive while the tensor's buffer does. Copied, in C
        order, otherwise (other strides, a transposed matrix included; read-only memory; memory on a GPU, which the
        producer is asked to copy to the host), or when `copy=True`;
        `copy=False` raises a BufferError where a copy is needed. `device` None is the default device, or the CPU
        where the default keeps its memory apart (a non-host `device` gets a copy).

        >>> import numpy as np
        >>> a = np.array([[1, 2], [3, 4]], dtype=np.int64)
        >>> t = Tensor.from_dlpack(a)
        >>> a[1, 1] = 9
        >>> t.dtype, t.tolist()
        (dtypes.int64, [[1, 2], [3, 9]])
        """
        from zeptograd.engine.interop import import_dlpack

        return import_dlpack(obj, device=device, copy=copy)

    @staticmethod
    def from_numpy(a: np.ndarray, device: str | None = None, copy: bool | None = None) -> Tensor:
        """A tensor over numpy array `a`'s memory, as `torch.from_numpy` (`Tensor(a)` copies): shared under
        `from_dlpack`'s rules, so a read-only, misaligned, non-native-endian or oddly strided array is copied. The
        bfloat16 and fp8 arrays of ml_dtypes keep their dtype.

        >>> import numpy as np
        >>> a = np.zeros(2, dtype=np.float16)
        >>> t = Tensor.from_numpy(a)
        >>> _ = t.assign(Tensor([1.5, 2.5], dtype="half")).realize()
        >>> a.tolist()
        [1.5, 2.5]
        """
        from zeptograd.engine.interop import import_numpy

        return import_numpy(a, device=device, copy=copy)

    @staticmethod
    def from_torch(t: Any, device: str | None = None, copy: bool | None = None) -> Tensor:
        """A tensor with torch tensor `t`'s values, dtype (bfloat16 and fp8 too) and shape, over its memory where
        `from_dlpack` can share it (a contiguous CPU tensor); other strides (`t.T`) are copied with their meaning
        kept, and a tensor on a GPU is copied to the host. Gradients are not carried over
        (`t` is detached). Needs PyTorch.

        >>> import torch
        >>> Tensor.from_torch(torch.arange(6, dtype=torch.bfloat16).reshape(2, 3).T).tolist()
        [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]]
        """
        from zeptograd.engine.interop import import_torch

        return import_torch(t, device=device, copy=copy)

    def torch(self: Tensor) -> Any:
        """This tensor as a torch CPU tensor of the same dtype and shape, sharing its memory through DLPack under
        `__dlpack__`'s rules (a tensor on a GPU device comes as a host copy). Needs PyTorch.

        >>> t = Tensor([1.0, 2.0]).realize()
        >>> x = t.torch()
        >>> _ = x.add_(1)
        >>> t.tolist(), x.dtype
        ([2.0, 3.0], torch.float32)
        """
        from zeptograd.engine.interop import to_torch

        return to_torch(self)
