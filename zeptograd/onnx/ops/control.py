"""ONNX ops: control flow (If, Loop, Scan), each running its GraphProto body through the node's context.

A body sees the values of the graph around it (`ctx.subgraph`). Loops are unrolled into one lazy graph: every
iteration's Tensors join the graph the model builds, so a Loop whose trip count follows from the input shapes
runs as fused kernels with nothing read back; a condition computed from data is read back once per iteration.

>>> import numpy as np
>>> from onnx import TensorProto, helper
>>> from zeptograd.onnx import OnnxRunner
>>> body = helper.make_graph(
...     [helper.make_node("Identity", ["c"], ["c_out"]), helper.make_node("Add", ["s", "x"], ["s_out"])],
...     "body",
...     [helper.make_tensor_value_info(n, t, []) for n, t in (("i", TensorProto.INT64), ("c", TensorProto.BOOL))]
...     + [helper.make_tensor_value_info("s", TensorProto.FLOAT, [2])],
...     [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
...      helper.make_tensor_value_info("s_out", TensorProto.FLOAT, [2])])
>>> loop = helper.make_node("Loop", ["n", "", "s0"], ["s"], body=body)
>>> graph = helper.make_graph([loop], "g",
...     [helper.make_tensor_value_info("n", TensorProto.INT64, []),
...      helper.make_tensor_value_info("x", TensorProto.FLOAT, [2]),
...      helper.make_tensor_value_info("s0", TensorProto.FLOAT, [2])],
...     [helper.make_tensor_value_info("s", TensorProto.FLOAT, [2])])
>>> run = OnnxRunner(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]))
>>> x, s0 = np.array([1.0, 2.0], np.float32), np.zeros(2, np.float32)
>>> run({"n": np.array(3), "x": x, "s0": s0})["s"].tolist()
[3.0, 6.0]
"""

from __future__ import annotations

from typing import Any

from zeptograd.dtype import dtypes
from zeptograd.onnx.dtypes import onnx_dtype
from zeptograd.onnx.registry import onnx_op
from zeptograd.tensor import Tensor


def _truth(value: Any) -> bool:
    """A condition read to Python (a scalar, or a one-element list as a 1-element tensor's .tolist() gives)."""
    while isinstance(value, list):
        if len(value) != 1:
            raise ValueError(f"a condition must have one element, got {len(value)}")
        value = value[0]
    return bool(value)


def _stacked(values: list[Tensor], info: Any, device: str | None) -> Tensor:
    """Per-iteration values stacked on a new axis 0; with no iteration, an empty tensor of the body's type."""
    if values:
        return Tensor.stack(*values, dim=0) if len(values) > 1 else values[0].unsqueeze(0)
    tt = info.type.tensor_type
    dims = [d.dim_value if d.HasField("dim_value") else 0 for d in tt.shape.dim]
    return Tensor.empty(0, *dims, dtype=onnx_dtype(tt.elem_type, f"value {info.name!r}"), device=device)


@onnx_op("If", 1, static=(0,))
def if_(cond: Any, *, then_branch: Any, else_branch: Any, ctx: Any) -> Any:
    """If: run `then_branch` when `cond` is true, else `else_branch`; its outputs are the node's.

    The condition is read back to Python when the model runs (one value), so it must be known then; where it
    follows from the input shapes alone the runner reads it once per input shape."""
    outputs = ctx.subgraph(then_branch if _truth(cond) else else_branch)()
    return tuple(outputs) if len(outputs) != 1 else outputs[0]


@onnx_op("Loop", 1, static=(0, 1))
def loop(trip_count: Any, cond: Any, *initial: Any, body: Any, ctx: Any) -> Any:
    """Loop: run `body(i, cond, *carried) -> (cond, *carried, *scan)` while i < trip_count and cond holds.

    Unrolled: the loop-carried values are threaded through the iterations, the scan outputs stacked on a new
    axis 0. A condition the body computes is read back after each iteration unless it passes its input through."""
    if trip_count is None and cond is None:
        raise ValueError("a Loop with neither a trip count nor a condition never ends")
    limit = None if trip_count is None else int(_flat(trip_count))
    run, device = ctx.subgraph(body), ctx.runner.device
    n_carried = len(initial)
    carried = list(initial)
    scans: list[list[Tensor]] = [[] for _ in range(len(body.output) - 1 - n_carried)]
    going = True if cond is None else _truth(cond)
    cond_in = Tensor(going, dtype=dtypes.bool, device=device)
    i = 0
    while going and (limit is None or i < limit):
        out = run(Tensor(i, dtype=dtypes.int64, device=device), cond_in, *carried)
        carried = out[1 : 1 + n_carried]
        for values, value in zip(scans, out[1 + n_carried :], strict=True):
            values.append(value)
        i += 1
        # without a condition input the body's condition is ignored (a for loop); one passed through is unchanged
        if cond is not None and out[0] is not cond_in:
            cond_in = out[0]
            going = _truth(cond_in.tolist())
    results = carried + [_stacked(v, info, device) for v, info in zip(scans, body.output[1 + n_carried :])]
    return tuple(results) if len(results) != 1 else results[0]


def _flat(value: Any) -> Any:
    while isinstance(value, list):
        value = value[0]
    return value


def _scan(
    run: Any, states: list[Tensor], xs: list[Tensor], in_axes: list[int], in_rev: list[int], out_axes: list[int],
    out_rev: list[int], body: Any, device: str | None
) -> list[Tensor]:  # fmt: skip
    """One scan: slice each x along its axis (reversed where asked), thread the states, stack the outputs."""
    xs = [x.movedim(a % x.ndim, 0) for x, a in zip(xs, in_axes, strict=True)]
    lengths = {x.shape[0] for x in xs}
    if len(lengths) > 1:
        raise ValueError(f"the scan inputs have different lengths along their scan axes: {sorted(lengths)}")
    length = lengths.pop() if lengths else 0
    n_states = len(states)
    n_out = len(body.output) - n_states
    outs: list[list[Tensor]] = [[] for _ in range(n_out)]
    for t in range(length):
        slices = [x[length - 1 - t] if rev else x[t] for x, rev in zip(xs, in_rev, strict=True)]
        out = run(*states, *slices)
        states = out[:n_states]
        for values, value in zip(outs, out[n_states:], strict=True):
            values.append(value)
    results = list(states)
    for k, values in enumerate(outs):
        if k < len(out_rev) and out_rev[k]:
            values = values[::-1]
        stacked = _stacked(values, body.output[n_states + k], device)
        axis = out_axes[k] if k < len(out_axes) else 0
        results.append(stacked.movedim(0, axis % stacked.ndim))
    return results


@onnx_op("Scan", 8, static=(0,))
def scan_8(
    sequence_lens: Any, *inputs: Tensor, body: Any, num_scan_inputs: int, directions: list[int] | None = None,
    ctx: Any
) -> Any:  # fmt: skip
    """Scan-8: Scan over a leading batch axis, scanning each batch entry's inputs along axis 1."""
    n_states = len(inputs) - num_scan_inputs
    states, xs = list(inputs[:n_states]), list(inputs[n_states:])
    batch = (states + xs)[0].shape[0]
    if sequence_lens is not None:
        full = xs[0].shape[1] if xs else 0
        if any(n != full for n in sequence_lens):
            raise ctx.error(f"sequence_lens {sequence_lens} shorter than the scan length {full} are not supported")
    rev = list(directions or [0] * num_scan_inputs)
    run = ctx.subgraph(body)
    per_batch = []
    for b in range(batch):
        per_batch.append(_scan(run, [s[b] for s in states], [x[b] for x in xs], [0] * len(xs), rev, [], [], body,
                               ctx.runner.device))  # fmt: skip
    results = [Tensor.stack(*(r[k] for r in per_batch), dim=0) for k in range(len(per_batch[0]))]
    return tuple(results) if len(results) != 1 else results[0]


@onnx_op("Scan", 9)
def scan_9(
    *inputs: Tensor, body: Any, num_scan_inputs: int, scan_input_axes: list[int] | None = None,
    scan_input_directions: list[int] | None = None, scan_output_axes: list[int] | None = None,
    scan_output_directions: list[int] | None = None, ctx: Any
) -> Any:  # fmt: skip
    """Scan: thread the N states through `body(*states, *x_slices)`, slicing the scan inputs along their axes."""
    n_states = len(inputs) - num_scan_inputs
    states, xs = list(inputs[:n_states]), list(inputs[n_states:])
    results = _scan(
        ctx.subgraph(body), states, xs, list(scan_input_axes or [0] * len(xs)),
        list(scan_input_directions or [0] * len(xs)), list(scan_output_axes or []),
        list(scan_output_directions or []), body, ctx.runner.device,
    )  # fmt: skip
    return tuple(results) if len(results) != 1 else results[0]
