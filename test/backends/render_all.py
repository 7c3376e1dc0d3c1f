"""A pytest plugin that renders every kernel the tests compile for other targets too, and has each target's own
compiler accept each distinct one: PTX (ptxas, sm_80 and sm_90), CUDA C (NVRTC, sm_80 and sm_90), HIP C
(clang's AMDGPU backend, gfx1100 and gfx90a) and Triton programs (Triton, sm_80 and sm_90). `RENDER_ALL` names the
targets (default: PTX):

    RENDER_ALL=PTX,HIP PYTHONPATH=.:test/backends python -m pytest -p render_all test/ops/test_tensor_elementwise.py

The tests run on their usual device (the CPU by default); each kernel AST they compile is also given to each
target's renderer (with the GPU plan that device would use), and at the end of the session every distinct source is
compiled. A rejection is reported with the source and fails the run. It checks what the compilers accept, not what
the code computes (that needs the GPU: test/backends/gpu_check.sh; the PYTHON device runs the same linear programs).
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from zeptograd.engine import realize

_sources: dict[tuple[str, str], str] = {}  # (target, source) -> the kernel's name
_errors: list[str] = []
_triton_kernels: dict[str, tuple[str, dict[str, str]]] = {}  # a Triton source -> its kernel's name and parameters
_original = realize.get_program


def _renderers() -> dict[str, Any]:
    from zeptograd.renderer.cuda import CUDARenderer
    from zeptograd.renderer.hip import HIPRenderer
    from zeptograd.renderer.ptx import PTXRenderer
    from zeptograd.renderer.triton import TritonRenderer

    known = {"PTX": PTXRenderer, "CUDA": CUDARenderer, "HIP": HIPRenderer, "TRITON": TritonRenderer}
    return {t: known[t]() for t in os.environ.get("RENDER_ALL", "PTX").upper().split(",")}


_targets: dict[str, Any] = {}


def _get_program(ast: Any, renderer: Any, *args: Any, **kwargs: Any) -> Any:
    program = _original(ast, renderer, *args, **kwargs)
    for target, other in _targets.items():
        try:
            rendered = _original(ast, other)
            _sources.setdefault((target, rendered.src), program.name)
            if target == "TRITON":
                from zeptograd.renderer.triton import signature

                _triton_kernels[rendered.src] = (rendered.name, signature(rendered.uops))
        except Exception as e:
            _errors.append(f"{target} {program.name}: {type(e).__name__}: {e}")
    return program


def pytest_configure(config: pytest.Config) -> None:
    _targets.update(_renderers())
    realize.get_program = _get_program  # type: ignore[assignment]


def _ptxas(src: str, folder: Path, n: int) -> str | None:
    from test_cuda import PTXAS

    assert PTXAS is not None, "no standalone ptxas"
    for arch in ("sm_80", "sm_90"):
        path = folder / f"k{n}_{arch}.ptx"
        path.write_text(src.replace(".target sm_80", f".target {arch}"))
        run = subprocess.run(
            [PTXAS[0], f"-arch={arch}", str(path), "-o", str(folder / f"k{n}.cubin")], capture_output=True, text=True
        )
        if run.returncode != 0:
            return f"ptxas ({arch}) rejected:\n{run.stderr}\n{src}"
    return None


def _compiler(compile_: Callable[[str, str], Any], archs: tuple[str, ...]) -> Callable[[str, Path, int], str | None]:
    def check(src: str, folder: Path, n: int) -> str | None:
        for arch in archs:
            try:
                compile_(src, arch)
            except Exception as e:
                return f"{arch}: {e}"[:3000]
        return None

    return check


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    from zeptograd.runtime.ops_cuda import compile_cuda
    from zeptograd.runtime.ops_hip import compile_hip
    from zeptograd.runtime.ops_triton import compile_triton

    def triton(src: str, arch: str) -> None:
        name, sig = _triton_kernels[src]
        compile_triton(src, name, sig, arch)

    checks = {
        "PTX": _ptxas,
        "CUDA": _compiler(compile_cuda, ("sm_80", "sm_90")),
        "HIP": _compiler(compile_hip, ("gfx1100", "gfx90a")),
        "TRITON": _compiler(triton, ("sm_80", "sm_90")),
    }
    work = list(enumerate(_sources))
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda a: checks[a[1][0]](a[1][1], Path(tmp), a[0]), work))
    for target in _targets:
        mine = [r for (_, (t, _)), r in zip(work, results) if t == target]
        rejected = [r for r in mine if r is not None]
        failed = sum(e.startswith(f"{target} ") for e in _errors)
        print(
            f"\nrender_all {target}: {len(mine)} distinct kernels, {len(mine) - len(rejected)} accepted, "
            f"{len(rejected)} rejected, {failed} failed to render"
        )
        for r in rejected[:5]:
            print(r[:3000])
    for e in _errors[:20]:
        print(e[:3000])
    if any(r is not None for r in results) or _errors:
        session.exitstatus = 1
