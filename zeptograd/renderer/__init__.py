"""Renderers: a linear program becomes source text for a target.

`Renderer` is what the compiler may ask of a target: every pass that plans or lowers a kernel reads these
capabilities, never a device. Each backend's renderer subclasses it and overrides what differs; a renderer for
another machine is built by passing its facts, not by patching modules:

>>> Renderer().has_local, Renderer().max_lanes(Ops.ADD, dtypes.float32)
(False, 1)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from zeptograd.dtype import DType, dtypes
from zeptograd.uop.ops import Ops, UOp

if TYPE_CHECKING:
    from zeptograd.codegen.tensor_cores import TensorCore


class Renderer:
    """The capabilities of a target, each with a default that suits a scalar, single-core device."""

    device: str = ""
    """The device name kernels rendered here run on (`"CPU"`, `"CUDA"`, ...)."""
    has_local: bool = False
    """Kernels are launched over work-groups (GPU-style); the planner then uses LOCAL/GROUP, not threads."""
    has_shared: bool = True
    """A work-group has local memory to combine a GROUP reduction in (Triton has none)."""
    has_threads: bool = False
    """A kernel's outer loop may be split across the host's cores (the C device's thread pool)."""
    thread_min_work: int = 1 << 17
    """Element operations a kernel needs at least before its loop is split across the cores: below it the kernel
    takes less time than waking the other cores costs (runtime/cpu_threads.py)."""
    runs_on_cpu: bool = False
    """The code runs on the host's CPU, so layouts made for its caches pay (PoCL, lavapipe, the C device)."""
    max_local_size: int = 0
    """Work-items of one work-group at most (0 without work-groups)."""
    local_size: int = 64
    """Work-items a work-group the planner aims for."""
    local_memory_bytes: int = 0
    """Bytes of local (shared) memory one work-group may hold (0 without work-groups)."""
    tensor_cores: tuple[TensorCore, ...] = ()
    """The matrix-multiply units the planner may map a matmul onto."""
    fragment_load_lanes: int = 1
    """Lanes of a tensor-core operand read in one load where it is contiguous and aligned."""
    packs_narrow_values: bool = False
    """An elementwise kernel of 1- or 2-byte values gives each work-item 4 bytes of them."""
    emulated_floats: frozenset[DType] = frozenset()
    """Floats the device stores but cannot compute in: computed in float32 and rounded per op."""
    native_transcendentals: bool = False
    """EXP2, LOG2, SIN (...) are rendered as the target's own functions, not decomposed into polynomials."""
    fused_mulacc: bool = True
    """The target's fma rounds once (WGSL's need not)."""
    may_contract: bool = False
    """The target's compiler may fuse a*b+c into one rounding of its own accord."""
    paired_gated_stores: bool = False
    """A gated vector STORE becomes gated two-lane stores, pair after pair (`devectorize`): the C device's, whose
    gcc then keeps a convolution tile's accumulators in registers (LLVM, given that order, spilled one)."""
    vector_registers: int = 16
    """Vector registers of a core: how many accumulators a register tile may hold (AVX-512 has 32)."""
    l1_bytes: int = 32 << 10
    """A core's L1 data cache, in bytes."""
    l2_bytes: int = 1 << 20
    """A core's L2 cache, in bytes."""

    def max_lanes(self, op: Ops, dt: DType) -> int:
        """How many lanes of `dt` the target does `op` on at once (1: lane by lane)."""
        return 1

    def masked_load(self, dt: DType) -> bool:
        """Can the target read a vector of `dt` under a gate per lane, the lanes that are off not read?"""
        return False

    def supported_dtypes(self) -> frozenset[DType]:
        """The scalar dtypes the target computes and stores."""
        return frozenset(dtypes.all)

    def render(self, name: str, uops: Sequence[UOp]) -> str:
        """The source text of kernel `name`, a linear program."""
        raise NotImplementedError(f"{type(self).__name__} renders no source")
