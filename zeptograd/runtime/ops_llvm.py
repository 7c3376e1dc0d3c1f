"""The LLVM device: LLVM IR text compiled in process by llvmlite (which bundles LLVM) and run on the host's
CPU, on the same host buffers as the CPU device.

The IR is optimized by LLVM's O2 pipeline for the host CPU (its name and features, so AVX2 and FMA where the
CPU has them) and compiled by an MCJIT engine, one per kernel, kept in memory for the session (no disk cache: a
small kernel compiles in a few milliseconds). No fast-math flags: like the C device, LLVM may not contract
a*b+c into an FMA on its own, so results agree with the C device and the PYTHON reference.

Threads work as on the CPU device: a kernel with a THREAD opt takes its chunk index as its last argument, and
is called once per chunk (this thread and the CPU device's pool take the chunks in turn); ctypes releases the GIL
during each call.
"""

from __future__ import annotations

import ctypes
import hashlib
from collections.abc import Callable, Sequence
from typing import Any

from zeptograd.codegen import ProgramSpec
from zeptograd.renderer.host import HostCPU
from zeptograd.renderer.llvmir import LLVMRenderer
from zeptograd.runtime import cpu_threads
from zeptograd.runtime.buffer import Buffer
from zeptograd.runtime.device import INSTALL_HINTS, DeviceUnavailable
from zeptograd.uop.ops import Ops


class LLVMCompileError(RuntimeError):
    """LLVM rejected a generated kernel (a renderer bug: the message has the IR)."""


def llvmlite_binding() -> Any:
    """`llvmlite.binding`, with the native target initialized; DeviceUnavailable when llvmlite is missing."""
    try:
        import llvmlite.binding as llvm  # type: ignore[import-untyped]
    except ImportError as e:
        raise DeviceUnavailable(INSTALL_HINTS["LLVM"]) from e
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    return llvm


class LLVMCompiler:
    """Compiles LLVM IR text to machine code in this process, once per distinct source."""

    def __init__(self, opt_level: int = 2) -> None:
        self.llvm = llvm = llvmlite_binding()
        target = llvm.Target.from_triple(llvm.get_process_triple())
        features = llvm.get_host_cpu_features().flatten()
        self.machine = target.create_target_machine(
            cpu=llvm.get_host_cpu_name(), features=features, opt=opt_level, reloc="pic", codemodel="default"
        )
        self.opt_level = opt_level
        # source hash -> (engine, function address): the engine owns the machine code, so it is kept
        self._compiled: dict[str, tuple[Any, int]] = {}

    def function(self, src: str, name: str) -> int:
        """The address of function `name` in the compiled `src`."""
        key = hashlib.sha256(src.encode()).hexdigest()
        if (hit := self._compiled.get(key)) is not None:
            return hit[1]
        llvm = self.llvm
        try:
            module = llvm.parse_assembly(src)
            module.verify()
        except RuntimeError as e:
            raise LLVMCompileError(f"LLVM rejected the kernel {name}:\n{e}\n--- IR ---\n{src}") from e
        module.triple = self.machine.triple
        module.data_layout = str(self.machine.target_data)
        tuning = llvm.create_pipeline_tuning_options(speed_level=self.opt_level)
        builder = llvm.create_pass_builder(self.machine, tuning)
        builder.getModulePassManager().run(module, builder)
        engine = llvm.create_mcjit_compiler(module, self.machine)
        engine.finalize_object()
        address = engine.get_function_address(name)
        self._compiled[key] = (engine, address)
        return address

    def assembly(self, src: str) -> str:
        """The machine code LLVM makes of `src`, as assembly text (to read what a kernel became)."""
        module = self.llvm.parse_assembly(src)
        tuning = self.llvm.create_pipeline_tuning_options(speed_level=self.opt_level)
        builder = self.llvm.create_pass_builder(self.machine, tuning)
        builder.getModulePassManager().run(module, builder)
        return str(self.machine.emit_assembly(module))


class LLVMDevice:
    """Runs kernels rendered as LLVM IR, compiled by llvmlite, on the host's CPU."""

    name = "LLVM"
    variables = True  # kernels take symbolic variables' values as arguments

    def __init__(self) -> None:
        self.compiler = LLVMCompiler()
        self.renderer = LLVMRenderer(HostCPU.read())

    def runner(self, program: ProgramSpec) -> Callable[[Sequence[Buffer]], None]:
        address = self.compiler.function(program.src, program.name)
        n_args = sum(1 for u in program.uops if u.op is Ops.DEFINE_GLOBAL) + len(program.variables)
        chunks = program.chunks
        argtypes = [ctypes.c_void_p] * n_args + ([ctypes.c_int32] if chunks > 1 else [])
        fn = ctypes.CFUNCTYPE(None, *argtypes)(address)
        return cpu_threads.buffer_runner(fn, n_args, chunks)
