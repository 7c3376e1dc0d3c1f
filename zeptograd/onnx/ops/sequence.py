"""ONNX ops: sequences and optionals. A sequence is a Python list of Tensors, an optional is None or its value.

>>> import numpy as np
>>> from onnx import TensorProto, helper
>>> from zeptograd.onnx import OnnxRunner
>>> nodes = [helper.make_node("SplitToSequence", ["x"], ["s"], axis=0, keepdims=0),
...          helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=1, new_axis=1)]
>>> graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2])],
...                           [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2])])
>>> run = OnnxRunner(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]))
>>> run({"x": np.array([[1, 2], [3, 4]], np.float32)})["y"].tolist()
[[1.0, 3.0], [2.0, 4.0]]
"""

from __future__ import annotations

from typing import Any

from zeptograd.dtype import dtypes
from zeptograd.onnx.registry import onnx_op
from zeptograd.tensor import Tensor


def _index(position: Any, length: int, insert: bool = False) -> int:
    """A sequence position (negative counts from the end) checked against the sequence's length."""
    while isinstance(position, list):
        position = position[0]
    p = int(position)
    top = length if insert else length - 1
    if not -length <= p <= top:
        raise IndexError(f"position {p} is out of range for a sequence of {length} tensors")
    return p + length if p < 0 else p


@onnx_op("SequenceEmpty", 11)
def sequence_empty(*, dtype: int = 1) -> list[Tensor]:
    """SequenceEmpty: a sequence with no tensors."""
    return []


@onnx_op("SequenceConstruct", 11)
def sequence_construct(*inputs: Tensor) -> list[Tensor]:
    """SequenceConstruct: the inputs as one sequence."""
    return list(inputs)


@onnx_op("SequenceInsert", 11, static=(2,))
def sequence_insert(seq: list[Tensor], tensor: Tensor, position: Any = None) -> list[Tensor]:
    """SequenceInsert: a new sequence with `tensor` at `position` (at the end by default)."""
    out = list(seq)
    out.insert(len(out) if position is None else _index(position, len(out), insert=True), tensor)
    return out


@onnx_op("SequenceAt", 11, static=(1,))
def sequence_at(seq: list[Tensor], position: Any) -> Tensor:
    """SequenceAt: the tensor at `position`."""
    return seq[_index(position, len(seq))]


@onnx_op("SequenceErase", 11, static=(1,))
def sequence_erase(seq: list[Tensor], position: Any = None) -> list[Tensor]:
    """SequenceErase: a new sequence without the tensor at `position` (the last by default)."""
    out = list(seq)
    del out[-1 if position is None else _index(position, len(out))]
    return out


@onnx_op("SequenceLength", 11)
def sequence_length(seq: list[Tensor], *, ctx: Any) -> Tensor:
    """SequenceLength: the number of tensors, an int64 scalar."""
    return Tensor(len(seq), dtype=dtypes.int64, device=ctx.runner.device)


@onnx_op("SplitToSequence", 11, static=(1,))
def split_to_sequence(x: Tensor, split: Any = None, *, axis: int = 0, keepdims: int = 1) -> list[Tensor]:
    """SplitToSequence: pieces of `x` along `axis`: of size 1 (squeezed unless `keepdims`), of size `split`
    each (the last may be smaller), or of the sizes listed in `split`."""
    axis = axis + x.ndim if axis < 0 else axis
    if split is None:
        parts = list(x.split(1, dim=axis))
        return parts if keepdims else [p.squeeze(axis) for p in parts]
    return list(x.split(split, dim=axis))


@onnx_op("ConcatFromSequence", 11)
def concat_from_sequence(seq: list[Tensor], *, axis: int, new_axis: int = 0) -> Tensor:
    """ConcatFromSequence: the tensors joined along `axis`, or stacked on a new axis there if `new_axis`."""
    if not seq:
        raise ValueError("cannot concatenate an empty sequence")
    if new_axis:
        return Tensor.stack(*seq, dim=axis) if len(seq) > 1 else seq[0].unsqueeze(axis)
    return Tensor.cat(*seq, dim=axis) if len(seq) > 1 else seq[0]


@onnx_op("SequenceMap", 17)
def sequence_map(seq: list[Tensor], *others: Any, body: Any, ctx: Any) -> Any:
    """SequenceMap: `body` on each position of the sequences (a tensor input is passed whole each time); each
    body output collects into a sequence."""
    run = ctx.subgraph(body)
    for other in others:
        if isinstance(other, list) and len(other) != len(seq):
            raise ValueError(f"the sequences have different lengths: {len(seq)} and {len(other)}")
    outs: list[list[Any]] = [[] for _ in body.output]
    for i in range(len(seq)):
        args = [seq[i]] + [o[i] if isinstance(o, list) else o for o in others]
        for values, value in zip(outs, run(*args), strict=True):
            values.append(value)
    return tuple(outs) if len(outs) != 1 else outs[0]


@onnx_op("Optional", 15)
def optional(value: Any = None, *, type: Any = None) -> Any:
    """Optional: an optional holding `value`, or an empty one (None) without it."""
    return value


@onnx_op("OptionalHasElement", 15)
def optional_has_element(value: Any = None, *, ctx: Any) -> Tensor:
    """OptionalHasElement: whether the optional (or tensor, or sequence) input holds a value, a bool scalar."""
    return Tensor(value is not None, dtype=dtypes.bool, device=ctx.runner.device)


@onnx_op("OptionalGetElement", 15)
def optional_get_element(value: Any) -> Any:
    """OptionalGetElement: the optional's value (a tensor or sequence input is returned as it is)."""
    if value is None:
        raise ValueError("the optional input is empty")
    return value
