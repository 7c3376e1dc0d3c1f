"""A pytest plugin that renders every kernel the tests compile as PTX too, and has ptxas assemble each one.

The tests run on their usual device (the CPU by default); each kernel AST they compile is also given to the PTX
renderer (with the GPU plan the PTX device would use), and at the end of the session every distinct PTX text
is assembled by a standalone ptxas for sm_80 and sm_90. A rejection is reported with the PTX and fails the run:

    PYTHONPATH=.:test python -m pytest -p ptx_render_all test/test_tensor_elementwise.py

It checks what ptxas accepts, not what the PTX computes (that needs a GPU: test/ptx_gpu_check.sh).
"""

from __future__ import annotations

import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from zeptograd.engine import realize
from zeptograd.renderer.ptx import PTXRenderer

_sources: dict[str, str] = {}
_errors: list[str] = []
_original = realize.get_program


def _get_program(ast: Any, renderer: Any, *args: Any, **kwargs: Any) -> Any:
    program = _original(ast, renderer, *args, **kwargs)
    try:
        src = _original(ast, PTXRenderer()).src
        _sources.setdefault(src, program.name)
    except Exception as e:
        _errors.append(f"{program.name}: {type(e).__name__}: {e}")
    return program


def pytest_configure(config: pytest.Config) -> None:
    realize.get_program = _get_program  # type: ignore[assignment]


def _assemble(ptxas: str, src: str, folder: Path, n: int) -> str | None:
    for arch in ("sm_80", "sm_90"):
        path = folder / f"k{n}_{arch}.ptx"
        path.write_text(src.replace(".target sm_80", f".target {arch}"))
        run = subprocess.run(
            [ptxas, f"-arch={arch}", str(path), "-o", str(folder / f"k{n}.cubin")], capture_output=True, text=True
        )
        if run.returncode != 0:
            return f"ptxas ({arch}) rejected:\n{run.stderr}\n{src}"
    return None


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    from test_cuda import PTXAS

    assert PTXAS is not None, "no standalone ptxas"
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda a: _assemble(PTXAS[0], a[1], Path(tmp), a[0]), enumerate(_sources)))
    rejected = [r for r in results if r is not None]
    print(
        f"\nptx_render_all: {len(_sources)} distinct kernels, {len(_sources) - len(rejected)} assembled for sm_80 "
        f"and sm_90, {len(rejected)} rejected, {len(_errors)} failed to render"
    )
    for r in rejected[:5] + _errors[:20]:
        print(r[:3000])
    if rejected or _errors:
        session.exitstatus = 1
