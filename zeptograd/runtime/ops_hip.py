"""HIP: AMD GPU kernels compiled, not run. zeptograd has no AMD GPU runtime yet, and no AMD GPU to test one on: the
HIP renderer's kernels (renderer/hip.py) are compiled for real by clang's AMDGPU backend, and what they compute is
the linear program's meaning, checked on the PYTHON device and on CUDA.

`compile_hip(src, "gfx1100")` runs clang twice: the HIP C to AMDGPU assembly (`--cuda-device-only`, the whole
backend: instruction selection, register allocation), then the assembly to a relocatable AMDGPU object (the
integrated assembler). It stops before the final link, which would need ROCm's device library for the `__ocml_`
functions (not pip-installable; `hipcc` and the ROCm packages are optional extras of a machine).

The clang is the first that has the AMDGPU target: `$ZG_HIP_CLANG`, then the one inside the `ziglang` pip
package (`pip install -e ".[hip]"`: Zig bundles a full clang, about 100 MB), then `clang` on PATH (Debian's
clang-15 and later have AMDGPU).

>>> hip_problem() is None or "clang" in hip_problem()
True
"""

from __future__ import annotations

import functools
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

INSTALL_HINT = (
    'HIP kernels are compiled by a clang with the AMDGPU target: pip install -e ".[hip]" (ziglang, which bundles one), '
    "or apt-get install clang"
)


class HIPCompileError(RuntimeError):
    """clang rejected a generated HIP kernel (a renderer bug: the message has clang's log and the source)."""


@functools.cache
def _clang() -> tuple[str, ...] | None:
    """The command that runs a clang with the AMDGPU target, or None."""
    candidates: list[tuple[str, ...]] = []
    if env := os.environ.get("ZG_HIP_CLANG"):
        candidates.append((env,))
    if importlib.util.find_spec("ziglang") is not None:
        candidates.append((sys.executable, "-m", "ziglang", "clang"))
    if path := shutil.which("clang"):
        candidates.append((path,))
    for cmd in candidates:
        try:
            out = subprocess.run([*cmd, "-print-targets"], capture_output=True, text=True, timeout=60).stdout
        except (OSError, subprocess.TimeoutExpired):
            continue
        if "amdgcn" in out:
            return cmd
    return None


def hip_problem() -> str | None:
    """Why HIP kernels cannot be compiled here (None: they can)."""
    return None if _clang() is not None else INSTALL_HINT + " (no clang with the AMDGPU target was found)"


def compile_hip(src: str, arch: str = "gfx1100") -> bytes:
    """Compile HIP C `src` for AMD GPU `arch` (`gfx1100`: RDNA3; `gfx90a`: CDNA2) to a relocatable AMDGPU object
    (the module docstring); raises HIPCompileError with clang's log when clang rejects it."""
    cmd = _clang()
    if cmd is None:
        raise RuntimeError(hip_problem())
    with tempfile.TemporaryDirectory(prefix="zeptograd-hip-") as tmp:
        source, asm, obj = Path(tmp) / "kernel.hip", Path(tmp) / "kernel.s", Path(tmp) / "kernel.o"
        source.write_text(src)
        device = ["-x", "hip", f"--offload-arch={arch}", "--cuda-device-only", "-nogpulib", "-nogpuinc", "-O3"]
        steps = [
            [*cmd, *device, "-S", str(source), "-o", str(asm)],
            [*cmd, "-cc1as", "-triple", "amdgcn-amd-amdhsa", "-target-cpu", arch, "-filetype", "obj", str(asm)]
            + ["-o", str(obj)],
        ]
        for step in steps:
            run = subprocess.run(step, capture_output=True, text=True)
            if run.returncode != 0:
                raise HIPCompileError(f"clang rejected the HIP kernel for {arch}:\n{run.stderr}\n--- source ---\n{src}")
        return obj.read_bytes()
