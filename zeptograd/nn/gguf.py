"""GGUF files (llama.cpp's model format): the header, the metadata table, the tensor table, and the tensors,
with the quantized block formats dequantized by Tensor ops on the target device.

A GGUF file (versions 2 and 3, little-endian) is: the magic b"GGUF", a uint32 version, the uint64 counts of
tensors and of metadata entries, the metadata (key, value type, value), one info per tensor (name, dims listed
innermost first, GGML type, offset into the data section), then the data section, which starts at the next
multiple of `general.alignment` (32 when the key is absent). No file is read whole: the header is parsed from a
buffered file, and each tensor's bytes are a window of the file on the DISK device (a memory map), read when the
tensor is realized (`_file_bytes`).

A quantized tensor's bytes become a uint8 Tensor of shape (n_blocks, block_bytes); the scales are bitcast to
float16 and the quants unpacked with shifts and masks, all as lazy Tensor ops, so the dequantization runs as a
kernel on the device and the result is float32 (tinygrad's choice, and the gguf package's). Plain types keep
their dtype (F16 stays float16, BF16 bfloat16). The block layouts are ggml's (ggml-common.h); each row of a
quantized tensor (its innermost dim) is a whole number of blocks.

`gguf_save` writes the other way, plain types only (F32, F16, F64 and the integers): enough to make a small
model file without the gguf package.
"""

from __future__ import annotations

import io
import math
import os
import struct
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from zeptograd.dtype import DType, dtypes
from zeptograd.engine.realize import device_name
from zeptograd.helpers import ArgumentError, existing_file
from zeptograd.tensor import Tensor

__all__ = ["gguf_load", "gguf_save"]

_MAGIC = b"GGUF"
_VERSIONS = (2, 3)
_DEFAULT_ALIGNMENT = 32
_OP = "gguf_load"

# *** the metadata value types ***

# value type id -> (name, struct format) for the fixed-size scalars
_SCALARS = {
    0: ("UINT8", "B"),
    1: ("INT8", "b"),
    2: ("UINT16", "H"),
    3: ("INT16", "h"),
    4: ("UINT32", "I"),
    5: ("INT32", "i"),
    6: ("FLOAT32", "f"),
    7: ("BOOL", "?"),
    10: ("UINT64", "Q"),
    11: ("INT64", "q"),
    12: ("FLOAT64", "d"),
}
_STRING, _ARRAY = 8, 9


def _value_type_name(vtype: int) -> str:
    return _SCALARS[vtype][0] if vtype in _SCALARS else {_STRING: "STRING", _ARRAY: "ARRAY"}[vtype]


# the fewest bytes one element of an array can take: bounds a count against what is left of the file
_MIN_SIZE = {**{k: struct.calcsize("<" + f) for k, (_, f) in _SCALARS.items()}, _STRING: 8, _ARRAY: 12}

# *** the tensor types ***


class _Plain(NamedTuple):
    dtype: DType


class _Blocks(NamedTuple):
    elements: int  # values per block
    nbytes: int  # bytes per block
    dequantize: Callable[[Tensor], Tensor]  # (n_blocks, nbytes) uint8 -> (n_blocks, elements) float32


# every GGML type id there is, by name, so a refusal can say which type a file holds
_TYPE_NAMES = {
    0: "F32",
    1: "F16",
    2: "Q4_0",
    3: "Q4_1",
    4: "Q4_2",
    5: "Q4_3",
    6: "Q5_0",
    7: "Q5_1",
    8: "Q8_0",
    9: "Q8_1",
    10: "Q2_K",
    11: "Q3_K",
    12: "Q4_K",
    13: "Q5_K",
    14: "Q6_K",
    15: "Q8_K",
    16: "IQ2_XXS",
    17: "IQ2_XS",
    18: "IQ3_XXS",
    19: "IQ1_S",
    20: "IQ4_NL",
    21: "IQ3_S",
    22: "IQ2_S",
    23: "IQ4_XS",
    24: "I8",
    25: "I16",
    26: "I32",
    27: "I64",
    28: "F64",
    29: "IQ1_M",
    30: "BF16",
    34: "TQ1_0",
    35: "TQ2_0",
    39: "MXFP4",
    40: "NVFP4",
    41: "Q1_0",
}

# *** dequantization: Tensor ops on the block bytes ***


def _f16(blocks: Tensor, start: int) -> Tensor:
    """The float16 at byte `start` of each block, as float32 of shape (n_blocks, 1)."""
    return blocks[:, start : start + 2].bitcast(dtypes.float16).cast(dtypes.float32)


def _unpack(x: Tensor, bits: int, dim: int) -> Tensor:
    """The `bits`-wide fields of each byte of x, lowest first, along a new axis at `dim` (uint8)."""
    mask = (1 << bits) - 1
    return Tensor.stack(*[(x >> shift) & mask for shift in range(0, 8, bits)], dim=dim)


def _q4_0(blocks: Tensor) -> Tensor:
    # d: f16, qs[16]: value j is the low nibble of qs[j], value j + 16 its high nibble; x = (q - 8) * d
    d, n = _f16(blocks, 0), blocks.shape[0]
    q = _unpack(blocks[:, 2:18], 4, 1).reshape(n, 32)
    return d * (q.cast(dtypes.float32) - 8)


def _q4_1(blocks: Tensor) -> Tensor:
    # d, m: f16, qs[16] as in Q4_0; x = q * d + m
    d, m, n = _f16(blocks, 0), _f16(blocks, 2), blocks.shape[0]
    q = _unpack(blocks[:, 4:20], 4, 1).reshape(n, 32)
    return d * q.cast(dtypes.float32) + m


def _q5_high(qh: Tensor) -> Tensor:
    """Bit j of the little-endian uint32 `qh` (4 bytes per block) for j in 0..31, as (n_blocks, 32) uint8."""
    return _unpack(qh, 1, 2).reshape(qh.shape[0], 32)


def _q5_0(blocks: Tensor) -> Tensor:
    # d: f16, qh: uint32 (bit j is bit 4 of value j), qs[16] as in Q4_0; x = (q - 16) * d
    d, n = _f16(blocks, 0), blocks.shape[0]
    q = _unpack(blocks[:, 6:22], 4, 1).reshape(n, 32) | (_q5_high(blocks[:, 2:6]) << 4)
    return d * (q.cast(dtypes.float32) - 16)


def _q5_1(blocks: Tensor) -> Tensor:
    # d, m: f16, qh: uint32, qs[16] as in Q5_0; x = q * d + m
    d, m, n = _f16(blocks, 0), _f16(blocks, 2), blocks.shape[0]
    q = _unpack(blocks[:, 8:24], 4, 1).reshape(n, 32) | (_q5_high(blocks[:, 4:8]) << 4)
    return d * q.cast(dtypes.float32) + m


def _q8_0(blocks: Tensor) -> Tensor:
    # d: f16, qs: int8[32]; x = q * d
    return blocks[:, 2:34].bitcast(dtypes.int8).cast(dtypes.float32) * _f16(blocks, 0)


# The K-quants: super-blocks of 256 values, split into sub-blocks of 16 or 32 with scales of their own.


def _q2_k(blocks: Tensor) -> Tensor:
    # scales[16] (low nibble: scale, high nibble: min, one pair per 16 values), qs[64] (2-bit quants: value
    # 128h + 32j + l is bits 2j of qs[32h + l]), d, dmin: f16; x = d * scale * q - dmin * min
    n = blocks.shape[0]
    scales, d, dmin = blocks[:, 0:16], _f16(blocks, 80), _f16(blocks, 82)
    dl = (d * (scales & 15).cast(dtypes.float32)).reshape(n, 16, 1)
    ml = (dmin * (scales >> 4).cast(dtypes.float32)).reshape(n, 16, 1)
    q = _unpack(blocks[:, 16:80].reshape(n, 2, 32), 2, 2).reshape(n, 16, 16).cast(dtypes.float32)
    return (dl * q - ml).reshape(n, 256)


def _q3_k(blocks: Tensor) -> Tensor:
    # hmask[32] (bit 4h + j of hmask[l] is the high bit of value 128h + 32j + l; a clear bit subtracts 4),
    # qs[64] (low 2 bits, laid out as Q2_K's), scales[12] (16 6-bit scales: low nibbles in bytes 0-7, low
    # first; high 2-bit pairs in bytes 8-11), d: f16; x = d * (scale - 32) * q
    n = blocks.shape[0]
    packed, d = blocks[:, 96:108], _f16(blocks, 108)
    low = _unpack(packed[:, 0:8], 4, 1).reshape(n, 16)
    high = _unpack(packed[:, 8:12], 2, 1).reshape(n, 16)
    scale = (low | (high << 4)).cast(dtypes.float32) - 32
    dl = (d * scale).reshape(n, 16, 1)
    ql = _unpack(blocks[:, 32:96].reshape(n, 2, 32), 2, 2).reshape(n, 16, 16).cast(dtypes.int8)
    hbit = _unpack(blocks[:, 0:32], 1, 1).reshape(n, 16, 16).cast(dtypes.int8)
    q = (ql - (1 - hbit) * 4).cast(dtypes.float32)
    return (dl * q).reshape(n, 256)


def _k_scales(packed: Tensor) -> tuple[Tensor, Tensor]:
    """The 8 6-bit scales and 8 6-bit mins of Q4_K and Q5_K, packed in 12 bytes: bytes 0-3 hold scales 0-3
    (low 6 bits) and the top 2 bits of scales 4-7, bytes 4-7 the same for the mins, bytes 8-11 the low
    nibbles of scales 4-7 (low) and mins 4-7 (high). Both (n_blocks, 8) float32."""
    a, b, c = packed[:, 0:4], packed[:, 4:8], packed[:, 8:12]
    scale = (a & 63).cat((c & 15) | ((a >> 6) << 4), dim=1)
    minimum = (b & 63).cat((c >> 4) | ((b >> 6) << 4), dim=1)
    return scale.cast(dtypes.float32), minimum.cast(dtypes.float32)


def _q4_k(blocks: Tensor) -> Tensor:
    # d, dmin: f16, scales[12], qs[128] (value 64i + 32k + l is nibble k of qs[32i + l]), one scale and min
    # per 32 values; x = d * scale * q - dmin * min
    n = blocks.shape[0]
    d, dmin = _f16(blocks, 0), _f16(blocks, 2)
    scale, minimum = _k_scales(blocks[:, 4:16])
    dl, ml = (d * scale).reshape(n, 8, 1), (dmin * minimum).reshape(n, 8, 1)
    q = _unpack(blocks[:, 16:144].reshape(n, 4, 32), 4, 2).reshape(n, 8, 32).cast(dtypes.float32)
    return (dl * q - ml).reshape(n, 256)


def _q5_k(blocks: Tensor) -> Tensor:
    # d, dmin: f16, scales[12] as Q4_K, qh[32] (bit s of qh[l] is the 5th bit of value 32s + l), qs[128] as Q4_K
    n = blocks.shape[0]
    d, dmin = _f16(blocks, 0), _f16(blocks, 2)
    scale, minimum = _k_scales(blocks[:, 4:16])
    dl, ml = (d * scale).reshape(n, 8, 1), (dmin * minimum).reshape(n, 8, 1)
    low = _unpack(blocks[:, 48:176].reshape(n, 4, 32), 4, 2).reshape(n, 8, 32)
    high = _unpack(blocks[:, 16:48], 1, 1)
    q = (low | (high << 4)).cast(dtypes.float32)
    return (dl * q - ml).reshape(n, 256)


def _q6_k(blocks: Tensor) -> Tensor:
    # ql[128] (low 4 bits: value 128h + 32k + l is nibble k // 2 of ql[64h + 32(k % 2) + l]), qh[64] (high 2
    # bits: bits 2k of qh[32h + l]), scales: int8[16] (one per 16 values), d: f16; x = d * scale * (q - 32)
    n = blocks.shape[0]
    scale = blocks[:, 192:208].bitcast(dtypes.int8).cast(dtypes.float32)
    dl = (_f16(blocks, 208) * scale).reshape(n, 16, 1)
    low = _unpack(blocks[:, 0:128].reshape(n, 2, 2, 32), 4, 2).reshape(n, 8, 32)
    high = _unpack(blocks[:, 128:192].reshape(n, 2, 32), 2, 2).reshape(n, 8, 32)
    q = (low | (high << 4)).cast(dtypes.float32) - 32
    return (dl * q.reshape(n, 16, 16)).reshape(n, 256)


def _q8_k(blocks: Tensor) -> Tensor:
    # d: float32, qs: int8[256], bsums: int16[16] (sums of 16 quants, for dot products only); x = d * q
    d = blocks[:, 0:4].bitcast(dtypes.float32)
    return d * blocks[:, 4:260].bitcast(dtypes.int8).cast(dtypes.float32)


_TYPES: dict[int, _Plain | _Blocks] = {
    0: _Plain(dtypes.float32),
    1: _Plain(dtypes.float16),
    24: _Plain(dtypes.int8),
    25: _Plain(dtypes.int16),
    26: _Plain(dtypes.int32),
    27: _Plain(dtypes.int64),
    28: _Plain(dtypes.float64),
    30: _Plain(dtypes.bfloat16),
    2: _Blocks(32, 18, _q4_0),
    3: _Blocks(32, 20, _q4_1),
    6: _Blocks(32, 22, _q5_0),
    7: _Blocks(32, 24, _q5_1),
    8: _Blocks(32, 34, _q8_0),
    10: _Blocks(256, 84, _q2_k),
    11: _Blocks(256, 110, _q3_k),
    12: _Blocks(256, 144, _q4_k),
    13: _Blocks(256, 176, _q5_k),
    14: _Blocks(256, 210, _q6_k),
    15: _Blocks(256, 292, _q8_k),
}

_SUPPORTED = tuple(_TYPE_NAMES[t] for t in sorted(_TYPES))

# *** reading the file ***


def _file_bytes(path: str, offset: int, nbytes: int, device: str | None) -> Tensor:
    """The `nbytes` bytes of the file at `offset`, as a 1-D uint8 Tensor on `device`: a window of the file on the
    DISK device (a memory map) copied to `device`, so only these bytes are read, when the tensor is realized."""
    if nbytes == 0:
        return Tensor(np.zeros(0, np.uint8), device=device)
    file = Tensor.empty(offset + nbytes, dtype=dtypes.uint8, device=f"disk:{path}")
    return file[offset:].to(device_name(device))


class _Reader:
    """A little-endian reader of the header, with errors that name the file and what was being read."""

    def __init__(self, f: io.BufferedReader, path: str, size: int):
        self.f, self.path, self.size = f, path, size

    def read(self, n: int, what: str) -> bytes:
        pos = self.f.tell()
        if n > self.size - pos:
            raise ArgumentError(
                f"{_OP}: {self.path} is truncated: {what} needs {n} bytes at offset {pos}, "
                f"the file has {self.size} bytes"
            )
        return self.f.read(n)

    def scalar(self, fmt: str, what: str) -> Any:
        return struct.unpack("<" + fmt, self.read(struct.calcsize(fmt), what))[0]

    def string(self, what: str) -> str:
        raw = self.read(self.scalar("Q", what), what)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ArgumentError(f"{_OP}: {self.path}: {what} is not valid UTF-8 ({e})") from None

    def value(self, vtype: int, what: str) -> Any:
        if vtype in _SCALARS:
            return self.scalar(_SCALARS[vtype][1], what)
        if vtype == _STRING:
            return self.string(what)
        if vtype == _ARRAY:
            return self.array(what)
        raise ArgumentError(f"{_OP}: {self.path}: {what} has an unknown value type {vtype}")

    def array(self, what: str) -> list[Any]:
        etype, count = self.scalar("I", what), self.scalar("Q", what)
        if etype not in _MIN_SIZE:
            raise ArgumentError(f"{_OP}: {self.path}: {what} is an array of an unknown value type {etype}")
        if count * _MIN_SIZE[etype] > self.size - self.f.tell():
            raise ArgumentError(
                f"{_OP}: {self.path} is truncated: {what} is an array of {count} elements of type "
                f"{_value_type_name(etype)}, more than the file holds"
            )
        if etype in _SCALARS:  # numbers in one read
            fmt = _SCALARS[etype][1]
            dt = np.dtype(bool) if fmt == "?" else np.dtype("<" + fmt)
            return np.frombuffer(self.read(count * dt.itemsize, what), dtype=dt).tolist()
        return [self.value(etype, f"{what}[{i}]") for i in range(count)]


class _TensorInfo(NamedTuple):
    name: str
    dims: tuple[int, ...]  # innermost first, as in the file
    type: int
    offset: int


def _spec(info: _TensorInfo, path: str) -> _Plain | _Blocks:
    spec = _TYPES.get(info.type)
    if spec is None:
        name = _TYPE_NAMES.get(info.type, f"unknown type {info.type}")
        raise ArgumentError(
            f"{_OP}: tensor {info.name!r} in {path} has GGML type {name}, which is not supported "
            f"(supported: {', '.join(_SUPPORTED)})"
        )
    return spec


def _nbytes(info: _TensorInfo, spec: _Plain | _Blocks, path: str) -> int:
    count = math.prod(info.dims)
    if isinstance(spec, _Plain):
        return count * spec.dtype.itemsize
    row = info.dims[0] if info.dims else 1
    if row % spec.elements:
        raise ArgumentError(
            f"{_OP}: tensor {info.name!r} in {path} has type {_TYPE_NAMES[info.type]} and dims {info.dims}: the "
            f"innermost dim ({row}) must be a multiple of the block size {spec.elements}"
        )
    return count // spec.elements * spec.nbytes


def _header(path: str) -> tuple[dict[str, Any], list[_TensorInfo], int, int]:
    """The metadata, the tensor infos, the start of the data section and the file's size."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        r = _Reader(f, path, size)
        magic = f.read(4)
        if magic != _MAGIC:
            raise ArgumentError(f"{_OP}: {path} is not a GGUF file (it starts with {magic!r}, not {_MAGIC!r})")
        version = r.scalar("I", "the version")
        if version not in _VERSIONS:
            if int.from_bytes(version.to_bytes(4, "little"), "big") in _VERSIONS:
                raise ArgumentError(f"{_OP}: {path} is a big-endian GGUF file, which is not supported")
            raise ArgumentError(f"{_OP}: {path} has GGUF version {version}; supported versions: 2, 3")
        n_tensors, n_kv = r.scalar("Q", "the tensor count"), r.scalar("Q", "the metadata count")
        metadata: dict[str, Any] = {}
        for i in range(n_kv):
            key = r.string(f"metadata key {i}")
            vtype = r.scalar("I", f"the value type of metadata {key!r}")
            if key in metadata:
                raise ArgumentError(f"{_OP}: {path} has the metadata key {key!r} twice")
            metadata[key] = r.value(vtype, f"metadata {key!r}")
        infos: list[_TensorInfo] = []
        for i in range(n_tensors):
            name = r.string(f"the name of tensor {i}")
            what = f"the info of tensor {name!r}"
            n_dims = r.scalar("I", what)
            if n_dims * 8 > size - f.tell():
                raise ArgumentError(f"{_OP}: {path} is truncated: tensor {name!r} claims {n_dims} dims")
            dims = tuple(r.scalar("Q", what) for _ in range(n_dims))
            infos.append(_TensorInfo(name, dims, r.scalar("I", what), r.scalar("Q", what)))
        alignment = metadata.get("general.alignment", _DEFAULT_ALIGNMENT)
        if not isinstance(alignment, int) or isinstance(alignment, bool) or alignment <= 0:
            raise ArgumentError(f"{_OP}: {path}: general.alignment must be a positive integer, got {alignment!r}")
        data_start = -(-f.tell() // alignment) * alignment
    return metadata, infos, data_start, size


def gguf_load(path: str | os.PathLike, device: str | None = None) -> tuple[dict[str, Any], dict[str, Tensor]]:
    """The metadata (key -> int, float, bool, str or list) and the tensors (name -> Tensor on `device`) of a
    GGUF file. Shapes are llama.cpp's dims reversed (outermost first, as the gguf package reports them);
    quantized tensors are dequantized by lazy Tensor ops into float32, plain ones keep their dtype.

    >>> import tempfile, os, struct
    >>> path = os.path.join(tempfile.mkdtemp(), "tiny.gguf")
    >>> def s(text): return struct.pack("<Q", len(text)) + text.encode()
    >>> header = b"GGUF" + struct.pack("<IQQ", 3, 1, 1) + s("answer") + struct.pack("<II", 4, 42)
    >>> info = s("w") + struct.pack("<IQQIQ", 2, 3, 2, 0, 0)  # F32 with dims (3, 2): shape (2, 3)
    >>> with open(path, "wb") as f:
    ...     _ = f.write(header + info + bytes(-len(header + info) % 32) + struct.pack("<6f", *range(6)))
    >>> metadata, tensors = gguf_load(path)
    >>> metadata, tensors["w"].tolist()
    ({'answer': 42}, [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]])
    """
    path = existing_file(path, _OP, "GGUF")
    metadata, infos, data_start, size = _header(path)
    # every tensor is checked before any is read, so a bad file fails before any work
    plan: list[tuple[_TensorInfo, _Plain | _Blocks, int]] = []
    seen: set[str] = set()
    for info in infos:
        if info.name in seen:
            raise ArgumentError(f"{_OP}: {path} has two tensors named {info.name!r}")
        seen.add(info.name)
        spec = _spec(info, path)
        nbytes = _nbytes(info, spec, path)
        if data_start + info.offset + nbytes > size:
            raise ArgumentError(
                f"{_OP}: {path} is truncated: tensor {info.name!r} needs bytes {data_start + info.offset} to "
                f"{data_start + info.offset + nbytes}, the file has {size}"
            )
        plan.append((info, spec, nbytes))
    tensors: dict[str, Tensor] = {}
    for info, spec, nbytes in plan:
        raw = _file_bytes(path, data_start + info.offset, nbytes, device)
        shape = tuple(reversed(info.dims))
        if isinstance(spec, _Plain):
            out = raw.bitcast(spec.dtype) if nbytes else Tensor.empty(0, dtype=spec.dtype, device=device)
        else:
            out = spec.dequantize(raw.reshape(-1, spec.nbytes)) if nbytes else Tensor.empty(0, device=device)
        tensors[info.name] = out.reshape(shape)
    return metadata, tensors


# *** writing a file ***

_PLAIN_TYPE_IDS = {spec.dtype: tid for tid, spec in _TYPES.items() if isinstance(spec, _Plain)}


def _encode_value(value: Any, key: str) -> tuple[int, bytes]:
    """(value type id, bytes) of a metadata value: bool, int (UINT32 when it fits, else INT64), float (FLOAT32), str,
    or a non-empty list of one of these."""
    if isinstance(value, bool):
        return 7, struct.pack("<?", value)
    if isinstance(value, int):
        if 0 <= value < 2**32:
            return 4, struct.pack("<I", value)
        if -(2**63) <= value < 2**63:
            return 11, struct.pack("<q", value)
        raise ArgumentError(f"gguf_save: metadata {key!r}: {value} does not fit in 64 bits")
    if isinstance(value, float):
        return 6, struct.pack("<f", value)
    if isinstance(value, str):
        raw = value.encode("utf-8")
        return _STRING, struct.pack("<Q", len(raw)) + raw
    if isinstance(value, (list, tuple)) and value:
        # one element type for the whole array: the widest any element needs
        encoded = [_encode_value(v, key) for v in value]
        types = {t for t, _ in encoded}
        if types == {4, 11}:
            encoded = [(11, struct.pack("<q", v)) for v in value]
        elif len(types) != 1 or _ARRAY in types:
            raise ArgumentError(f"gguf_save: metadata {key!r}: an array must hold values of one scalar or string type")
        return _ARRAY, struct.pack("<IQ", encoded[0][0], len(value)) + b"".join(b for _, b in encoded)
    raise ArgumentError(
        f"gguf_save: metadata {key!r}: a value must be a bool, int, float, str or a non-empty list of them, got "
        f"{type(value).__name__}"
    )


def _key_string(text: str) -> bytes:
    raw = text.encode("utf-8")
    return struct.pack("<Q", len(raw)) + raw


def gguf_save(path: str | os.PathLike, metadata: dict[str, Any], tensors: dict[str, Tensor | np.ndarray]) -> None:
    """Write a GGUF file (version 3) of `metadata` (key -> bool, int, float, str, or a list of one of these) and
    `tensors` (name -> Tensor or numpy array of a plain type, stored as it is: F32, F16, F64, I8 ... I64).
    Integers are written as UINT32 where they fit, else INT64, floats as FLOAT32. `gguf_load` reads it back.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "small.gguf")
    >>> gguf_save(path, {"general.name": "small", "sizes": [1, 2]}, {"w": Tensor([[1.0, 2.0]])})
    >>> metadata, tensors = gguf_load(path)
    >>> metadata["sizes"], tensors["w"].tolist()
    ([1, 2], [[1.0, 2.0]])
    """
    alignment = metadata.get("general.alignment", _DEFAULT_ALIGNMENT)
    header = bytearray(_MAGIC + struct.pack("<IQQ", 3, len(tensors), len(metadata)))
    for key, value in metadata.items():
        vtype, raw = _encode_value(value, key)
        header += _key_string(key) + struct.pack("<I", vtype) + raw
    datas: list[bytes] = []
    offset = 0
    for name, value in tensors.items():
        array = value.numpy() if isinstance(value, Tensor) else np.asarray(value)
        dtype = dtypes.fields().get(array.dtype.name)
        if dtype not in _PLAIN_TYPE_IDS:
            raise ArgumentError(
                f"gguf_save: tensor {name!r} has dtype {array.dtype}; the types written are "
                f"{', '.join(d.name for d in _PLAIN_TYPE_IDS if d != dtypes.bfloat16)}"
            )
        dims = tuple(reversed(array.shape))  # innermost first
        header += _key_string(name) + struct.pack("<I", len(dims)) + struct.pack(f"<{len(dims)}Q", *dims)
        header += struct.pack("<IQ", _PLAIN_TYPE_IDS[dtype], offset)
        raw = np.ascontiguousarray(array).tobytes()
        datas.append(raw + bytes(-len(raw) % alignment))
        offset += len(datas[-1])
    with open(os.fspath(path), "wb") as f:
        f.write(bytes(header) + bytes(-len(header) % alignment))
        f.write(b"".join(datas))
