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

from zeptograd.onnx.dtypes import from_numpy, onnx_dtype, tensor_from_proto
from zeptograd.onnx.registry import OnnxError, OnnxOp, lookup
from zeptograd.tensor import Tensor

# ops whose outputs depend on the inputs' shapes alone (not their values): a value built from these, constants
# and initializers is the same for every call with the same input shapes, so the runner reads it to Python once
SHAPE_OPS = frozenset({"Shape", "Size"})
# ops that draw random numbers or run subgraphs: their outputs are never taken as constants
_NOT_CONSTANT = frozenset({"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Bernoulli",
                           "Multinomial", "If", "Loop", "Scan", "SequenceMap"})  # fmt: skip
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
        return OnnxError(f"node {self.name!r} ({self.op_type}, opset {self.opset}): {what}")


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
        t = value.type
        if t.HasField("tensor_type"):
            onnx_dtype(t.tensor_type.elem_type, f"value {value.name!r}")
        elif t.HasField("sequence_type") and t.sequence_type.elem_type.HasField("tensor_type"):
            onnx_dtype(t.sequence_type.elem_type.tensor_type.elem_type, f"value {value.name!r}")

    def impl(self, node: Any) -> OnnxOp:
        """The op table's function for `node` at the model's opset, or OnnxError saying what is missing."""
        domain = "" if node.domain == "ai.onnx" else node.domain
        where = f"node {node.name!r} ({node.op_type}"
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
        for node in graph.node:
            self.impl(node)
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.GRAPH:
                    self._check_graph(attr.g, known)
                elif attr.type == onnx.AttributeProto.TENSOR:
                    onnx_dtype(attr.t.data_type, f"node {node.name!r} ({node.op_type}) attribute {attr.name}")
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
        shapes = tuple((name, tuple(v.shape)) for name, v in sorted(env.items()) if isinstance(v, Tensor))
        out = self._run_nodes(self.model.graph, env, shapes)
        return {name: out[name] for name in self.outputs}

    def _as_tensor(self, value: Any, name: str) -> Value:
        if isinstance(value, Tensor):
            return value if self.device is None else value.to(self.device)
        if isinstance(value, list):
            return [self._as_tensor(v, name) for v in value]
        if value is None:
            return None
        return from_numpy(np.asarray(value), device=self.device)

    def _input(self, info: Any, value: Any) -> Value:
        t = self._as_tensor(value, info.name)
        if isinstance(t, Tensor) and info.type.HasField("tensor_type"):
            tt = info.type.tensor_type
            want = onnx_dtype(tt.elem_type, f"input {info.name!r}")
            if t.dtype is not want:
                raise OnnxError(f"OnnxRunner: input {info.name!r} must be {want}, got {t.dtype}")
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

    def _run_nodes(self, graph: Any, env: dict[str, Value], shapes: Any) -> dict[str, Value]:
        # names whose values follow from the input shapes alone; None: not tracked (inside a subgraph)
        shape_only: set[str] | None = set(self.initializers) if shapes is not None else None
        for node in graph.node:
            impl = self.impl(node)
            ctx = NodeContext(node.name, node.op_type, self.opsets.get(impl.domain, 0), len(node.output), self, env)
            args: list[Any] = []
            for i, name in enumerate(node.input):
                if name == "":
                    args.append(None)
                    continue
                if name not in env:
                    raise OnnxError(f"node {node.name!r} ({node.op_type}): input {name!r} is not defined before it")
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
                raise OnnxError(f"node {node.name!r} ({node.op_type}, opset {ctx.opset}): {e}") from e
            results = list(result) if isinstance(result, tuple) else [result]
            for name, value in zip(node.output, results, strict=False):
                if name:
                    env[name] = value
            if shape_only is not None and self._follows_shapes(node, shape_only):
                shape_only.update(node.output)
        return env

    @staticmethod
    def _follows_shapes(node: Any, shape_only: set[str]) -> bool:
        """Do `node`'s outputs follow from the input shapes alone (so a call with the same shapes has the same)?"""
        if node.op_type in _NOT_CONSTANT:
            return False
        return node.op_type in SHAPE_OPS or all(n == "" or n in shape_only for n in node.input)

    def _attribute(self, attr: Any, node: Any) -> Any:
        import onnx

        if attr.type == onnx.AttributeProto.TENSOR:
            return tensor_from_proto(attr.t, f"node {node.name!r} ({node.op_type}) attribute {attr.name}", self.device)
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
