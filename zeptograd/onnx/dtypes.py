"""ONNX's element types and zeptograd's dtypes, both ways, and ONNX tensors (initializers, constants) as Tensors.

>>> onnx_dtype(1), onnx_dtype(16)
(dtypes.float32, dtypes.bfloat16)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from zeptograd.dtype import NARROW_FLOATS, DType, dtypes
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
}
# the element types zeptograd lacks, by ONNX's name, to refuse a model by name
_MISSING: dict[int, str] = {
    0: "UNDEFINED",
    8: "STRING",
    14: "COMPLEX64",
    15: "COMPLEX128",
    18: "FLOAT8E4M3FNUZ",
    20: "FLOAT8E5M2FNUZ",
    21: "UINT4",
    22: "INT4",
    23: "FLOAT4E2M1",
    24: "FLOAT8E8M0",
    25: "UINT2",
    26: "INT2",
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
    """A Tensor of `array`'s values; bfloat16 and fp8 arrays (ml_dtypes, as onnx hands them out) keep their dtype."""
    array = np.asarray(array)
    if dt is None:
        dt = ml_dtype(array.dtype)
    if dt in NARROW_FLOATS:
        # every bfloat16 and fp8 value is a float32 exactly: it goes in as float32 and rounds back exactly
        return Tensor(array.astype(np.float32), dtype=dt, device=device).realize()
    # np.ascontiguousarray would make a 0-d array 1-d
    return Tensor(np.require(array, requirements="C"), dtype=dt, device=device).realize()


def ml_dtype(dt: np.dtype) -> DType | None:
    """The narrow float dtype of an ml_dtypes array, or None for numpy's own dtypes."""
    return {"bfloat16": dtypes.bfloat16, "float8_e4m3fn": dtypes.fp8e4m3, "float8_e5m2": dtypes.fp8e5m2}.get(dt.name)


def to_numpy(t: Tensor) -> np.ndarray:
    """A Tensor's values as numpy, bfloat16 and fp8 in ml_dtypes' types (what onnx and onnxruntime use)."""
    if t.dtype in NARROW_FLOATS:
        import ml_dtypes

        kind = {dtypes.bfloat16: ml_dtypes.bfloat16, dtypes.fp8e4m3: ml_dtypes.float8_e4m3fn}
        kind[dtypes.fp8e5m2] = ml_dtypes.float8_e5m2
        return t.numpy().astype(kind[t.dtype])
    return t.numpy()
