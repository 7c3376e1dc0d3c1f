"""Model state: the named tensors of a model, loading them back, and safetensors files.

>>> from zeptograd.nn.state import get_state_dict, load_state_dict
>>> class Model:
...     def __init__(self):
...         self.layers = [Tensor.zeros(2).contiguous().realize(), {"w": Tensor.ones(1, 2).contiguous().realize()}]
>>> m = Model()
>>> list(get_state_dict(m))
['layers.0', 'layers.1.w']
>>> _ = load_state_dict(m, {"layers.0": Tensor([1.0, 2.0]), "layers.1.w": Tensor([[3.0, 4.0]])})
>>> m.layers[0].tolist()
[1.0, 2.0]

A model is any object: `get_state_dict` walks its attributes, lists and tuples (keys 0, 1, ...) and dicts
(their keys), as tinygrad does, so the names match PyTorch's for the same structure ("layers.0.weight").
Files use the safetensors format (read and written here, without the `safetensors` package), so PyTorch and
other frameworks read what zeptograd writes and the other way round. A file is read through the DISK device
(runtime/ops_disk.py): each tensor is a view of the file's memory map, and only the tensors copied are read.
`torch_load` (nn/torch_load.py) reads PyTorch's `torch.save` checkpoints the same way, and `gguf_load`
(nn/gguf.py) llama.cpp's GGUF files, quantized tensors dequantized by Tensor ops.
"""

from __future__ import annotations

import json
import os
import struct
import types
from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np

from zeptograd.dtype import NARROW_FLOATS, DType, dtypes, np_dtype
from zeptograd.engine.disk import disk_window, is_disk
from zeptograd.engine.realize import device_name
from zeptograd.helpers import ArgumentError, existing_file, path_arg
from zeptograd.nn.gguf import gguf_load, gguf_save
from zeptograd.nn.torch_load import torch_load
from zeptograd.tensor import Tensor
from zeptograd.uop.buffers import view_of
from zeptograd.uop.shape import prod

__all__ = [
    "get_state_dict",
    "get_parameters",
    "load_state_dict",
    "LoadResult",
    "safe_save",
    "safe_load",
    "safe_load_metadata",
    "gguf_load",
    "gguf_save",
    "torch_load",
]

# objects whose attributes are not model state: classes, modules and functions have a __dict__ too
_NOT_STATE = (type, types.ModuleType, types.FunctionType, types.MethodType, types.BuiltinFunctionType)


def get_state_dict(obj: Any, prefix: str = "") -> dict[str, Tensor]:
    """Every Tensor reachable from `obj` by name: attributes (an object's `__dict__`, namedtuple fields),
    list and tuple items (keys "0", "1", ...) and dict items (their keys), joined with dots. A tensor reachable
    by two names is listed under both (tied weights); a reference cycle is not followed. Objects whose class sets
    `persistent = False` (a `KVCache`) are working memory, not state, and are left out.

    >>> class Net:
    ...     def __init__(self):
    ...         self.w = Tensor([1.0])
    ...         self.blocks = [{"b": Tensor([2.0])}]
    >>> list(get_state_dict(Net()))
    ['w', 'blocks.0.b']
    >>> list(get_state_dict(Net(), prefix="net."))
    ['net.w', 'net.blocks.0.b']
    """
    out: dict[str, Tensor] = {}
    _walk(obj, prefix, out, set())
    return out


def _walk(obj: Any, prefix: str, out: dict[str, Tensor], path: set[int]) -> None:
    if isinstance(obj, Tensor):
        out[prefix.rstrip(".")] = obj
        return
    if isinstance(obj, (str, bytes, int, float, complex, bool, np.ndarray, np.generic, _NOT_STATE)) or obj is None:
        return
    if getattr(type(obj), "persistent", True) is False:  # working memory, not state: a KVCache
        return
    if id(obj) in path:  # a back reference (a child holding its parent): its tensors are listed already
        return
    path.add(id(obj))
    try:
        if hasattr(obj, "_asdict") and isinstance(obj, tuple):  # a namedtuple: its fields by name
            items: Any = obj._asdict().items()
        elif isinstance(obj, (list, tuple)):
            items = enumerate(obj)
        elif isinstance(obj, Mapping):
            items = obj.items()
        elif isinstance(getattr(obj, "__dict__", None), dict):
            items = vars(obj).items()
        else:
            return
        for key, value in list(items):
            _walk(value, f"{prefix}{key}.", out, path)
    finally:
        path.discard(id(obj))


def get_parameters(obj: Any) -> list[Tensor]:
    """The tensors of `get_state_dict(obj)`, each once (a tensor under two names counts once), in order.

    >>> w = Tensor([1.0])
    >>> len(get_parameters({"a": w, "b": [w, Tensor([2.0])]}))
    2
    """
    return list(dict.fromkeys(get_state_dict(obj).values()))  # a Tensor hashes by identity


class LoadResult(NamedTuple):
    """The keys `load_state_dict` skipped (only with strict=False), as torch returns them."""

    missing_keys: list[str]
    unexpected_keys: list[str]


def _lossy(src: DType, dst: DType) -> bool:
    """Would casting values of dtype `src` to `dst` lose what they are: floats to an integer or bool dtype, integers
    to bool?"""
    if dtypes.is_float(src):
        return not dtypes.is_float(dst)
    return dtypes.is_int(src) and dtypes.is_bool(dst)


def load_state_dict(
    model: Any, state_dict: Mapping[str, Tensor | np.ndarray], strict: bool = True, verbose: bool = False
) -> LoadResult:
    """Assign `state_dict`'s values to `model`'s tensors of the same names (cast to each tensor's dtype and
    moved to its device), then realize them all. Everything is checked before anything is assigned, so a
    failed load leaves the model as it was. With `strict`, the keys must be the model's keys exactly (a
    RuntimeError lists the missing and the unexpected ones); with strict=False the keys on one side only are
    skipped and returned. Shapes must match exactly either way (a RuntimeError lists the mismatches), and so must
    the kinds of dtype where a cast would lose the values (floats into an integer or bool tensor, integers into a
    bool tensor; a RuntimeError names each key); other dtypes are cast, as torch's copy casts. A value that is not
    a Tensor or numpy array is a TypeError. Values may be DISK tensors (`safe_load(path, device="disk")`,
    `torch_load(path, device="disk")`): each is read from its file as it is copied. `verbose` prints a line per
    tensor loaded.

    >>> class Net:
    ...     def __init__(self):
    ...         self.w = Tensor.zeros(2).contiguous().realize()
    >>> net = Net()
    >>> load_state_dict(net, {"w": np.array([1, 2])})
    LoadResult(missing_keys=[], unexpected_keys=[])
    >>> net.w.tolist()
    [1.0, 2.0]
    """
    if not isinstance(state_dict, Mapping):
        raise TypeError(f"load_state_dict: state_dict must be a dict of tensors, got {type(state_dict).__name__}")
    targets = get_state_dict(model)
    missing = [k for k in targets if k not in state_dict]
    unexpected = [k for k in state_dict if k not in targets]
    problems = []
    if strict and missing:
        problems.append(f"missing keys {missing}")
    if strict and unexpected:
        problems.append(f"unexpected keys {unexpected}")
    # every value is checked and converted before the first assignment
    values: dict[str, Tensor] = {}
    wrong_type, wrong_shape, wrong_dtype = [], [], []
    for key, target in targets.items():
        if key not in state_dict:
            continue
        value = state_dict[key]
        if not isinstance(value, (Tensor, np.ndarray)):
            wrong_type.append(f"{key} is a {type(value).__name__}")
        elif value.shape != target.shape:
            wrong_shape.append(f"{key}: the model has {target.shape}, the state dict {value.shape}")
        elif isinstance(value, np.ndarray):
            try:
                values[key] = Tensor(value, device=target.device)
            except TypeError as e:
                wrong_type.append(f"{key}: {e}")
        else:
            values[key] = value
        if key in values and _lossy(values[key].dtype, target.dtype):
            wrong_dtype.append(f"{key}: the model has {target.dtype.name}, the state dict {values[key].dtype.name}")
    if wrong_type:
        problems.append(f"values zeptograd cannot load ({'; '.join(wrong_type)})")
    if wrong_shape:
        problems.append(f"shape mismatches ({'; '.join(wrong_shape)})")
    if wrong_dtype:
        problems.append(f"dtype mismatches that a cast would lose values in ({'; '.join(wrong_dtype)})")
    if problems:
        # RuntimeError, as torch's load_state_dict raises for keys and shapes
        kind = TypeError if wrong_type and len(problems) == 1 else RuntimeError
        raise kind(f"load_state_dict: {' and '.join(problems)}; nothing was loaded")
    for key, value in values.items():
        target = targets[key]
        if verbose:
            print(f"load_state_dict: {key} {target.shape} {target.dtype.name}")
        # a tensor under two names (tied weights) is assigned twice: the later name wins, as in torch
        target.assign(value.to(target.device).cast(target.dtype))
    Tensor.realize(*dict.fromkeys(targets[k] for k in values))
    return LoadResult(missing, unexpected)


# *** safetensors files ***

# the safetensors dtype names, and zeptograd's dtype of each
_SAFETENSORS_DTYPES = {
    "BOOL": dtypes.bool,
    "U8": dtypes.uint8,
    "I8": dtypes.int8,
    "U16": dtypes.uint16,
    "I16": dtypes.int16,
    "U32": dtypes.uint32,
    "I32": dtypes.int32,
    "U64": dtypes.uint64,
    "I64": dtypes.int64,
    "F16": dtypes.float16,
    "BF16": dtypes.bfloat16,
    "F8_E4M3": dtypes.fp8e4m3,
    "F8_E5M2": dtypes.fp8e5m2,
    "F32": dtypes.float32,
    "F64": dtypes.float64,
}
_SAFETENSORS_NAMES = {dt: name for name, dt in _SAFETENSORS_DTYPES.items()}
_HEADER_LIMIT = 100 << 20  # bytes of JSON header, as the safetensors package limits it


def safe_save(
    tensors: Mapping[str, Tensor], path: str | os.PathLike, metadata: Mapping[str, str] | None = None
) -> None:
    """Write `tensors` (name -> Tensor; realized first) to a safetensors file, with optional text `metadata`.
    The format: an 8-byte little-endian header length, a JSON header (each tensor's dtype, shape and byte range;
    `__metadata__`), then the tensors' bytes; each tensor starts at a multiple of its item size.

    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "model.safetensors")
    >>> safe_save({"w": Tensor([[1.0, 2.0]]), "step": Tensor(3)}, path, metadata={"epoch": "1"})
    >>> {k: v.tolist() for k, v in safe_load(path).items()}
    {'step': 3, 'w': [[1.0, 2.0]]}
    """
    path = path_arg(path, "safe_save")
    if not isinstance(tensors, Mapping):
        raise TypeError(f"safe_save: tensors must be a dict of name -> Tensor, got {type(tensors).__name__}")
    for key, t in tensors.items():
        if not isinstance(key, str):
            raise TypeError(f"safe_save: the names must be strings, got {key!r}")
        if not isinstance(t, Tensor):
            raise TypeError(f"safe_save: {key!r} is a {type(t).__name__}, not a Tensor")
        if key == "__metadata__":
            raise ValueError("safe_save: '__metadata__' is the header's metadata entry, not a tensor name")
        if t.dtype not in _SAFETENSORS_NAMES:
            raise TypeError(f"safe_save: {key!r} has dtype {t.dtype.name}, which safetensors files cannot hold")
    text_only = metadata is None or (
        isinstance(metadata, Mapping) and all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items())
    )
    if not text_only:
        raise TypeError(f"safe_save: metadata must be a dict of str -> str, got {metadata!r}")
    # the widest dtypes first: with the header padded to 8 bytes, every tensor starts aligned to its item size
    order = sorted(tensors, key=lambda k: (-tensors[k].dtype.itemsize, k))
    header: dict[str, Any] = {} if metadata is None else {"__metadata__": dict(metadata)}
    offset = 0
    for key in order:
        t = tensors[key]
        header[key] = {"dtype": _SAFETENSORS_NAMES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, 0]}
        offset += t.nbytes()
        header[key]["data_offsets"][1] = offset
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    if computed := [t for t in tensors.values() if not is_disk(t.device)]:
        Tensor.realize(*computed)
    try:
        with open(path, "wb") as f:
            f.write(struct.pack("<Q", len(text)))
            f.write(text)
            for key in order:
                f.write(_raw_bytes(tensors[key]))
    except OSError as e:
        raise ArgumentError(f"safe_save: cannot write {path}: {e}") from None


def _raw_bytes(t: Tensor) -> bytes:
    """The bytes of `t`'s values in C order, little-endian (bfloat16 and fp8 as their bits)."""
    if is_disk(t.device):  # a view of another file: its values are copied out first
        t = t.to("CPU")
    if t.dtype in NARROW_FLOATS:
        t = t.bitcast(NARROW_FLOATS[t.dtype].storage)
    return np.ascontiguousarray(t.numpy()).astype(np_dtype(t.dtype).newbyteorder("<"), copy=False).tobytes()


class _Entry(NamedTuple):
    dtype: DType
    shape: tuple[int, ...]
    begin: int  # byte offset in the file


def _safetensors_header(path: str, op: str) -> tuple[dict[str, _Entry], dict[str, str]]:
    """The tensors (dtype, shape, byte offset in the file) and the metadata of the safetensors file at `path`; reads
    the header only. Anything malformed (a truncated file, bad JSON, a byte range outside the data) is a
    ValueError naming the file."""
    size = os.path.getsize(existing_file(path, op, "safetensors"))

    def bad(why: str) -> ArgumentError:
        return ArgumentError(f"{op}: {path} is not a valid safetensors file ({why})")

    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise bad(f"{size} bytes, shorter than the 8-byte header length")
        (n,) = struct.unpack("<Q", head)
        if n > min(size - 8, _HEADER_LIMIT):
            raise bad(f"a header of {n} bytes in a file of {size}")
        text = f.read(n)
    try:
        header = json.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise bad(f"the header is not JSON: {e}") from None
    if not isinstance(header, dict):
        raise bad(f"the header is a JSON {type(header).__name__}, not an object")
    metadata = header.pop("__metadata__", None) or {}
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise bad("__metadata__ is not an object of strings")
    data_start, data_len = 8 + n, size - 8 - n
    entries: dict[str, _Entry] = {}
    for key, info in header.items():
        try:
            name, shape, (begin, end) = info["dtype"], info["shape"], info["data_offsets"]
            ints = [*shape, begin, end]
            if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in ints):
                raise TypeError
        except (TypeError, KeyError, ValueError):
            raise bad(f"{key!r}: each tensor needs a dtype, a shape and data_offsets [begin, end]") from None
        if name not in _SAFETENSORS_DTYPES:
            raise TypeError(
                f"{op}: {key!r} in {path} has dtype {name}, which zeptograd cannot hold "
                f"(supported: {', '.join(_SAFETENSORS_DTYPES)})"
            )
        dt = _SAFETENSORS_DTYPES[name]
        if not begin <= end <= data_len:
            raise bad(f"{key!r}: bytes {begin}..{end} lie outside the {data_len} bytes of data")
        if end - begin != prod(shape) * dt.itemsize:
            raise bad(f"{key!r}: {end - begin} bytes for a {tuple(shape)} tensor of {name}")
        entries[key] = _Entry(dt, tuple(shape), data_start + begin)
    return entries, metadata


def safe_load(path: str | os.PathLike, device: str | None = None) -> dict[str, Tensor]:
    """The tensors of a safetensors file, by name: realized on `device` (the default device if None), or, with
    `device="disk"`, left on the DISK device as views of the file, read only when copied (`t.to("CPU")`, or
    `load_state_dict`, which copies each to its model tensor's device): loading one tensor of a large file reads
    that tensor's bytes only. Dtypes: every safetensors dtype but complex (bfloat16 and F8_E4M3/F8_E5M2 too).

    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "x.safetensors")
    >>> safe_save({"x": Tensor([1, 2], dtype="int64"), "y": Tensor([0.5])}, path)
    >>> safe_load(path)["x"].dtype
    dtypes.int64
    >>> lazy = safe_load(path, device="disk")
    >>> lazy["y"].device.startswith("DISK:"), lazy["y"].to("CPU").tolist()
    (True, [0.5])
    """
    path = path_arg(path, "safe_load")
    entries, _ = _safetensors_header(path, "safe_load")
    lazy = isinstance(device, str) and device.upper() == "DISK"
    target = None if lazy else _device_of(device, "safe_load")
    disk = device_name(f"disk:{path}")
    out = {key: _disk_tensor(disk, e.begin, e.shape, e.dtype) for key, e in entries.items()}
    if target is not None and out:
        out = {key: t.to(target) for key, t in out.items()}
        Tensor.realize(*out.values())
    return out


def _device_of(device: str | None, op: str) -> str:
    name = device_name(device)
    if is_disk(name):
        raise ValueError(f"{op}: device {device!r}: the tensors are views of their own file with device='disk'")
    return name


def _disk_tensor(disk: str, offset: int, shape: tuple[int, ...], dtype: DType) -> Tensor:
    """A tensor of `shape` and `dtype` stored in C order at byte `offset` of DISK device `disk`'s file."""
    return Tensor(view_of(disk_window(disk, offset, prod(shape), dtype), shape), device=disk)


def safe_load_metadata(path: str | os.PathLike) -> dict[str, str]:
    """The text metadata of a safetensors file (empty when it has none); reads only the header.

    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "m.safetensors")
    >>> safe_save({"x": Tensor([1.0])}, path, metadata={"note": "hi"})
    >>> safe_load_metadata(path)
    {'note': 'hi'}
    """
    path = path_arg(path, "safe_load_metadata")
    return _safetensors_header(path, "safe_load_metadata")[1]
