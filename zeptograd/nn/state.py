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
Files use the safetensors format through the `safetensors` package (imported when a file is read or
written), so PyTorch and other frameworks read what zeptograd writes and the other way round.
`gguf_load` reads llama.cpp's GGUF files (zeptograd.nn.gguf, no package needed), quantized tensors dequantized
by Tensor ops.
"""

from __future__ import annotations

import os
import types
from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np

from zeptograd.dtype import dtypes
from zeptograd.helpers import ArgumentError
from zeptograd.nn.gguf import gguf_load
from zeptograd.tensor import Tensor

__all__ = [
    "get_state_dict",
    "get_parameters",
    "load_state_dict",
    "LoadResult",
    "safe_save",
    "safe_load",
    "safe_load_metadata",
    "gguf_load",
]

# objects whose attributes are not model state: classes, modules and functions have a __dict__ too
_NOT_STATE = (type, types.ModuleType, types.FunctionType, types.MethodType, types.BuiltinFunctionType)


def get_state_dict(obj: Any, prefix: str = "") -> dict[str, Tensor]:
    """Every Tensor reachable from `obj` by name: attributes (an object's `__dict__`, namedtuple fields),
    list and tuple items (keys "0", "1", ...) and dict items (their keys), joined with dots. A tensor reachable
    by two names is listed under both (tied weights); a reference cycle is not followed.

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


def load_state_dict(
    model: Any, state_dict: Mapping[str, Tensor | np.ndarray], strict: bool = True, verbose: bool = False
) -> LoadResult:
    """Assign `state_dict`'s values to `model`'s tensors of the same names (cast to each tensor's dtype and
    moved to its device), then realize them all. Everything is checked before anything is assigned, so a
    failed load leaves the model as it was. With `strict`, the keys must be the model's keys exactly (a
    RuntimeError lists the missing and the unexpected ones); with strict=False the keys on one side only are
    skipped and returned. Shapes must match exactly either way (a RuntimeError lists the mismatches); a value
    that is not a Tensor or numpy array is a TypeError. `verbose` prints a line per tensor loaded.

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
    wrong_type, wrong_shape = [], []
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
    if wrong_type:
        problems.append(f"values zeptograd cannot load ({'; '.join(wrong_type)})")
    if wrong_shape:
        problems.append(f"shape mismatches ({'; '.join(wrong_shape)})")
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

# the safetensors dtype names zeptograd can hold (bfloat16 has no host storage here yet)
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
    "F32": dtypes.float32,
    "F64": dtypes.float64,
}


def _safetensors(op: str) -> Any:
    try:
        import safetensors
    except ImportError:
        raise ImportError(f"{op} needs the safetensors package: pip install safetensors") from None
    return safetensors


def _path(path: Any, op: str) -> str:
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{op}: path must be a str or os.PathLike, got {type(path).__name__}")
    return os.fspath(path)


def safe_save(
    tensors: Mapping[str, Tensor], path: str | os.PathLike, metadata: Mapping[str, str] | None = None
) -> None:
    """Write `tensors` (name -> Tensor; realized first) to a safetensors file, with optional text `metadata`.

    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "model.safetensors")
    >>> safe_save({"w": Tensor([[1.0, 2.0]]), "step": Tensor(3)}, path, metadata={"epoch": "1"})
    >>> {k: v.tolist() for k, v in safe_load(path).items()}
    {'step': 3, 'w': [[1.0, 2.0]]}
    """
    path = _path(path, "safe_save")
    if not isinstance(tensors, Mapping):
        raise TypeError(f"safe_save: tensors must be a dict of name -> Tensor, got {type(tensors).__name__}")
    for key, t in tensors.items():
        if not isinstance(key, str):
            raise TypeError(f"safe_save: the names must be strings, got {key!r}")
        if not isinstance(t, Tensor):
            raise TypeError(f"safe_save: {key!r} is a {type(t).__name__}, not a Tensor")
    if metadata is not None:
        if not isinstance(metadata, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()
        ):
            raise TypeError(f"safe_save: metadata must be a dict of str -> str, got {metadata!r}")
        metadata = dict(metadata)
    st = _safetensors("safe_save")
    import safetensors.numpy

    Tensor.realize(*tensors.values())
    arrays = {key: t.numpy() for key, t in tensors.items()}  # fresh C-ordered copies, as the writer needs
    try:
        safetensors.numpy.save_file(arrays, path, metadata=metadata)
    except st.SafetensorError as e:
        raise ArgumentError(f"safe_save: cannot write {path}: {e}") from None


def _open(path: str, op: str) -> Any:
    """The safetensors file at `path`, opened for reading, with clear errors for a missing or bad file."""
    st = _safetensors(op)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{op}: no such file: {path}")
    if os.path.isdir(path):
        raise IsADirectoryError(f"{op}: {path} is a directory, not a safetensors file")
    try:
        return st.safe_open(path, framework="np")
    except st.SafetensorError as e:
        raise ArgumentError(f"{op}: {path} is not a valid safetensors file ({e})") from None


def safe_load(path: str | os.PathLike, device: str | None = None) -> dict[str, Tensor]:
    """The tensors of a safetensors file, by name (realized, on `device`; the default device if None).

    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "x.safetensors")
    >>> safe_save({"x": Tensor([1, 2], dtype="int64")}, path)
    >>> safe_load(path)["x"].dtype
    dtypes.int64
    """
    path = _path(path, "safe_load")
    st = _safetensors("safe_load")
    out: dict[str, Tensor] = {}
    with _open(path, "safe_load") as f:
        for key in f.keys():  # noqa: SIM118 (safe_open is not iterable)
            try:
                dtype_name = f.get_slice(key).get_dtype()
                if dtype_name not in _SAFETENSORS_DTYPES:
                    raise TypeError(
                        f"safe_load: {key!r} in {path} has dtype {dtype_name}, which zeptograd cannot hold "
                        f"(supported: {', '.join(_SAFETENSORS_DTYPES)})"
                    )
                array = f.get_tensor(key)
            except st.SafetensorError as e:
                raise ArgumentError(f"safe_load: {path} is not a valid safetensors file ({key!r}: {e})") from None
            out[key] = Tensor(array, dtype=_SAFETENSORS_DTYPES[dtype_name], device=device)
    return out


def safe_load_metadata(path: str | os.PathLike) -> dict[str, str]:
    """The text metadata of a safetensors file (empty when it has none); reads only the header.

    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "m.safetensors")
    >>> safe_save({"x": Tensor([1.0])}, path, metadata={"note": "hi"})
    >>> safe_load_metadata(path)
    {'note': 'hi'}
    """
    path = _path(path, "safe_load_metadata")
    with _open(path, "safe_load_metadata") as f:
        return dict(f.metadata() or {})
