"""The typed Renderer: what the compiler may ask of a target. A renderer for another machine is built from that
machine's facts (`HostCPU`), side by side with this one's, and renders its own code; every renderer class is a
Renderer, and every capability is documented. Values are numpy's."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import numpy as np
import pytest

import zeptograd.renderer as renderer_package
from zeptograd import Device, Tensor
from zeptograd.codegen import ProgramSpec, get_program
from zeptograd.codegen.heuristic import hand_coded_opts
from zeptograd.codegen.opt import Opt, OptOps
from zeptograd.dtype import dtypes
from zeptograd.renderer import Renderer
from zeptograd.renderer.cstyle import CRenderer
from zeptograd.renderer.host import HostCPU
from zeptograd.renderer.llvmir import LLVMRenderer
from zeptograd.renderer.opencl import OpenCLRenderer
from zeptograd.runtime.buffer import buffer_for
from zeptograd.schedule.kernelize import create_schedule
from zeptograd.uop.ops import Ops

PACKAGE = Path(__file__).resolve().parents[2] / "zeptograd"
# two machines, neither of them this one: their facts as /proc/cpuinfo and sysfs would give them
AVX2_HOST = HostCPU(frozenset({"sse4_2", "avx", "avx2", "fma"}), l1_bytes=32 << 10, l2_bytes=512 << 10)
AVX512_HOST = HostCPU(
    frozenset({"sse4_2", "avx", "avx2", "fma", "avx512f", "avx512dq", "avx512vl", "avx512bw"}),
    l1_bytes=48 << 10,
    l2_bytes=2 << 20,
)
# AVX2's ymm registers hold 8 float32, AVX-512's zmm 16; x86-64 has 16 of the first and 32 of the second
YMM_FLOATS, ZMM_FLOATS = 256 // 32, 512 // 32


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _item(t: Tensor):
    """The one kernel of `t`'s schedule (its inputs realized beforehand)."""
    items, _ = create_schedule([t.uop], ["CPU"])
    (item,) = [i for i in items if i.ast is not None]
    return item


def _run(t: Tensor, renderer: Renderer, opts: list[Opt] | None = None) -> tuple[np.ndarray, ProgramSpec]:
    """`t` (one kernel over realized inputs), compiled by `renderer` (with plan `opts`, else its own) and run on the
    CPU device; its value and its program."""
    item = _item(t)
    program = get_program(item.ast, renderer, opts)
    bufs = [buffer_for(b) for b in item.bufs]
    for b in bufs:
        b.allocate()
    Device["CPU"].runner(program)(bufs)
    return bufs[0].numpy().reshape(t.shape), program


def _needs_avx2() -> None:
    if not HostCPU.read().avx2_fma:
        pytest.skip("this CPU has no AVX2 and FMA: the AVX2 renderer's code cannot run here")


# *** (a) two machines side by side ***


def test_host_facts_give_each_renderer_its_capabilities():
    """Renderers built from an AVX2 host's facts and an AVX-512 host's have the vector widths, registers, masked
    loads and cache sizes those machines have, in one process, whichever was built first."""
    avx512, avx2 = CRenderer(AVX512_HOST), CRenderer(AVX2_HOST)
    f32 = dtypes.float32
    assert (avx2.max_lanes(Ops.MULACC, f32), avx512.max_lanes(Ops.MULACC, f32)) == (YMM_FLOATS, ZMM_FLOATS)
    assert (avx2.max_lanes(Ops.ADD, dtypes.float64), avx512.max_lanes(Ops.ADD, dtypes.float64)) == (4, 8)
    assert (avx2.vector_registers, avx512.vector_registers) == (16, 32)
    assert (avx2.l1_bytes, avx2.l2_bytes) == (32 << 10, 512 << 10)
    assert (avx512.l1_bytes, avx512.l2_bytes) == (48 << 10, 2 << 20)
    # AVX2's vmaskmovps reads 8 or 4 lanes; AVX-512 (DQ, VL) masks 16, 8 and 4
    assert [avx2.masked_load(f32.vec(n)) for n in (16, 8, 4)] == [False, True, True]
    assert [avx512.masked_load(f32.vec(n)) for n in (16, 8, 4)] == [True, True, True]
    llvm2, llvm512 = LLVMRenderer(AVX2_HOST), LLVMRenderer(AVX512_HOST)
    assert (llvm2.max_lanes(Ops.ADD, f32), llvm512.max_lanes(Ops.ADD, f32)) == (YMM_FLOATS, ZMM_FLOATS)
    assert (llvm2.vector_registers, llvm512.l2_bytes) == (16, 2 << 20)
    # PoCL's renderer plans with the CPU it runs on; its vectors are the driver's (`lanes`)
    pocl = OpenCLRenderer(frozenset(), 16, host=AVX512_HOST)
    assert (pocl.vector_registers, pocl.l1_bytes, pocl.max_lanes(Ops.ADD, f32)) == (32, 48 << 10, 16)


def test_avx512_turned_off_is_avx2s_width():
    """`use_avx512=False` (what ZG_AVX512=0 sets when the host is read) keeps 256-bit vectors on an AVX-512 CPU."""
    off = CRenderer(HostCPU(AVX512_HOST.flags, use_avx512=False))
    assert off.max_lanes(Ops.MULACC, dtypes.float32) == YMM_FLOATS and off.vector_registers == 16
    assert not off.masked_load(dtypes.float32.vec(16))


def test_a_cpu_without_avx2_computes_float_builtins_lane_by_lane():
    """A CPU nothing is known of gets no x86 builtins: fused multiply-add, sqrt and trunc are lane by lane."""
    bare = CRenderer(HostCPU())
    assert bare.max_lanes(Ops.MULACC, dtypes.float32) == 1 and bare.max_lanes(Ops.ADD, dtypes.float32) == YMM_FLOATS
    assert not bare.masked_load(dtypes.float32.vec(8))


def test_the_same_matmul_gets_each_machines_plan_and_vectors():
    """One matmul kernel planned and rendered for each machine: the plans differ, and each program's fused
    multiply-adds are as wide as its machine's registers (ps256 builtins and float8 vectors, or ps512 and
    float16). Rendering for one machine leaves the other's code as it was."""
    a, b = (Tensor(x).realize() for x in _rng(0).standard_normal((2, 64, 64)).astype(np.float32))
    item = _item(a @ b)
    renderers = {"avx2": CRenderer(AVX2_HOST), "avx512": CRenderer(AVX512_HOST)}
    plans = {k: hand_coded_opts(item.ast, r) for k, r in renderers.items()}
    assert plans["avx2"] != plans["avx512"]
    srcs = {}
    for k, r in renderers.items():
        program = get_program(item.ast, r, plans[k])
        widths = {u.dtype.count for u in program.uops if u.op is Ops.MULACC}
        assert max(widths) == r.max_lanes(Ops.MULACC, dtypes.float32), widths
        srcs[k] = program.src
    assert "vfmaddps256" in srcs["avx2"] and "ps512" not in srcs["avx2"] and "float16" not in srcs["avx2"]
    assert "vfmaddps512" in srcs["avx512"] and "float16" in srcs["avx512"]
    assert get_program(item.ast, renderers["avx2"], plans["avx2"]).src == srcs["avx2"]
    # one plan, two machines: a run of 16 floats is two vectors, or one
    plan = [Opt(OptOps.UPCAST, 1, 16)]
    two = get_program(item.ast, renderers["avx2"], plan).uops
    one = get_program(item.ast, renderers["avx512"], plan).uops
    assert max(u.dtype.count for u in two if u.op is Ops.MULACC) == 8
    assert max(u.dtype.count for u in one if u.op is Ops.MULACC) == 16


def test_a_padded_row_reads_with_each_machines_masked_loads():
    """Rows of 14 padded to 16, one run of 16 lanes: AVX2's renderer reads it with vmaskmovps (8 lanes), AVX-512's
    with a masked vmovups of 16."""
    x = Tensor(_rng(1).standard_normal((3, 14)).astype(np.float32)).realize()
    item = _item(x.pad(((0, 0), (1, 1))) * 2)
    plan = [Opt(OptOps.UPCAST, 1, 16)]
    avx2 = get_program(item.ast, CRenderer(AVX2_HOST), plan).src
    avx512 = get_program(item.ast, CRenderer(AVX512_HOST), plan).src
    assert "__builtin_ia32_maskloadps256" in avx2 and "loadups" not in avx2
    assert "__builtin_ia32_loadups512_mask" in avx512 and "maskload" not in avx512


# *** (b) the AVX2 machine's kernels compute numpy's values (this CPU runs AVX2 code, never AVX-512's) ***


def test_avx2_renderers_matmul_is_numpys():
    _needs_avx2()
    a, b = _rng(2).standard_normal((2, 96, 80)).astype(np.float32)
    b = b.T.copy()
    got, program = _run(Tensor(a).realize() @ Tensor(b).realize(), CRenderer(AVX2_HOST))
    assert "vfmaddps256" in program.src
    np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


def test_avx2_renderers_masked_loads_read_the_padding_as_zero():
    _needs_avx2()
    a = _rng(3).standard_normal((3, 14)).astype(np.float32)
    got, program = _run(
        Tensor(a).realize().pad(((0, 0), (1, 1))) * 2, CRenderer(AVX2_HOST), [Opt(OptOps.UPCAST, 1, 16)]
    )
    assert "maskloadps256" in program.src
    np.testing.assert_array_equal(got, np.pad(a, ((0, 0), (1, 1))) * 2)


@pytest.mark.parametrize("op", ["maximum", "sqrt", "trunc"])
def test_avx2_renderers_vector_builtins_are_numpys(op: str):
    """NaN-propagating max, sqrt and truncation on float8 vectors (x86 builtins), special values included."""
    _needs_avx2()
    x, y = _rng(4).standard_normal((2, 4, 32)).astype(np.float32) * 3
    x[0, :6] = [np.nan, np.inf, -np.inf, -0.0, 2.5, -2.5]
    y[0, 4] = np.nan
    tx, ty = Tensor(x).realize(), Tensor(y).realize()
    t, want = {
        "maximum": (tx.maximum(ty), np.maximum(x, y)),
        "sqrt": (tx.abs().sqrt(), np.sqrt(np.abs(x))),
        "trunc": (tx.trunc(), np.trunc(x)),
    }[op]
    got, program = _run(t, CRenderer(AVX2_HOST), [Opt(OptOps.UPCAST, 1, 8)])
    assert "float8" in program.src and "ps256" in program.src
    np.testing.assert_array_equal(got, want)


# *** (c) every renderer is a Renderer, every capability documented ***


def _renderer_classes() -> list[type]:
    classes = []
    for info in pkgutil.iter_modules(renderer_package.__path__):
        module = importlib.import_module(f"zeptograd.renderer.{info.name}")
        classes += [c for _, c in inspect.getmembers(module, inspect.isclass) if c.__module__ == module.__name__]
    return [c for c in classes if c.__name__.endswith("Renderer")]


def test_every_renderer_class_is_a_renderer():
    classes = _renderer_classes()
    names = {c.__name__ for c in classes}
    assert {"CRenderer", "LLVMRenderer", "OpenCLRenderer", "WGSLRenderer", "CUDARenderer", "PTXRenderer"} <= names
    assert {"TritonRenderer", "HIPRenderer", "ListingRenderer"} <= names
    assert [c.__name__ for c in classes if not issubclass(c, Renderer)] == []


def test_every_capability_of_the_base_has_a_docstring():
    """Each attribute the base class declares is followed by its docstring; each method has one."""
    tree = ast.parse((PACKAGE / "renderer" / "__init__.py").read_text())
    (cls,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Renderer"]
    documented: set[str] = set()
    missing: list[str] = []
    for node, after in zip(cls.body, [*cls.body[1:], None]):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            doc = after.value.value if isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant) else None
            has_doc, name = isinstance(doc, str) and bool(doc.strip()), node.target.id
        elif isinstance(node, ast.FunctionDef):
            has_doc, name = bool(ast.get_docstring(node)), node.name
        else:
            continue
        if has_doc:
            documented.add(name)
        else:
            missing.append(name)
    assert missing == []
    public = {name for name in vars(Renderer) if not name.startswith("_")}
    assert public == documented, public ^ documented
    # what the passes ask: all of it on the base, with a default
    asked = {"device", "has_local", "has_shared", "has_threads", "runs_on_cpu", "max_local_size", "local_size"}
    asked |= {"local_memory_bytes", "tensor_cores", "vector_registers", "l1_bytes", "l2_bytes", "max_lanes"}
    asked |= {"masked_load", "supported_dtypes", "emulated_floats", "fused_mulacc", "paired_gated_stores"}
    assert asked <= public


def test_the_renderer_package_imports_nothing_of_the_runtime():
    """Renderers are built from facts handed to them (a device reads its host and passes it): no module of the
    renderer package imports zeptograd.runtime (at the top or inside a function)."""
    for path in sorted((PACKAGE / "renderer").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            names += [a.name for a in node.names] if isinstance(node, ast.Import) else []
            assert not any(n.startswith("zeptograd.runtime") for n in names), f"{path.name} imports {names}"


# *** (d) the passes ask the typed Renderer, never getattr with a default ***


def test_no_pass_guesses_at_a_renderers_capabilities():
    """No `getattr(renderer, ...)` (or of `self.renderer`, a device's renderer) and no `renderer: Any` in the
    package: a capability a pass needs is on the base Renderer, with its default."""
    pattern = re.compile(r"getattr\((self\.)?renderer\b|getattr\(Device\[[^\]]*\]\.renderer|renderer: Any\b")
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{n}: {line.strip()}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert found == [], "\n".join(found)
