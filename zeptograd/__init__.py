"""zeptograd: a small tensor library with a compiler inside.

The IR (`zeptograd.uop`) and the dtypes (`zeptograd.dtype`) are the foundation; the Tensor front end,
the scheduler, codegen and the devices build on them.
"""

from zeptograd.dtype import AddrSpace, DType, PtrDType, dtypes, least_upper_dtype, result_type, to_dtype
from zeptograd.helpers import Context
from zeptograd.uop import Ops, PatternMatcher, UOp, UPat, graph_rewrite

__version__ = "0.1.0"
__all__ = [
    "AddrSpace",
    "Context",
    "DType",
    "Ops",
    "PatternMatcher",
    "PtrDType",
    "UOp",
    "UPat",
    "dtypes",
    "graph_rewrite",
    "least_upper_dtype",
    "result_type",
    "to_dtype",
]
