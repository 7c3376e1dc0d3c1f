"""TinyJit: capture the kernels a function of Tensors launches, then replay them without Python in the way.

A training step builds the same graph every call: the same kernels on buffers of the same shapes. TinyJit runs
the function normally on its first call, records on the second every kernel launch and buffer copy that
`realize` makes (the compiled runner and the Buffer objects it ran on, through the `capturing` hook in
engine/realize.py), and on every later call replays that list with the new inputs' buffers put where the
captured inputs' were: no graph, no schedule, no lookups.

What a replay does, in order:

1. check the inputs against the captured ones (shape, dtype, device; the non-Tensor arguments must be equal)
   and realize any that are lazy;
2. check that the tensors holding the state the kernels read and write (parameters, optimizer state) still
   hold the captured buffers; one that was replaced (`opt.lr = 0.01` makes a new buffer) makes this call
   capture again;
3. write fresh counters into the random generator's state buffers, so each call draws new numbers: the same
   numbers eager execution would draw at this point of the sequence;
4. give each output a fresh buffer (outputs the caller keeps are never overwritten), patch the input and
   output buffers into the launch list, and run it: each run of consecutive kernels compiled for the host's
   CPU (the CPU and LLVM devices) as one call into C (`cpu_threads.LaunchList`), the rest one by one.

A kernel that reads only buffers no launch of the call writes, and no input (a weight's copy in the layout its
convolution or matmul reads, made from the weight alone), computes the same values at every replay: it is hoisted
out of the launch list into a buffer of its own, and runs again only when one of the buffers it reads was written
since (each Buffer counts the writes zeptograd makes into it; memory another library may write is never hoisted).

>>> from zeptograd import Tensor, TinyJit
>>> @TinyJit
... def f(x: Tensor) -> Tensor:
...     return (x * 2 + 1).sum()
>>> [f(Tensor([float(i), 1.0])).item() for i in range(4)]
[4.0, 6.0, 8.0, 10.0]
"""

from __future__ import annotations

import functools
import gc
import time
import weakref
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import numpy as np

from zeptograd.engine import realize as engine
from zeptograd.helpers import TRAINING, ArgumentError, GlobalCounters, JitError
from zeptograd.mixin import creation
from zeptograd.runtime import buffer as buffer_module
from zeptograd.runtime.buffer import Buffer, VariableValue, buffer_for
from zeptograd.runtime.cpu_threads import LaunchList
from zeptograd.tensor import Tensor
from zeptograd.uop.buffers import buffer_of, new_buffer, view_of
from zeptograd.uop.ops import Ops, UOp, is_bound_variable

__all__ = ["JitError", "TinyJit"]

R = TypeVar("R")
_U32 = 0xFFFFFFFF
_INPUT, _FRESH, _FIXED, _VALUE = range(4)  # what an output is: an input, a fresh buffer, a kept buffer, not a tensor


def _same(a: Any, b: Any) -> bool:
    """Are two non-Tensor arguments the same value (numpy arrays by contents)?"""
    if type(a) is not type(b):
        return False
    if isinstance(a, np.ndarray):
        return a.shape == b.shape and a.dtype == b.dtype and bool(np.array_equal(a, b))
    try:
        return bool(a == b)
    except Exception:
        return a is b


def _has_tensor(value: Any) -> bool:
    if isinstance(value, Tensor):
        return True
    if isinstance(value, (list, tuple)):
        return any(_has_tensor(v) for v in value)
    if isinstance(value, dict):
        return any(_has_tensor(v) for v in value.values())
    return False


def _arguments(args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[tuple[int | str, Any]]:
    """The arguments of a call by position or keyword."""
    named: list[tuple[int | str, Any]] = list(enumerate(args))
    return named + list(kwargs.items())


def _describe(key: int | str) -> str:
    return f"argument {key}" if isinstance(key, int) else f"keyword argument {key!r}"


class _Capture:
    """One captured call: the launch list and how to put a new call's buffers into it."""

    def __init__(self) -> None:
        # each launch: its runner and its arguments (Buffers, then the values of its variables: VariableValue)
        self.steps: list[tuple[Callable[[list[Any]], None], list[Any]]] = []
        # what a replay calls, in order: runs of C kernels as one LaunchList each, the other steps one by one; and
        # for each step in a LaunchList, that list and the step's place in it (to patch new buffers' addresses)
        self.parts: list[Callable[[], None]] = []
        self.batched: dict[int, tuple[LaunchList, int]] = {}
        self.flops = self.mem = self.kernels = 0  # kernels: launches, not counting the copies
        self.input_keys: list[int | str] = []  # the Tensor arguments, by position or keyword
        self.input_specs: list[tuple[tuple[int, ...], Any, str]] = []  # their shape, dtype, device
        self.others: dict[int | str, Any] = {}  # the non-Tensor arguments
        # the bound-Variable arguments: (key, variable), and where each variable's value goes: (launch, position)
        self.var_keys: list[tuple[int | str, UOp]] = []
        self.var_slots: dict[str, list[tuple[int, int]]] = {}
        self.n_args = 0
        self.training = 0  # Tensor.training when captured: it decides what dropout and BatchNorm compute
        self.kw_names: frozenset[str] = frozenset()
        # where each input's / fresh output's buffer goes: (launch, position) pairs
        self.input_slots: list[list[tuple[int, int]]] = []
        self.fresh: list[tuple[UOp, tuple[int, ...], str, list[tuple[int, int]]]] = []
        # the return value: its form (None for a lone Tensor, else a tuple/list/dict) and each element's kind
        self.form: Any = None
        self.outputs: list[tuple[int, Any]] = []
        # random state: (the words' buffer, its call count minus the first of the capture), and how many drawn
        self.rng: list[tuple[np.ndarray, int]] = []
        self.rng_drawn = 0
        # state the kernels use that was made before the call: the tensors viewing it, and the view they held
        self.state: list[tuple[weakref.ref[Tensor], UOp]] = []
        self.state_nodes: list[weakref.ref[UOp]] = []
        # the hoisted kernels (`_hoist`): what runs them, the buffers they read with those buffers' write counts when
        # they last ran (None: never since the capture); and the state buffers a replay writes (their counts go up)
        self.hoisted: list[Callable[[], None]] = []
        self.watched: list[Buffer] = []
        self.watched_versions: list[int] | None = None
        self.state_written: list[Buffer] = []


def _batch(cap: _Capture, steps: list[int], parts: list[Callable[[], None]]) -> None:
    """Group the captured steps `steps` (indices, in order) into the calls that run them, appended to `parts`: each
    run of consecutive kernels that a LaunchList can call from C is one call (a replay of an MLP's training step:
    20 kernels, one call)."""
    run_of: list[int] = []

    def flush() -> None:
        if len(run_of) > 1:
            launches = LaunchList([cap.steps[i] for i in run_of])
            parts.append(launches)
            cap.batched.update({i: (launches, k) for k, i in enumerate(run_of)})
        else:
            parts.extend(functools.partial(cap.steps[i][0], cap.steps[i][1]) for i in run_of)
        run_of.clear()

    for i in steps:
        run, bufs = cap.steps[i]
        if LaunchList.supported(run):
            run_of.append(i)
            continue
        flush()
        parts.append(functools.partial(run, bufs))
    flush()


def _hoist(
    cap: _Capture, launches: list[tuple[Any, list[Buffer], Any]], fixed: set[Buffer], kept: set[Buffer]
) -> set[int]:
    """The launches whose values are the same at every replay while the buffers they read keep their contents:
    kernels that read only `fixed` buffers (no launch writes them, no input is one, no other library shares them)
    or the outputs of other such kernels, into an output that the call makes, no other launch writes, and nobody
    keeps (`kept`: the returned buffers and those made before the call, such as state it assigns).
    Each one's output gets a buffer of its own (an intermediate's memory is shared with others, which overwrite
    it), put in its place in every step that reads it; `cap.watched` gets the fixed buffers they read."""
    writers: dict[Buffer, int] = {}
    for _, bufs, _ in launches:
        writers[bufs[0]] = writers.get(bufs[0], 0) + 1
    hoisted: set[int] = set()
    own: dict[Buffer, Buffer] = {}  # a hoisted output -> its buffer of its own
    watched: dict[Buffer, None] = {}
    for i, (_, bufs, program) in enumerate(launches):
        out = bufs[0]
        if program is None or writers[out] != 1 or out in kept:
            continue
        if all(b in own or b in fixed for b in bufs[1:]):
            hoisted.add(i)
            own[out] = Buffer(out.device, out.size, out.dtype).allocate()
            watched.update((b, None) for b in bufs[1:] if b in fixed)
    for _, bufs in cap.steps:
        for j, b in enumerate(bufs):
            if b in own:
                bufs[j] = own[b]
    cap.watched = list(watched)
    return hoisted


def _live_launches(launches: list[tuple[Any, list[Buffer], Any]], outputs: list[Any], before: set[Buffer]) -> list:
    """The captured launches less the copies nothing reads: a copy into a fresh buffer that no later launch reads
    and the function does not return. Those are the snapshots of a buffer's old contents made for lazy tensors of
    the capturing call (a gradient of an input that reads a weight the step updates): a replay has no such
    tensors, and the copy would only cost time (three a step of an MLP's training)."""
    returned = {buffer_for(node) for t in outputs if isinstance(t, Tensor) and (node := buffer_of(t.uop)) is not None}
    keep: list[tuple[Any, list[Buffer], Any]] = []
    read_later: set[Buffer] = set()
    for launch in reversed(launches):
        _, bufs, program = launch
        if program is None and bufs[0] not in read_later and bufs[0] not in returned and bufs[0] not in before:
            continue
        keep.append(launch)
        read_later.update(bufs if program is not None else bufs[1:])
    return keep[::-1]


class TinyJit(Generic[R]):
    """Decorate a function of Tensors (a training or inference step) so that from its third call on it replays
    the kernels it launched on its second, with the new inputs' buffers in place of the captured ones.

    The function must return a Tensor, a tuple/list/dict of Tensors (other values are returned as they were on
    the capture call), or None; returned tensors are realized. Tensors passed as arguments, positionally or by
    keyword, are its inputs: a later call must pass tensors of the same shapes, dtypes and devices (else
    `ArgumentError` names the argument) and equal non-Tensor arguments. Everything else the kernels read
    (parameters, optimizer state, constants made inside the function) is captured by buffer: assign to it in
    place (`Tensor.assign`, as the optimizers do). `reset()` forgets the capture.

    >>> from zeptograd import Tensor, TinyJit
    >>> w = Tensor([1.0, 2.0]).realize()
    >>> @TinyJit
    ... def step(x: Tensor) -> Tensor:
    ...     return w.assign(w + x)
    >>> for _ in range(3):
    ...     _ = step(Tensor([1.0, 1.0]))
    >>> w.tolist(), step.captured
    ([4.0, 5.0], True)
    """

    def __init__(self, fn: Callable[..., R]) -> None:
        self.fn = fn
        self.calls = 0
        self._capture: _Capture | None = None
        functools.update_wrapper(self, fn)

    @property
    def captured(self) -> bool:
        """Has a call been captured (the next call replays it)?"""
        return self._capture is not None

    @property
    def kernel_count(self) -> int:
        """How many kernels a replay launches (its buffer copies not counted)."""
        return self._capture.kernels if self._capture is not None else 0

    def reset(self) -> None:
        """Forget the capture and its buffers: the next call runs normally, the one after captures again.

        >>> f = TinyJit(lambda x: x + 1)
        >>> _ = [f(Tensor([1.0])) for _ in range(3)]
        >>> f.reset(); f.captured
        False
        """
        self._capture = None
        self.calls = 0

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        # as a method decorator: bind the instance as the first argument
        return self if obj is None else functools.partial(self.__call__, obj)

    def __call__(self, *args: Any, **kwargs: Any) -> R:
        if engine.capturing is not None:
            raise JitError(f"TinyJit: {self.fn.__name__} was called while another TinyJit captured its kernels")
        inputs = self._inputs(args, kwargs)
        lazy = [t for t in inputs.values() if buffer_of(t.uop) is None]
        if lazy:
            Tensor.realize(*lazy)
        self.calls += 1
        cap = self._capture
        if cap is not None:
            if self._state_changed(cap):
                return self._do_capture(args, kwargs, inputs)
            return self._replay(cap, args, kwargs, inputs)
        if self.calls == 1:
            return self._realized(self.fn(*args, **kwargs))
        return self._do_capture(args, kwargs, inputs)

    # *** capture ***

    @staticmethod
    def _inputs(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[int | str, Tensor]:
        inputs: dict[int | str, Tensor] = {}
        for key, value in _arguments(args, kwargs):
            if isinstance(value, Tensor):
                inputs[key] = value
        return inputs

    @staticmethod
    def _realized(ret: Any) -> Any:
        """Realize the returned tensors with every assignment still pending (in place updates the function made
        to its inputs or to state land within the call, so the capture holds them)."""
        tensors = [ret] if isinstance(ret, Tensor) else []
        if isinstance(ret, (tuple, list)):
            tensors = [t for t in ret if isinstance(t, Tensor)]
        elif isinstance(ret, dict):
            tensors = [t for t in ret.values() if isinstance(t, Tensor)]
        tensors += [t for t in list(engine.live_tensors) if t.uop.op is Ops.STORE]
        if tensors:
            Tensor.realize(*tensors)
        return ret

    def _do_capture(self, args: tuple[Any, ...], kwargs: dict[str, Any], inputs: dict[int | str, Tensor]) -> R:
        self._capture = None
        cap = _Capture()
        for key, value in _arguments(args, kwargs):
            if isinstance(value, UOp) and is_bound_variable(value):
                cap.var_keys.append((key, value.unbind()[0]))
                continue
            if not isinstance(value, Tensor):
                if _has_tensor(value):
                    raise ArgumentError(
                        f"TinyJit: {_describe(key)} holds Tensors inside a {type(value).__name__}; pass each "
                        "tensor as an argument of its own so that a replay can swap it"
                    )
                cap.others[key] = value
        cap.n_args, cap.kw_names, cap.training = len(args), frozenset(kwargs), TRAINING.value
        in_bufs: dict[Buffer, int] = {}
        for key, t in inputs.items():
            buf = buffer_for(buffer_of(t.uop))  # type: ignore[arg-type]
            if buf in in_bufs:
                raise ArgumentError(
                    f"TinyJit: {_describe(key)} is the same buffer as another input; pass distinct tensors"
                )
            in_bufs[buf] = len(cap.input_keys)
            cap.input_keys.append(key)
            cap.input_specs.append((t.shape, t.dtype, t.device))
        # the buffers that exist before the call (held for its length): the others are made by it
        before = {buf for buf, _ in buffer_module._buffers.values()}
        first_call = creation.CreationMixin._rng_counter
        launches: list[tuple[Any, list[Buffer], Any]] = []
        drawn: list[tuple[Tensor, int]] = []
        engine.capturing, creation.rng_capturing = launches, drawn
        try:
            ret = self._realized(self.fn(*args, **kwargs))
        finally:
            engine.capturing, creation.rng_capturing = None, None
        cap.rng_drawn = creation.CreationMixin._rng_counter - first_call

        launches = _live_launches(launches, self._flatten(ret)[1], before)
        # the launch list, and where each input's buffer appears in it
        written: set[Buffer] = set()
        cap.input_slots = [[] for _ in cap.input_keys]
        positions: dict[Buffer, list[tuple[int, int]]] = {}
        for i, (run, bufs, program) in enumerate(launches):
            cap.steps.append((run, list(bufs)))
            written.add(bufs[0])
            if program is not None:
                cap.kernels += 1
                cap.flops += program.flops
                cap.mem += program.mem_bytes
            for j, b in enumerate(bufs):
                if isinstance(b, VariableValue):
                    cap.var_slots.setdefault(b.variable.arg[0], []).append((i, j))
                    continue
                positions.setdefault(b, []).append((i, j))
                if b in in_bufs:
                    cap.input_slots[in_bufs[b]].append((i, j))

        # the return value: each tensor an input, a fresh buffer per call, or a buffer kept from before
        form, elements = self._flatten(ret)
        cap.form = form
        fresh_of: dict[Buffer, int] = {}
        for value in elements:
            if not isinstance(value, Tensor):
                cap.outputs.append((_VALUE, value))
                continue
            node = buffer_of(value.uop)
            if node is None:
                raise JitError(f"TinyJit: output {value!r} is not a buffer after realize; it cannot be returned")
            buf = buffer_for(node)
            if buf in in_bufs:
                cap.outputs.append((_INPUT, (in_bufs[buf], value.shape)))
            elif buf in written and buf not in before:
                if buf not in fresh_of:
                    fresh_of[buf] = len(cap.fresh)
                    cap.fresh.append((node, value.shape, value.device, positions[buf]))
                cap.outputs.append((_FRESH, (fresh_of[buf], value.shape)))
            else:
                cap.outputs.append((_FIXED, (value.uop, value.device)))
        # the fresh outputs' captured buffers are not used by a replay: keep only their shapes
        cap.fresh = [(UOp(node.op, node.dtype, (), (0, *node.arg[1:])), s, d, p) for node, s, d, p in cap.fresh]

        # random numbers: the state words of each draw the kernels read
        used = set(positions)
        for words, call in drawn:
            node = buffer_of(words.uop)
            if node is not None and buffer_for(node) in used:
                cap.rng.append((buffer_for(node).array(), call - first_call))

        rng_bufs = {buffer_for(n) for words, _ in drawn if (n := buffer_of(words.uop)) is not None}
        fixed = {b for b in used - written - set(in_bufs) - rng_bufs if not b.shared and b.base is None}
        returned = {buffer_for(n) for t in elements if isinstance(t, Tensor) and (n := buffer_of(t.uop)) is not None}
        hoisted = _hoist(cap, launches, fixed, returned | before)
        _batch(cap, sorted(hoisted), cap.hoisted)
        _batch(cap, [i for i in range(len(cap.steps)) if i not in hoisted], cap.parts)
        for i in hoisted:  # the counters count what a replay launches
            program = launches[i][2]
            cap.kernels, cap.flops, cap.mem = cap.kernels - 1, cap.flops - program.flops, cap.mem - program.mem_bytes
        cap.state_written = [b for b in written if b in before]
        self._find_state(cap, used, written, set(in_bufs), before)
        del before
        self._capture = cap
        return ret

    @staticmethod
    def _flatten(ret: Any) -> tuple[Any, list[Any]]:
        if isinstance(ret, (tuple, list)):
            return type(ret), list(ret)
        if isinstance(ret, dict):
            return tuple(ret), list(ret.values())
        return None, [ret]

    @staticmethod
    def _find_state(
        cap: _Capture, used: set[Buffer], written: set[Buffer], inputs: set[Buffer], before: set[Buffer]
    ) -> None:
        """Record the tensors that hold the buffers made before the call that the kernels use (parameters,
        optimizer state), so a replay can tell when one was replaced; such a buffer that only the kernels read and
        that no graph holds any more was replaced by the function itself (`self.t = self.t + 1` instead of an
        assign): an error, since a replay would read its old values forever."""
        gc.collect()  # tensors in reference cycles (autograd contexts) must not count as holding a buffer
        state = (used & before) - inputs
        held: dict[Buffer, UOp] = {}
        for t in list(engine.live_tensors):
            node = buffer_of(t.uop)
            if node is not None and (buf := buffer_for(node)) in state:
                held[buf] = node
                cap.state.append((weakref.ref(t), t.uop))
        cap.state_nodes = [weakref.ref(node) for node in held.values()]
        alive = {buf for buf, _ in buffer_module._buffers.values()}
        for buf in state - written:
            if buf not in alive:
                raise JitError(
                    f"TinyJit: the kernels read a {buf.size}-element {buf.dtype!r} buffer that the function "
                    "replaced during the call (`x = x + 1` where `x.assign(x + 1)` was meant?); a replay would "
                    "keep reading its old values"
                )

    def _state_changed(self, cap: _Capture) -> bool:
        """Does a tensor holding captured state no longer view its captured buffer? A pending assignment to it
        is realized first (then it views the same buffer again)."""
        for ref, node in cap.state:
            t = ref()
            if t is not None and t.uop is not node:
                if buffer_of(t.uop) is None:
                    t.realize()
                if t.uop is not node:
                    return True
        return any(ref() is None for ref in cap.state_nodes)

    # *** replay ***

    def _set_variable(self, cap: _Capture, key: int | str, var: UOp, given: Any) -> None:
        """Pass a bound-Variable argument's new value to every kernel that takes the variable."""
        if not (isinstance(given, UOp) and is_bound_variable(given) and given.src[0] is var):
            name, lo, hi = var.arg
            raise ArgumentError(
                f"TinyJit: {_describe(key)} of {self.fn.__name__} was captured as Variable {name!r} in [{lo}, {hi}] "
                f"bound to a value, got {given!r}; pass the same variable bound to this call's value"
            )
        value = given.src[1].arg
        steps = cap.steps
        for i, j in cap.var_slots.get(var.arg[0], ()):
            steps[i][1][j] = VariableValue(steps[i][1][j].variable, value)
            if (batched := cap.batched.get(i)) is not None:
                batched[0].set(batched[1], j, value)

    def _replay(
        self, cap: _Capture, args: tuple[Any, ...], kwargs: dict[str, Any], inputs: dict[int | str, Tensor]
    ) -> R:
        if len(args) != cap.n_args or kwargs.keys() != cap.kw_names:
            raise ArgumentError(
                f"TinyJit: {self.fn.__name__} was captured with {cap.n_args} positional arguments and keywords "
                f"{sorted(cap.kw_names)}, called with {len(args)} and {sorted(kwargs)}"
            )
        if TRAINING.value != cap.training:
            mode = "training" if cap.training else "evaluation"
            raise JitError(
                f"TinyJit: {self.fn.__name__} was captured in {mode} mode (Tensor.training), called in the other; "
                "set the mode inside the function, or use one TinyJit per mode"
            )
        steps = cap.steps
        for k, key in enumerate(cap.input_keys):
            t = inputs.get(key)
            shape, dtype, device = cap.input_specs[k]
            if t is None or t.shape != shape or t.dtype is not dtype or t.device != device:
                got = (
                    f"{t.shape} {t.dtype!r} on {t.device}"
                    if t is not None
                    else type(args[key] if isinstance(key, int) else kwargs[key]).__name__
                )
                raise ArgumentError(
                    f"TinyJit: {_describe(key)} of {self.fn.__name__} was captured as a {shape} {dtype!r} tensor "
                    f"on {device}, got {got}; call .reset() to capture again"
                )
            buf = buffer_for(buffer_of(t.uop)).allocate()  # type: ignore[arg-type]
            for i, j in cap.input_slots[k]:
                steps[i][1][j] = buf
                if (batched := cap.batched.get(i)) is not None:
                    batched[0].set(batched[1], j, buf.address)
        for key, var in cap.var_keys:
            self._set_variable(cap, key, var, args[key] if isinstance(key, int) else kwargs[key])
        for key, value in cap.others.items():
            given = args[key] if isinstance(key, int) else kwargs[key]
            if not _same(given, value):
                raise ArgumentError(
                    f"TinyJit: {_describe(key)} of {self.fn.__name__} was {value!r} when captured, got {given!r}; "
                    "non-Tensor arguments must not change (call .reset() to capture again)"
                )
        if cap.rng:
            base = creation.CreationMixin._rng_counter
            seed = creation.CreationMixin._seed
            for words, offset in cap.rng:
                words[0], words[1], words[2] = (base + offset) & _U32, seed & _U32, seed >> 32
            creation.CreationMixin._rng_counter = base + cap.rng_drawn
        fresh = []
        for node, shape, device, slots in cap.fresh:
            u = new_buffer(device, node.arg[2], node.dtype)
            buf = buffer_for(u)
            buf.allocate()
            for i, j in slots:
                steps[i][1][j] = buf
                if (batched := cap.batched.get(i)) is not None:
                    batched[0].set(batched[1], j, buf.address)
            fresh.append(Tensor(view_of(u, shape), device=device))

        start = time.perf_counter()
        if cap.hoisted:
            versions = [b.version for b in cap.watched]
            if versions != cap.watched_versions:
                for part in cap.hoisted:
                    part()
                cap.watched_versions = versions
        for part in cap.parts:
            part()
        for b in cap.state_written:
            b.version += 1
        GlobalCounters.time_sum_s += time.perf_counter() - start
        GlobalCounters.kernel_count += cap.kernels
        GlobalCounters.global_ops += cap.flops
        GlobalCounters.global_mem += cap.mem

        out: list[Any] = []
        for kind, what in cap.outputs:
            if kind == _FRESH:
                t = fresh[what[0]]
                out.append(t if t.shape == what[1] else t.reshape(what[1]))
            elif kind == _INPUT:
                t = inputs[cap.input_keys[what[0]]]
                out.append(t if t.shape == what[1] else t.reshape(what[1]))
            elif kind == _FIXED:
                out.append(Tensor(what[0], device=what[1]))
            else:
                out.append(what)
        if cap.form is None:
            return out[0]
        if isinstance(cap.form, tuple):
            return dict(zip(cap.form, out))  # type: ignore[return-value]
        return cap.form(out)
