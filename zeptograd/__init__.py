"""zeptograd: a small tensor library with a compiler inside.

>>> from zeptograd import Tensor
>>> (Tensor([1.0, 2.0, 3.0]) * 2).sum().item()
12.0

`Tensor` builds a lazy graph of UOps (`zeptograd.uop`); `realize()`, `numpy()` or `item()` cut it into
fused kernels (`schedule`), generate code for each (`codegen`, `renderer`) and run it on a device
(`runtime`: CPU compiles C, PYTHON interprets the IR).
"""

from zeptograd.dtype import AddrSpace, DType, PtrDType, dtypes, least_upper_dtype, result_type, to_dtype
from zeptograd.engine.jit import TinyJit
from zeptograd.helpers import ArgumentError, Context, DTypeError, GlobalCounters, JitError
from zeptograd.runtime.device import Device
from zeptograd.tensor import Tensor
from zeptograd.uop import Ops, PatternMatcher, UOp, UPat, Variable, graph_rewrite

__version__ = "0.1.0"
__all__ = [
    "AddrSpace",
    "ArgumentError",
    "Context",
    "DType",
    "DTypeError",
    "Device",
    "GlobalCounters",
    "JitError",
    "Ops",
    "PatternMatcher",
    "PtrDType",
    "Tensor",
    "TinyJit",
    "UOp",
    "UPat",
    "Variable",
    "dtypes",
    "graph_rewrite",
    "least_upper_dtype",
    "result_type",
    "to_dtype",
]
