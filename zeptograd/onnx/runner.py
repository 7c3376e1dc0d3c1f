"""OnnxRunner: an ONNX model as a function of Tensors.

Preparing a model checks every node against the op table (the op type, the opset, the attribute names) and turns
the initializers into Tensors once; calling it walks the graph in its order, each node one small function of Tensor
ops, so nothing runs until an output is read: the whole model is one lazy graph that the scheduler fuses, and a
call can be captured by TinyJit.

>>> import onnx
>>> from onnx import TensorProto, helper
>>> x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
>>> y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
>>> graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
>>> run = OnnxRunner(helper.make_model(graph))
>>> run({"x": np.array([-1.0, 2.0], np.float32)})["y"].tolist()
[0.0, 2.0]
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from zeptograd.onnx.dtypes import from_numpy, ml_dtype, onnx_dtype, tensor_from_proto
from zeptograd.onnx.registry import OnnxError, OnnxOp, lookup
from zeptograd.tensor import Tensor

# ops whose outputs depend on the inputs' shapes alone (not their values; a sequence's length is part of its
# shape): a value built from these, constants and initializers is the same for every call with the same input
# shapes, so the runner reads it to Python once
SHAPE_OPS = frozenset({"Shape", "Size", "SequenceLength"})
# ops that draw random numbers or run subgraphs: their outputs are never taken as constants
_NOT_CONSTANT = frozenset({"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Bernoulli",
                           "Multinomial", "If", "Loop", "Scan", "SequenceMap"})  # fmt: skip
# ops whose output shapes depend on their inputs' values, not only on their shapes and static inputs: a Shape of
# their outputs is not a constant
_DATA_SHAPED = frozenset({"NonZero", "Unique", "Compress", "NonMaxSuppression", "StringSplit", "If", "Loop", "Scan",
                          "SequenceMap"})  # fmt: skip
Value = Any  # a Tensor, None (an absent optional value), or a list of Tensors (a sequence)


def _load(model: Any) -> Any:
    import onnx

    if isinstance(model, (str, os.PathLike)):
        if not os.path.exists(model):
            raise FileNotFoundError(f"OnnxRunner: no such file: {os.fspath(model)}")
        return onnx.load(os.fspath(model))
    if isinstance(model, bytes):
        return onnx.load_from_string(model)
    if isinstance(model, onnx.ModelProto):
        return model
    raise TypeError(f"OnnxRunner: model must be a path, bytes or an onnx.ModelProto, got {type(model).__name__}")


def describe(node: Any) -> str:
    """A node as errors name it: its name, or (a nameless node) the outputs it makes."""
    return repr(node.name) if node.name else f"making {', '.join(o for o in node.output if o) or 'nothing'}"


@dataclass
class NodeContext:
    """What an op function may ask of the node it builds (through a keyword-only `ctx` argument)."""

    name: str
    op_type: str
    opset: int
    n_outputs: int
    runner: OnnxRunner
    scope: dict[str, Value]

    def subgraph(self, graph: Any) -> Callable[..., list[Value]]:
        """A GraphProto attribute (If's branches, Loop's and Scan's body) as a function of its inputs, seeing the
        values of the enclosing graph."""
        return lambda *inputs: self.runner._run_graph(graph, self.scope, list(inputs))

    def static(self, value: Tensor) -> Any:
        """A Tensor's values as Python lists and numbers (a shape, a trip count)."""
        return value.tolist()

    def error(self, what: str) -> OnnxError:
        """An OnnxError naming this node, its op type and opset, and `what` is missing."""
        return OnnxError(f"node {self.name} ({self.op_type}, opset {self.opset}): {what}")


def _kind(value: Value) -> str:
    return "a list" if isinstance(value, list) else "None" if value is None else f"a {type(value).__name__}"


def _shape_key(value: Value) -> Any:
    """What a static value computed from `value`'s shape alone depends on: its shape, a sequence's shapes."""
    if isinstance(value, Tensor):
        return tuple(value.shape)
    if isinstance(value, list):
        return tuple(_shape_key(v) for v in value)
    return value is None


class OnnxRunner:
    """An ONNX model (a path, bytes, or an onnx.ModelProto) as a function from input name -> Tensor (or numpy
    array) to output name -> Tensor. The outputs are lazy until read."""

    def __init__(self, model: Any, device: str | None = None):
        self.model = _load(model)
        self.device = device
        self.opsets = {imp.domain if imp.domain != "ai.onnx" else "": imp.version for imp in self.model.opset_import}
        graph = self.model.graph
        self.initializers: dict[str, Tensor] = {}
        for init in graph.initializer:
            self.initializers[init.name] = tensor_from_proto(init, f"initializer {init.name!r}", device)
        self.inputs = [i for i in graph.input if i.name not in self.initializers]
        self.outputs = [o.name for o in graph.output]
        for value in list(self.inputs) + list(graph.output):
            self._check_type(value)
        self._static_cache: dict[tuple[str, Any], Any] = {}
        self._check_graph(graph, set(self.initializers) | {i.name for i in self.inputs})

    # preparation: everything a model needs is checked before anything runs

    def _check_type(self, value: Any) -> None:
        """Refuse a graph input or output whose element type zeptograd lacks (a tensor's, or a sequence's or an
        optional's elements')."""
        t = value.type
        while True:
            if t.HasField("sequence_type"):
                t = t.sequence_type.elem_type
            elif t.HasField("optional_type"):
                t = t.optional_type.elem_type
            else:
                break
        if t.HasField("tensor_type"):
            onnx_dtype(t.tensor_type.elem_type, f"value {value.name!r}")

    def impl(self, node: Any) -> OnnxOp:
        """The op table's function for `node` at the model's opset, or OnnxError saying what is missing."""
        domain = "" if node.domain == "ai.onnx" else node.domain
        where = f"node {describe(node)} ({node.op_type}"
        if domain not in self.opsets:
            raise OnnxError(f"{where}): the model imports no opset for domain {domain or 'ai.onnx'!r}")
        opset = self.opsets[domain]
        impl = lookup(domain, node.op_type, opset)
        if impl is None:
            kind = f"{domain}::{node.op_type}" if domain else node.op_type
            raise OnnxError(f"{where}, opset {opset}): zeptograd does not implement ONNX op {kind} at this opset")
        unknown = sorted(a.name for a in node.attribute if a.name not in impl.attributes)
        if unknown:
            raise OnnxError(f"{where}, opset {opset}): unsupported attribute {', '.join(unknown)}")
        return impl

    def _check_graph(self, graph: Any, known: set[str]) -> None:
        import onnx

        known = set(known) | {i.name for i in graph.initializer} | {i.name for i in graph.input}
        for init in graph.initializer:
            onnx_dtype(init.data_type, f"initializer {init.name!r}")
        for node in graph.node:
            self.impl(node)
            for name in node.input:
                if name and name not in known:
                    raise OnnxError(
                        f"node {describe(node)} ({node.op_type}): input {name!r} is not a graph input, an "
                        "initializer or an output of an earlier node"
                    )
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.GRAPH:
                    self._check_graph(attr.g, known)
                    for value in list(attr.g.input) + list(attr.g.output):
                        self._check_type(value)
                elif attr.type == onnx.AttributeProto.TENSOR:
                    onnx_dtype(attr.t.data_type, f"node {describe(node)} ({node.op_type}) attribute {attr.name}")
            known.update(node.output)

    # running

    def __call__(self, inputs: Mapping[str, Any] | None = None, **kw_inputs: Any) -> dict[str, Tensor]:
        """Run the model on `inputs` (name -> Tensor or numpy array); the outputs by name, lazy.

        Every graph input without an initializer must be given, with the rank the model declares."""
        given = dict(inputs or {}, **kw_inputs)
        names = {i.name for i in self.inputs}
        if unknown := sorted(set(given) - names - set(self.initializers)):
            raise OnnxError(f"OnnxRunner: unknown input {', '.join(unknown)}; the model's inputs are {sorted(names)}")
        if missing := sorted(names - set(given)):
            raise OnnxError(f"OnnxRunner: missing input {', '.join(missing)}")
        env: dict[str, Value] = dict(self.initializers)
        for info in self.inputs:
            env[info.name] = self._input(info, given[info.name])
        for name in set(given) & set(self.initializers):  # an initializer may be overridden by an input
            env[name] = self._as_tensor(given[name], name)
        # the static values read from shape arithmetic are cached per the shapes of every value the graph starts
        # from (a sequence's by its tensors'); an initializer given as an input is data, not a constant
        shapes = tuple((name, _shape_key(v)) for name, v in sorted(env.items()))
        constants = set(self.initializers) - set(given)
        out = self._run_nodes(self.model.graph, env, (shapes, constants))
        return {name: out[name] for name in self.outputs}

    def _as_tensor(self, value: Any, name: str) -> Value:
        if isinstance(value, Tensor):
            return value if self.device is None else value.to(self.device)
        if isinstance(value, list):
            return [self._as_tensor(v, name) for v in value]
        if value is None:
            return None
        array = np.asarray(value)
        if array.dtype.kind in "OSUcV" and ml_dtype(array.dtype) is None:
            raise OnnxError(f"OnnxRunner: input {name!r}: zeptograd has no dtype for numpy's {array.dtype}")
        return from_numpy(array, device=self.device)

    def _input(self, info: Any, value: Any) -> Value:
        """A given input checked against the type the model declares: a tensor's dtype and rank, a sequence."""
        t = self._as_tensor(value, info.name)
        declared = info.type
        if declared.WhichOneof("value") == "optional_type":
            if t is None:
                return None
            declared = declared.optional_type.elem_type
        kind = declared.WhichOneof("value")
        if kind == "sequence_type" and not isinstance(t, list):
            raise OnnxError(f"OnnxRunner: input {info.name!r} is a sequence: give a list of tensors, got {_kind(t)}")
        if kind == "tensor_type":
            if not isinstance(t, Tensor):
                raise OnnxError(f"OnnxRunner: input {info.name!r} is a tensor, got {_kind(t)}")
            tt = declared.tensor_type
            want = onnx_dtype(tt.elem_type, f"input {info.name!r}")
            if t.dtype is not want:
                raise OnnxError(f"OnnxRunner: input {info.name!r} must be {want.name}, got {t.dtype.name}")
            if tt.HasField("shape") and len(tt.shape.dim) != t.ndim:
                raise OnnxError(f"OnnxRunner: input {info.name!r} must have rank {len(tt.shape.dim)}, got {t.shape}")
        return t

    def _run_graph(self, graph: Any, scope: dict[str, Value], inputs: list[Value]) -> list[Value]:
        """Run a subgraph with `inputs` bound to its inputs, seeing `scope` (the enclosing values)."""
        env = dict(scope)
        for init in graph.initializer:
            env[init.name] = tensor_from_proto(init, f"initializer {init.name!r}", self.device)
        for info, value in zip(graph.input, inputs, strict=False):
            env[info.name] = self._as_tensor(value, info.name)
        out = self._run_nodes(graph, env, None)
        return [out[o.name] for o in graph.output]

    def _run_nodes(self, graph: Any, env: dict[str, Value], cache: Any) -> dict[str, Value]:
        """Run `graph`'s nodes on `env`; `cache` is (the shapes key, the constant names) for the top-level graph,
        None inside a subgraph (whose static values are read on every run)."""
        shapes, constants = cache if cache is not None else (None, set())
        # names whose values follow from the input shapes alone; None: not tracked (inside a subgraph)
        shape_only: set[str] | None = set(constants) if cache is not None else None
        # names whose shapes follow from the input shapes alone
        shaped = set(env)
        for node in graph.node:
            impl = self.impl(node)
            ctx = NodeContext(
                describe(node), node.op_type, self.opsets.get(impl.domain, 0), len(node.output), self, env
            )
            args: list[Any] = []
            for i, name in enumerate(node.input):
                if name == "":
                    args.append(None)
                    continue
                if name not in env:
                    raise OnnxError(f"node {describe(node)} ({node.op_type}): input {name!r} is not defined before it")
                value = env[name]
                if i in impl.static and isinstance(value, Tensor):
                    cached = shape_only is not None and name in shape_only
                    key = (name, shapes)
                    if cached and key in self._static_cache:
                        value = self._static_cache[key]
                    else:
                        value = value.tolist()
                        if cached:
                            self._static_cache[key] = value
                args.append(value)
            attrs = {a.name: self._attribute(a, node) for a in node.attribute}
            if impl.wants_ctx:
                attrs["ctx"] = ctx
            try:
                result = impl.fn(*args, **attrs)
            except OnnxError:
                raise
            except (TypeError, ValueError, IndexError, NotImplementedError) as e:
                raise OnnxError(f"node {describe(node)} ({node.op_type}, opset {ctx.opset}): {e}") from e
            results = list(result) if isinstance(result, tuple) else [result]
            for name, value in zip(node.output, results, strict=False):
                if name:
                    env[name] = value
            if shape_only is not None:
                if self._follows_shapes(node, shape_only, shaped):
                    shape_only.update(node.output)
                if self._shaped(node, impl, shape_only, shaped):
                    shaped.update(node.output)
        return env

    @staticmethod
    def _follows_shapes(node: Any, shape_only: set[str], shaped: set[str]) -> bool:
        """Do `node`'s outputs follow from the input shapes alone (so a call with the same shapes has the same)?"""
        if node.op_type in _NOT_CONSTANT or node.domain not in ("", "ai.onnx"):  # another domain's op is unknown
            return False
        if node.op_type in SHAPE_OPS:
            return all(n == "" or n in shaped for n in node.input)
        return all(n == "" or n in shape_only for n in node.input)

    @staticmethod
    def _shaped(node: Any, impl: OnnxOp, shape_only: set[str], shaped: set[str]) -> bool:
        """Do `node`'s output shapes follow from the input shapes alone: its inputs' shapes do, the values it reads
        as Python values are constants, and it is no op whose output shape depends on data?"""
        if node.op_type in _DATA_SHAPED or node.domain not in ("", "ai.onnx"):
            return False
        return all(n == "" or (n in shape_only if i in impl.static else n in shaped) for i, n in enumerate(node.input))

    def _attribute(self, attr: Any, node: Any) -> Any:
        import onnx

        if attr.type == onnx.AttributeProto.TENSOR:
            return tensor_from_proto(
                attr.t, f"node {describe(node)} ({node.op_type}) attribute {attr.name}", self.device
            )
        if attr.type == onnx.AttributeProto.GRAPH:
            return attr.g
        if attr.type == onnx.AttributeProto.GRAPHS:
            return list(attr.graphs)
        value = onnx.helper.get_attribute_value(attr)
        if isinstance(value, bytes):
            return value.decode()
        if isinstance(value, list) and value and isinstance(value[0], bytes):
            return [v.decode() for v in value]
        return value
