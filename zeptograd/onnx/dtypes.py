"""ONNX's element types and zeptograd's dtypes, both ways, and ONNX tensors (initializers, constants) as Tensors.

>>> onnx_dtype(1), onnx_dtype(16)
(dtypes.float32, dtypes.bfloat16)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from zeptograd.dtype import NARROW, DType, dtypes
from zeptograd.onnx.registry import OnnxError
from zeptograd.tensor import Tensor

# TensorProto.DataType -> dtype, for every element type zeptograd has
_DTYPES: dict[int, DType] = {
    1: dtypes.float32,
    2: dtypes.uint8,
    3: dtypes.int8,
    4: dtypes.uint16,
    5: dtypes.int16,
    6: dtypes.int32,
    7: dtypes.int64,
    9: dtypes.bool,
    10: dtypes.float16,
    11: dtypes.float64,
    12: dtypes.uint32,
    13: dtypes.uint64,
    16: dtypes.bfloat16,
    17: dtypes.fp8e4m3,
    19: dtypes.fp8e5m2,
    21: dtypes.uint4,
    22: dtypes.int4,
    25: dtypes.uint2,
    26: dtypes.int2,
}
# the element types zeptograd lacks, by ONNX's name, to refuse a model by name
_MISSING: dict[int, str] = {
    0: "UNDEFINED",
    8: "STRING",
    14: "COMPLEX64",
    15: "COMPLEX128",
    18: "FLOAT8E4M3FNUZ",
    20: "FLOAT8E5M2FNUZ",
    23: "FLOAT4E2M1",
    24: "FLOAT8E8M0",
    27: "FLOAT6E2M3",
    28: "FLOAT6E3M2",
}
_ONNX_OF: dict[DType, int] = {dt: code for code, dt in _DTYPES.items()}


def onnx_dtype(elem_type: int, where: str = "") -> DType:
    """zeptograd's dtype for ONNX element type `elem_type`; OnnxError naming the type where zeptograd has none."""
    if (dt := _DTYPES.get(elem_type)) is not None:
        return dt
    name = _MISSING.get(elem_type, f"element type {elem_type}")
    raise OnnxError(f"{where + ': ' if where else ''}zeptograd has no dtype for ONNX's {name}")


def to_onnx_dtype(dt: DType) -> int:
    """ONNX's element type code for zeptograd dtype `dt`."""
    return _ONNX_OF[dt]


def tensor_from_proto(proto: Any, where: str = "", device: str | None = None) -> Tensor:
    """A TensorProto (an initializer, a Constant's value) as a realized Tensor of its dtype."""
    from onnx import numpy_helper

    dt = onnx_dtype(proto.data_type, where or proto.name)
    array = numpy_helper.to_array(proto)
    return from_numpy(array, dt, device)


def from_numpy(array: np.ndarray, dt: DType | None = None, device: str | None = None) -> Tensor:
    """A Tensor of `array`'s values; the arrays of ml_dtypes (bfloat16, fp8, int4, ..., as onnx hands them out) keep
    their dtype."""
    array = np.asarray(array)
    if dt is None:
        dt = ml_dtype(array.dtype)
    if dt in NARROW:
        # an ml_dtypes array goes in by its values (a narrow float's are float32s, a narrow int's int32s exactly)
        return Tensor(array, dtype=dt, device=device).realize()
    # np.ascontiguousarray would make a 0-d array 1-d
    return Tensor(np.require(array, requirements="C"), dtype=dt, device=device).realize()


def ml_dtype(dt: np.dtype) -> DType | None:
    """The dtype of an ml_dtypes array (bfloat16, fp8, int4, ...), or None for numpy's own dtypes."""
    narrow = dtypes.fields().get(dt.name)
    return narrow if narrow in NARROW else None


# zeptograd's names for ml_dtypes' types where they differ
_ML_NAMES = {dtypes.fp8e4m3: "float8_e4m3fn", dtypes.fp8e5m2: "float8_e5m2"}


def ml_type(dt: DType) -> Any:
    """ml_dtypes' scalar type of a narrow dtype (bfloat16, fp8, int4, ...)."""
    import ml_dtypes

    return getattr(ml_dtypes, _ML_NAMES.get(dt, dt.name))


def to_numpy(t: Tensor) -> np.ndarray:
    """A Tensor's values as numpy, bfloat16, fp8 and the narrow ints in ml_dtypes' types (what onnx and onnxruntime
    use)."""
    return t.numpy().astype(ml_type(t.dtype)) if t.dtype in NARROW else t.numpy()
