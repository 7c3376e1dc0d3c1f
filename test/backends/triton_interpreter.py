"""The Triton programs zeptograd renders, run by Triton's own interpreter on the CPU: a stand-in for the TRITON
device where there is no GPU.

Each kernel's source is imported with `TRITON_INTERPRET=1`, which makes its `@triton.jit` function an
interpreted one: Triton's front end reads the same program and executes it with numpy, one program instance
after another. Buffers live behind the CUDA emulator's host allocator, so the device-memory path of Buffer runs.

What it checks: the Triton text (types, constants, masks, loops, casts) and the launch grid compute what numpy
computes. What it cannot: Triton's GPU compiler (test_triton.py compiles every kernel of the op set for that) and
the GPU's own arithmetic (its `libdevice`, its rounding of `tl.exp2`; the IR computes those with plain arithmetic).

The op suite on it, from the repository root:
`DEVICE=TRITON PYTHONPATH=.:test/backends python -m pytest -p triton_interpreter test/ops/test_tensor_*.py`.
"""

from __future__ import annotations

import ctypes
import hashlib
import importlib.util
import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from cuda_emulator import HostAllocator

from zeptograd.codegen import ProgramSpec
from zeptograd.dtype import PtrDType
from zeptograd.renderer.triton import TritonRenderer
from zeptograd.uop.ops import Ops


def load_interpreted(src: str, name: str, folder: Path) -> Any:
    """Kernel `name` of the Triton program `src` as an interpreted function (its file written into `folder`)."""
    # imported before TRITON_INTERPRET is set: Triton's own modules compile normally
    import triton.language  # noqa: F401

    path = folder / f"k_{hashlib.sha256(src.encode()).hexdigest()[:16]}.py"
    path.write_text(src)
    old = os.environ.get("TRITON_INTERPRET")
    os.environ["TRITON_INTERPRET"] = "1"  # read when the module's @triton.jit runs
    try:
        spec = importlib.util.spec_from_file_location(path.stem, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        if old is None:
            del os.environ["TRITON_INTERPRET"]
        else:
            os.environ["TRITON_INTERPRET"] = old
    return getattr(module, name)


class InterpretedTriton:
    """A device named TRITON that renders Triton programs and runs them in Triton's interpreter."""

    name = "TRITON"

    def __init__(self) -> None:
        self.renderer = TritonRenderer()
        self.allocator = HostAllocator()
        self.dir = Path(tempfile.mkdtemp(prefix="zeptograd-triton-interpreter-"))

    def _kernel(self, program: ProgramSpec) -> Any:
        return load_interpreted(program.src, program.name, self.dir)

    def runner(self, program: ProgramSpec) -> Callable[[Sequence[Any]], None]:
        import torch

        fn = self._kernel(program)
        params = sorted((u for u in program.uops if u.op is Ops.DEFINE_GLOBAL), key=lambda u: u.arg)
        grid = tuple(g // n for g, n in zip(program.launch_global, program.launch_local)) or (1,)

        def view(address: int, dt: PtrDType) -> Any:
            nbytes = max(dt.size * dt.base.itemsize, 1)
            raw = np.ctypeslib.as_array((ctypes.c_uint8 * nbytes).from_address(address))
            return torch.from_numpy(raw[: dt.size * dt.base.itemsize].view(np.dtype(dt.base.name)))

        def run(bufs: Sequence[Any]) -> None:
            args = []
            for u in params:
                assert isinstance(u.dtype, PtrDType)
                args.append(view(bufs[u.arg].address, u.dtype))
            if 0 not in grid:
                fn[grid](*args)

        return run

    def synchronize(self) -> None:
        pass


def install() -> InterpretedTriton:
    """Register the interpreter as this process's TRITON device (for a machine without a GPU)."""
    from zeptograd.runtime.device import Device

    dev = InterpretedTriton()
    Device._opened["TRITON"], Device._usable["TRITON"] = dev, True
    return dev


def pytest_configure(config: Any) -> None:
    """As a pytest plugin: the op suite on the interpreted TRITON device, without a GPU,

    DEVICE=TRITON PYTHONPATH=.:test/backends python -m pytest -p triton_interpreter -n 2 test/ops/test_tensor_*.py
    """
    install()
