"""ONNX ops of the ai.onnx.ml domain on numbers (Binarizer, ArrayFeatureExtractor, LabelEncoder, TreeEnsemble).

Their string forms (string keys or values) need a string dtype, which zeptograd lacks.

>>> import numpy as np
>>> from onnx import TensorProto, helper
>>> from zeptograd.onnx.runner import OnnxRunner
>>> x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])
>>> y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])
>>> node = helper.make_node("Binarizer", ["x"], ["y"], domain="ai.onnx.ml", threshold=0.5)
>>> model = helper.make_model(helper.make_graph([node], "g", [x], [y]),
...                           opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("ai.onnx.ml", 5)])
>>> OnnxRunner(model)({"x": np.array([0.2, 0.5, 0.7], np.float32)})["y"].tolist()
[0.0, 0.0, 1.0]
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from zeptograd.dtype import dtypes
from zeptograd.onnx.dtypes import from_numpy
from zeptograd.onnx.registry import onnx_op
from zeptograd.tensor import Tensor

ML = "ai.onnx.ml"


@onnx_op("Binarizer", 1, domain=ML)
def binarizer(x: Tensor, *, threshold: float = 0.0) -> Tensor:
    """Binarizer: 1 where x > threshold, else 0, in x's dtype."""
    return (x > threshold).cast(x.dtype)


@onnx_op("ArrayFeatureExtractor", 1, domain=ML)
def array_feature_extractor(x: Tensor, indices: Tensor) -> Tensor:
    """ArrayFeatureExtractor: x[..., indices] (the indices flattened, negative ones from the end); a 1-d x gives one
    row."""
    if indices.dtype not in (dtypes.int64, dtypes.int32):
        raise ValueError(f"indices must be int64 or int32, got {indices.dtype}")
    flat = indices.reshape(-1)
    picked = x[..., (flat < 0).where(flat + x.shape[-1], flat)]
    return picked.reshape(1, -1) if x.ndim == 1 else picked


def _values(attr: Any) -> list[Any] | None:
    """An attribute given as a list or as a constant tensor, as a Python list (None when absent)."""
    if attr is None:
        return None
    return attr.reshape(-1).tolist() if isinstance(attr, Tensor) else list(attr)


@onnx_op("LabelEncoder", 2, domain=ML)
def label_encoder_2(
    x: Tensor,
    *,
    default_float: float = -0.0,
    default_int64: int = -1,
    default_string: str = "_Unused",
    keys_floats: list[float] | None = None,
    keys_int64s: list[int] | None = None,
    keys_strings: list[str] | None = None,
    values_floats: list[float] | None = None,
    values_int64s: list[int] | None = None,
    values_strings: list[str] | None = None,
) -> Tensor:
    """LabelEncoder: each element of x replaced by the value of its key, or the default (numeric keys/values)."""
    return _label_encoder(x, default_float, default_int64, keys_floats or keys_int64s, keys_strings,
                          values_floats, values_int64s, values_strings, None, None)  # fmt: skip


@onnx_op("LabelEncoder", 4, domain=ML)
def label_encoder_4(
    x: Tensor,
    *,
    default_float: float = -0.0,
    default_int64: int = -1,
    default_string: str = "_Unused",
    default_tensor: Tensor | None = None,
    keys_floats: list[float] | None = None,
    keys_int64s: list[int] | None = None,
    keys_strings: list[str] | None = None,
    keys_tensor: Tensor | None = None,
    values_floats: list[float] | None = None,
    values_int64s: list[int] | None = None,
    values_strings: list[str] | None = None,
    values_tensor: Tensor | None = None,
) -> Tensor:
    """LabelEncoder-4: LabelEncoder-2 whose keys, values and default may be tensors of any numeric dtype."""
    keys = keys_floats or keys_int64s or _values(keys_tensor)
    return _label_encoder(x, default_float, default_int64, keys, keys_strings,
                          values_floats, values_int64s, values_strings, values_tensor, default_tensor)  # fmt: skip


def _label_encoder(
    x: Tensor,
    default_float: float,
    default_int64: int,
    keys: list[Any] | None,
    keys_strings: list[str] | None,
    values_floats: list[float] | None,
    values_int64s: list[int] | None,
    values_strings: list[str] | None,
    values_tensor: Tensor | None,
    default_tensor: Tensor | None,
) -> Tensor:
    if keys_strings or values_strings:
        raise NotImplementedError("string keys or values: zeptograd has no string dtype")
    if not keys:
        raise ValueError("LabelEncoder needs keys (keys_floats, keys_int64s or keys_tensor)")
    if values_tensor is not None:
        values, out_dtype = _values(values_tensor), values_tensor.dtype
        default = _values(default_tensor)[0] if default_tensor is not None else None
        if default is None:  # the spec's default for a tensor of values: -1 for integers, NaN for floats
            default = math.nan if dtypes.is_float(out_dtype) else -1
    elif values_floats:
        values, out_dtype, default = values_floats, dtypes.float32, default_float
    elif values_int64s:
        values, out_dtype, default = values_int64s, dtypes.int64, default_int64
    else:
        raise ValueError("LabelEncoder needs values (values_floats, values_int64s or values_tensor)")
    if len(keys) != len(values):
        raise ValueError(f"LabelEncoder has {len(keys)} keys but {len(values)} values")
    out = Tensor.full(x.shape, default, dtype=out_dtype, device=x.device)
    # later keys overwrite earlier ones, so a repeated key maps to its last value (as the spec says); NaN keys
    # match any NaN input
    for key, value in zip(keys, values, strict=True):
        hit = x.isnan() if isinstance(key, float) and math.isnan(key) else x == key
        out = hit.where(Tensor.full((), value, dtype=out_dtype, device=x.device), out)
    return out


_AGGREGATES = {0: "average", 1: "sum", 2: "min", 3: "max"}


@onnx_op("TreeEnsemble", 5, domain=ML)
def tree_ensemble(
    x: Tensor,
    *,
    aggregate_function: int = 1,
    leaf_targetids: list[int] | None = None,
    leaf_weights: Tensor | None = None,
    membership_values: Tensor | None = None,
    n_targets: int | None = None,
    nodes_falseleafs: list[int] | None = None,
    nodes_falsenodeids: list[int] | None = None,
    nodes_featureids: list[int] | None = None,
    nodes_hitrates: Tensor | None = None,
    nodes_missing_value_tracks_true: list[int] | None = None,
    nodes_modes: Tensor | None = None,
    nodes_splits: Tensor | None = None,
    nodes_trueleafs: list[int] | None = None,
    nodes_truenodeids: list[int] | None = None,
    post_transform: int = 0,
    tree_roots: list[int] | None = None,
) -> Tensor:
    """TreeEnsemble: per target, the sum (average, min, max) over the trees of the weight of the leaf x reaches."""
    del nodes_hitrates  # a hint for the order of evaluation, without effect on the result
    if x.ndim != 2:
        raise ValueError(f"X must be 2-d (batch, features), got {x.shape}")
    if aggregate_function not in _AGGREGATES:
        raise ValueError(f"aggregate_function must be 0, 1, 2 or 3, got {aggregate_function}")
    if post_transform != 0:
        raise NotImplementedError(f"post_transform={post_transform} (only NONE, 0, is supported)")
    required = (leaf_targetids, leaf_weights, n_targets, nodes_falseleafs, nodes_falsenodeids, nodes_featureids,
                nodes_modes, nodes_splits, nodes_trueleafs, nodes_truenodeids, tree_roots)  # fmt: skip
    if any(a is None for a in required):
        raise ValueError("TreeEnsemble needs the leaf_*, nodes_*, n_targets and tree_roots attributes")
    modes, splits, weights = _values(nodes_modes), _values(nodes_splits), _values(leaf_weights)
    n = len(modes)
    if not all(len(a) == n for a in (splits, nodes_featureids, nodes_truenodeids, nodes_falsenodeids)):
        raise ValueError("the nodes_* attributes must all have one entry per node")
    # decisions compare in float64 where the splits or X are float64, so no split is rounded
    wide = dtypes.float64 in (x.dtype, nodes_splits.dtype)
    calc = dtypes.float64 if wide else dtypes.float32
    np_calc = np.float64 if wide else np.float32
    cols = x.cast(calc)[:, from_numpy(np.asarray(nodes_featureids, np.int64), device=x.device)]  # (N, nodes)
    decision = _decisions(cols, modes, np.asarray(splits, np_calc), _values(membership_values), np_calc)
    tracks = nodes_missing_value_tracks_true or [0] * n
    if any(tracks):
        track = from_numpy(np.asarray(tracks, bool), device=x.device)
        decision = decision | (cols.isnan() & track)
    # every root-to-leaf path: a leaf is reached when x takes each of its path's branches
    paths = _paths(tree_roots, nodes_truenodeids, nodes_falsenodeids, nodes_trueleafs, nodes_falseleafs)
    on_true, on_false = np.zeros((n, len(paths)), np.float32), np.zeros((n, len(paths)), np.float32)
    for p, (_, steps) in enumerate(paths):
        for node, branch in steps:
            (on_true if branch else on_false)[node, p] += 1
    lengths = np.asarray([len(steps) for _, steps in paths], np.float32)
    d = decision.cast(dtypes.float32)
    taken = d @ from_numpy(on_true, device=x.device) + (1 - d) @ from_numpy(on_false, device=x.device)
    reached = taken == from_numpy(lengths, device=x.device)  # (N, paths)
    leaves = [leaf for leaf, _ in paths]
    leaf_w = from_numpy(np.asarray([weights[leaf] for leaf in leaves], np_calc), device=x.device)
    onehot = np.zeros((len(paths), n_targets), bool)
    onehot[np.arange(len(paths)), [leaf_targetids[leaf] for leaf in leaves]] = True
    target = from_numpy(onehot, device=x.device)
    how = _AGGREGATES[aggregate_function]
    if how in ("sum", "average"):
        contrib = reached.unsqueeze(-1) & target  # (N, paths, targets)
        y = contrib.where(leaf_w.reshape(1, -1, 1), 0.0).sum(1)
        if how == "average":
            y = y / len(tree_roots)
    else:
        info = np.finfo(np.float64 if x.dtype is dtypes.float64 else np.float32)
        start = float(info.max if how == "min" else info.min)
        hit = reached.unsqueeze(-1) & target
        fill = math.inf if how == "min" else -math.inf
        picked = hit.where(leaf_w.reshape(1, -1, 1), fill)
        y = picked.min(1).minimum(start) if how == "min" else picked.max(1).maximum(start)
    return y.cast(x.dtype)


def _decisions(cols: Tensor, modes: list[int], splits: np.ndarray, members: list[float] | None, np_calc: Any) -> Tensor:
    """(N, nodes) bool: does each sample take each node's true branch (its comparison, or set membership)?"""
    dev = cols.device
    split = from_numpy(splits, device=dev)
    tests = {0: cols <= split, 1: cols < split, 2: cols >= split, 3: cols > split, 4: cols == split, 5: cols != split}
    if 6 in modes:  # each set membership node's members, in node order, each set ended by a NaN
        if members is None:
            raise ValueError("set membership nodes (mode 6) need membership_values")
        sets: list[list[float]] = [[]]
        for m in members:
            if math.isnan(m):
                sets.append([])
            else:
                sets[-1].append(m)
        sets = sets[:-1] if not sets[-1] else sets
        member_nodes = [i for i, mode in enumerate(modes) if mode == 6]
        if len(sets) != len(member_nodes):
            raise ValueError(f"membership_values holds {len(sets)} sets for {len(member_nodes)} membership nodes")
        table = np.full((len(modes), max(1, *(len(s) for s in sets))), np.nan, np_calc)
        for node, s in zip(member_nodes, sets, strict=True):
            table[node, : len(s)] = s
        tests[6] = (cols.unsqueeze(-1) == from_numpy(table, device=dev)).any(-1)
    if unknown := sorted(set(modes) - set(tests)):
        raise ValueError(f"nodes_modes must be 0..6, got {unknown}")
    mode = from_numpy(np.asarray(modes, np.int32), device=dev)
    decision = tests[modes[0]]
    for m in sorted(set(modes) - {modes[0]}):
        decision = (mode == m).where(tests[m], decision)
    return decision


def _paths(
    roots: list[int], true_ids: list[int], false_ids: list[int], true_leafs: list[int], false_leafs: list[int]
) -> list[tuple[int, list[tuple[int, bool]]]]:
    """Every (leaf, [(node, branch taken), ...]) from the roots down; a root whose branches are one leaf is a leaf."""
    out: list[tuple[int, list[tuple[int, bool]]]] = []
    for root in roots:
        if true_leafs[root] and false_leafs[root] and true_ids[root] == false_ids[root]:
            out.append((root, []))
            continue
        stack = [(root, [])]
        while stack:
            node, steps = stack.pop()
            if len(steps) > len(true_ids):
                raise ValueError(f"the tree at root {root} has a cycle")
            for branch, ids, leafs in ((True, true_ids, true_leafs), (False, false_ids, false_leafs)):
                path = [*steps, (node, branch)]
                if leafs[node]:
                    out.append((ids[node], path))
                else:
                    stack.append((ids[node], path))
    return out
