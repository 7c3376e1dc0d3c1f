"""The scheduler's layout pass: which copies a contraction reads its operands from, decided per device from its
renderer's facts, never by the Tensor front end. Values are torch's or numpy's whatever the layouts."""

from __future__ import annotations

import math

import numpy as np
import pytest

from zeptograd import Device, Tensor
from zeptograd.codegen.heuristic import hand_coded_opts
from zeptograd.codegen.opt import OptOps
from zeptograd.engine import realize as engine
from zeptograd.engine.facts import layout_facts
from zeptograd.helpers import Context
from zeptograd.renderer.cstyle import CRenderer
from zeptograd.renderer.host import HostCPU
from zeptograd.schedule.kernelize import create_schedule
from zeptograd.schedule.layout import LayoutFacts, reads_in_order
from zeptograd.uop.ops import Ops

NO_LAYOUTS = LayoutFacts(vector_layouts=False, float_lanes=1, reads_padded_in_place=False, tensor_cores=())


def _randn(shape: tuple[int, ...], seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


AVX2 = HostCPU(frozenset({"avx2", "fma"}))
AVX512 = HostCPU(frozenset({"avx2", "fma", "avx512f", "avx512dq", "avx512vl"}))


def _host(monkeypatch: pytest.MonkeyPatch, host: HostCPU) -> None:
    """Give the CPU device the renderer of CPU `host` (kernels are planned for it here, never run)."""
    monkeypatch.setattr(Device["CPU"], "renderer", CRenderer(host))


def _program(x: Tensor, w: Tensor, m: Tensor, v: Tensor) -> list[Tensor]:
    """A convolution and a matmul, forward and backward: the loss's gradients."""
    loss = x.conv2d(w, padding=1).relu().sum() + (m @ v).relu().sum()
    return list(loss.gradient(w, v))


def test_one_tensor_graph_on_every_host_and_layouts_per_host(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same program builds the same tensor graph with the CPU device's renderer made for an AVX2 host and for an
    AVX-512 host; the schedules differ (a matmul's B panels and a convolution weight's are two vectors wide: 16 or 32
    columns), and so do the kernels' plans."""
    shapes = ((2, 16, 48, 48), (32, 16, 3, 3), (48, 256), (256, 256))
    inputs = [Tensor(_randn(shape, seed)).realize() for seed, shape in enumerate(shapes)]
    graphs, schedules, plans = [], [], []
    for host in (AVX2, AVX512):
        with monkeypatch.context() as m:
            _host(m, host)
            roots = [g.uop for g in _program(*inputs)]
            graphs.append(roots)
            items, _ = create_schedule(roots, ["CPU"] * len(roots), engine.device_facts)
            schedules.append([item.ast for item in items])
            plans.append([tuple(hand_coded_opts(item.ast, Device["CPU"].renderer)) for item in items])
    assert all(a is b for a, b in zip(*graphs))
    kernels = [{ast.arg for ast in schedule} for schedule in schedules]
    assert "E_16_256_16" in kernels[0] and "E_8_256_32" in kernels[1]  # B's panels: 16 columns, or 32
    # the weight's channels-last copy: 2 panels of 16 output channels, or one row of 32 padded by a cache line
    assert "E_2_3_3_16_16" in kernels[0] and "E_3_3_16_48" in kernels[1]
    assert set(plans[0]) != set(plans[1])


def _facts(monkeypatch: pytest.MonkeyPatch, facts: LayoutFacts | None) -> None:
    """Schedule with layout facts `facts` for every device (None: each device's own)."""
    engine._schedules.clear()
    if facts is not None:
        own = engine.device_facts
        monkeypatch.setattr(engine, "device_facts", lambda device: own(device)._replace(layout=facts))


@pytest.mark.parametrize("copies", [True, False], ids=["device layouts", "no copies"])
def test_layouts_change_no_value(copies: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """A residual convolution block and a matmul trained one step, with this device's layouts and with no layout
    copies at all: each gradient is torch's."""
    torch = pytest.importorskip("torch")
    _facts(monkeypatch, None if copies else NO_LAYOUTS)
    xs, ws, ms, vs = _randn((2, 16, 24, 24), 1), _randn((16, 16, 3, 3), 2), _randn((32, 256), 3), _randn((256, 64), 4)
    x, w, m, v = (Tensor(a).realize() for a in (xs, ws, ms, vs))
    y = x + x.conv2d(w, padding=1, stride=1).relu()
    loss = y.conv2d(w, padding=1, stride=2).square().mean() + (m @ v).tanh().sum()
    gw, gv = loss.gradient(w, v)

    tx, tw, tm, tv = (torch.tensor(a, requires_grad=True) for a in (xs, ws, ms, vs))
    ty = tx + torch.nn.functional.conv2d(tx, tw, padding=1).relu()
    tloss = torch.nn.functional.conv2d(ty, tw, padding=1, stride=2).square().mean() + (tm @ tv).tanh().sum()
    tgw, tgv = torch.autograd.grad(tloss, [tw, tv])
    np.testing.assert_allclose(gw.numpy(), tgw.numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(gv.numpy(), tgv.numpy(), rtol=1e-4, atol=1e-4)
    engine._schedules.clear()


@pytest.mark.parametrize(
    "shapes, transposed, device, kernels",
    [
        (((64, 256), (256, 256)), False, "CPU", 2),  # B in panels, then the product
        (((64, 256), (256, 256)), True, "CPU", 1),  # x @ w.T reads w along the sum: no copy
        (((2, 64, 256), (256, 256)), False, "CPU", 2),  # a batch of A: the same B panels
        (((2, 128), (128, 256)), False, "CPU", 1),  # 2 rows: too few to pay for a copy
        (((64, 256), (256, 256)), False, "PYTHON", 1),  # the interpreter has no caches to lay out for
    ],
)
def test_matmul_panels_are_the_pass_decision(shapes, transposed: bool, device: str, kernels: int) -> None:
    a_np, b_np = _randn(shapes[0], 7), _randn(shapes[1], 8)
    a = Tensor(a_np, device=device).realize()
    b = Tensor(b_np.T.copy() if transposed else b_np, device=device).realize()
    out = a @ (b.T if transposed else b)
    items, _ = create_schedule([out.uop], [device], engine.device_facts)
    assert len(items) == kernels, [item.ast.arg for item in items]
    np.testing.assert_allclose(out.numpy(), a_np.astype(np.float64) @ b_np, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("heads, rows, head_dim, cols", [(12, 128, 64, 768), (7, 45, 40, 192)])
def test_transposed_b_is_read_from_panels_when_a_is_not_read_along_the_sum(heads, rows, head_dim, cols) -> None:
    """Attention heads transposed back, (heads, rows, d) -> (rows, heads * d), times w.T: A is not contiguous along
    the sum, so no kernel reads both operands along it, and w.T is read from panels (a copy, then the product);
    with A read in order no copy is made. The values are numpy's and the unoptimized kernels' (odd sizes too)."""
    hs, ws, bs = _randn((heads, rows, head_dim), 21), _randn((cols, heads * head_dim), 22), _randn((cols,), 23)
    want = np.transpose(hs, (1, 0, 2)).reshape(rows, -1).astype(np.float64) @ ws.T.astype(np.float64) + bs

    def projected() -> Tensor:
        h, w, b = Tensor(hs).realize(), Tensor(ws).realize(), Tensor(bs).realize()
        return h.permute(1, 0, 2).reshape(rows, heads * head_dim) @ w.T + b

    out = projected()
    items, _ = create_schedule([out.uop], ["CPU"], engine.device_facts)
    assert len(items) == 2, [item.ast.arg for item in items]
    assert any(b is items[0].bufs[0] for b in items[1].bufs[1:])  # the product reads the panels
    in_order = Tensor(hs).realize().reshape(rows, heads * head_dim) @ Tensor(ws).realize().T
    assert len(create_schedule([in_order.uop], ["CPU"], engine.device_facts)[0]) == 1
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-4, atol=1e-4)
    with Context(NOOPT=1):
        plain = projected().numpy()
    np.testing.assert_allclose(out.numpy(), plain, rtol=1e-4, atol=1e-4)


def test_reads_in_order_follows_views_and_elementwise_ops() -> None:
    """Whether a kernel reads a value's last axis in order, through its views (numpy's strides are the oracle)."""
    base = Tensor(_randn((4, 6, 8), 24)).realize()
    arr = np.empty((4, 6, 8), np.float32)
    views = {
        "heads kept": (lambda t: t.permute(1, 0, 2), lambda a: np.transpose(a, (1, 0, 2))),
        "heads merged": (lambda t: t.permute(1, 0, 2).reshape(6, 32), None),
        "last two swapped": (lambda t: t.permute(0, 2, 1), lambda a: np.transpose(a, (0, 2, 1))),
        "rows merged": (lambda t: t.reshape(24, 8), lambda a: a.reshape(24, 8)),
        "shrunk and padded": (lambda t: t[:, 1:5, 2:7].pad(((0, 0), (0, 0), (1, 1))), None),
        "flipped": (lambda t: t.flip(2), lambda a: a[:, :, ::-1]),
        "broadcast column": (lambda t: t[:, :, :1].expand(4, 6, 8), lambda a: np.broadcast_to(a[:, :, :1], a.shape)),
        "scaled then swapped": (lambda t: (t * 2 + 1).permute(0, 2, 1), lambda a: np.transpose(a, (0, 2, 1))),
    }
    expected = {"heads merged": False, "shrunk and padded": True}
    for name, (view, numpy_view) in views.items():
        if numpy_view is not None:
            expected[name] = numpy_view(arr).strides[-1] in (0, arr.itemsize)
        assert reads_in_order(view(base).uop) is expected[name], name
    assert reads_in_order((base.permute(1, 0, 2).reshape(6, 32) + 1).contiguous().uop)  # stored row-major


def test_a_front_end_graph_has_no_layout_copies() -> None:
    """matmul and conv2d build plain contractions: no CONTIGUOUS until the scheduler's pass adds them."""
    x, w = Tensor(_randn((2, 16, 48, 48), 9)).realize(), Tensor(_randn((32, 16, 3, 3), 10)).realize()
    a, b = Tensor(_randn((64, 256), 11)).realize(), Tensor(_randn((256, 256), 12)).realize()
    for out in (x.conv2d(w, padding=1), a @ b):
        assert not any(u.op is Ops.CONTIGUOUS for u in out.uop.toposort())
        assert layout_facts("CPU").vector_layouts
        assert len(create_schedule([out.uop], ["CPU"], engine.device_facts)[0]) >= 2


@pytest.mark.parametrize("stride, padding, groups", [(1, 1, 1), (2, 1, 1), (1, 0, 2)])
def test_second_derivative_through_a_weight_gradient(stride: int, padding: int, groups: int) -> None:
    """The gradient of a convolution's weight gradient, with respect to the input and to the output gradient, is
    torch's (double backward)."""
    torch = pytest.importorskip("torch")
    xs, ws = _randn((2, 4, 9, 8), 13), _randn((6, 4 // groups, 3, 3), 14)
    x, w = Tensor(xs), Tensor(ws)
    y = x.conv2d(w, padding=padding, stride=stride, groups=groups)
    gs, hs = _randn(y.shape, 15), _randn(ws.shape, 16)
    g = Tensor(gs)
    (dw,) = (y * g).sum().gradient(w)
    gx, gg = (dw * Tensor(hs)).sum().gradient(x, g)

    tx, tw, tg = torch.tensor(xs, requires_grad=True), torch.tensor(ws, requires_grad=True), torch.tensor(gs)
    tg.requires_grad = True
    ty = torch.nn.functional.conv2d(tx, tw, padding=padding, stride=stride, groups=groups)
    (tdw,) = torch.autograd.grad((ty * tg).sum(), [tw], create_graph=True)
    tgx, tgg = torch.autograd.grad((tdw * torch.tensor(hs)).sum(), [tx, tg])
    np.testing.assert_allclose(dw.numpy(), tdw.detach().numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(gx.numpy(), tgx.numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(gg.numpy(), tgg.numpy(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("in_place, kernels", [(True, 2), (False, 1)])
def test_a_small_convolution_read_in_place_copies_its_weight(in_place: bool, kernels: int, monkeypatch) -> None:
    """A dense convolution on a small map (a UNet's 8x8 level: a padded input below the size a copy of it pays for)
    copies its weight channels-last where the device reads the input in place (then the kernel tiles vectors of
    output channels), and nothing where it would need the input's copy too. The values are torch's either way."""
    torch = pytest.importorskip("torch")
    facts = LayoutFacts(vector_layouts=True, float_lanes=16, reads_padded_in_place=in_place, tensor_cores=())
    _facts(monkeypatch, facts)
    xs, ws = _randn((8, 64, 8, 8), 17), _randn((128, 64, 3, 3), 18)
    out = Tensor(xs).realize().conv2d(Tensor(ws).realize(), padding=1)
    items, _ = create_schedule([out.uop], ["CPU"], engine.device_facts)
    assert len(items) == kernels, [item.ast.arg for item in items]
    want = torch.nn.functional.conv2d(torch.tensor(xs), torch.tensor(ws), padding=1).numpy()
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-4, atol=1e-4)
    engine._schedules.clear()


@pytest.mark.parametrize("in_place", [True, False])
def test_a_convolution_of_few_input_channels_reads_its_weight_channels_last(in_place: bool, monkeypatch) -> None:
    """An image's first convolution (3 channels into 32, 7 x 7, stride 2): too narrow for a channels-last input, it
    still reads its weight from a channels-last copy, so its kernel's tile is vectors of output channels by columns
    (two upcasts, one of them a whole vector of channels), its input padded NCHW. The values are torch's."""
    torch = pytest.importorskip("torch")
    facts = LayoutFacts(vector_layouts=True, float_lanes=16, reads_padded_in_place=in_place, tensor_cores=())
    _facts(monkeypatch, facts)
    xs, ws = _randn((1, 3, 250, 250), 19), _randn((32, 3, 7, 7), 20)
    out = Tensor(xs).realize().conv2d(Tensor(ws).realize(), stride=2, padding=3)
    items, _ = create_schedule([out.uop], ["CPU"], engine.device_facts)
    # the weight's channels-last copy (3 x 7 x 7 rows of 32 channels, each padded to an odd number of cache lines),
    # the input's padded copy, the convolution reading both
    assert len(items) == 3, [item.ast.arg for item in items]
    assert {item.bufs[0] for item in items[:2]} == set(items[-1].bufs[1:])
    assert sorted(math.prod(b.shape) for b in items[-1].bufs[1:]) == [(3 * 7 * 7) * (32 + 16), 3 * 256 * 256]
    opts = hand_coded_opts(items[-1].ast, Device["CPU"].renderer, 16)
    upcasts = sorted(o.amount for o in opts if o.op is OptOps.UPCAST)
    assert len(upcasts) == 2 and upcasts[-1] % 16 == 0, opts
    want = torch.nn.functional.conv2d(torch.tensor(xs), torch.tensor(ws), stride=2, padding=3).numpy()
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-4, atol=1e-4)
    engine._schedules.clear()
