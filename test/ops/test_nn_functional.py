"""Neural-network Tensor ops (zeptograd/mixin/nn.py): convolution, transposed convolution, pooling, losses,
normalization, attention and initializers.

Oracle: torch (values and gradients with respect to every float input, through a random upstream gradient);
the initializers are checked statistically (bounds, mean, std), not against torch's generator."""

from __future__ import annotations

import math

import numpy as np
import pytest

from zeptograd import Context, GlobalCounters, Tensor, dtypes
from zeptograd.engine.facts import device_facts, layout_facts
from zeptograd.runtime.device import padded_reads_in_place
from zeptograd.schedule.layout import channels_last_weight
from zeptograd.uop.ops import Ops

torch = pytest.importorskip("torch")
F = torch.nn.functional

RTOL, ATOL = 1e-4, 1e-5


def _randn(shape: tuple[int, ...], seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _against_torch(zfn, tfn, inputs: list[np.ndarray], others: tuple = (), atol: float = ATOL, rtol: float = RTOL):
    """zfn(*tensors, *others) against tfn(*torch tensors, *others): the value, and the gradient of
    sum(out * g) (g random) with respect to each float input."""
    zs = [Tensor(a) for a in inputs]
    ts = [torch.tensor(a, requires_grad=True) for a in inputs]
    out, expect = zfn(*zs, *others), tfn(*ts, *others)
    assert out.shape == tuple(expect.shape), (out.shape, tuple(expect.shape))
    g = _randn(out.shape, 99)
    grads = (out * Tensor(g)).sum().gradient(*zs)
    (expect * torch.tensor(g)).sum().backward()
    np.testing.assert_allclose(out.numpy(), expect.detach().numpy(), rtol=rtol, atol=atol)
    for i, (gz, t) in enumerate(zip(grads, ts)):
        np.testing.assert_allclose(gz.numpy(), t.grad.numpy(), rtol=rtol, atol=atol, err_msg=f"gradient of input {i}")


def _distinct(shape: tuple[int, ...], seed: int) -> np.ndarray:
    """Values with no ties (max pooling routes the gradient to one element in torch, splits ties here)."""
    n = math.prod(shape)
    return (np.random.default_rng(seed).permutation(n).astype(np.float32) / n - 0.5).reshape(shape)


# *** conv2d ***

TORCH_CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}

CONV_CASES = [
    # (input shape, weight shape, kwargs)
    ((2, 3, 7, 6), (4, 3, 3, 3), {}),
    ((2, 3, 7, 6), (4, 3, 3, 2), {"padding": 1}),  # non-square kernel
    ((2, 3, 7, 6), (4, 3, 3, 3), {"stride": 2, "padding": (1, 2)}),
    ((2, 3, 7, 6), (4, 3, 2, 3), {"stride": (2, 1), "dilation": (2, 1), "padding": (2, 0)}),
    ((2, 4, 7, 6), (6, 2, 3, 3), {"groups": 2, "stride": (1, 2), "dilation": 2, "padding": 2}),
    ((1, 6, 5, 5), (6, 1, 3, 3), {"groups": 6, "padding": 1}),  # depthwise, batch 1
    ((2, 3, 7, 6), (4, 3, 1, 1), {"stride": 3}),  # 1x1 kernel, stride larger than the kernel
    ((2, 3, 7, 6), (4, 3, 2, 2), {"stride": 4}),  # windows with gaps between them
    ((2, 3, 1, 6), (4, 3, 1, 3), {}),  # a spatial dim of size 1
    ((2, 3, 7, 6), (4, 3, 7, 6), {}),  # the kernel covers the input: 1x1 output
    ((2, 3, 7, 6), (4, 3, 3, 3), {"padding": "same", "dilation": (1, 2)}),
    ((2, 3, 7, 6), (4, 3, 2, 2), {"padding": "same"}),  # even kernel: the extra pad goes after
    ((2, 3, 7, 6), (4, 3, 3, 3), {"padding": "valid"}),
    ((2, 3, 9), (4, 3, 3), {}),  # conv1d
    ((2, 3, 9), (4, 3, 3), {"stride": 3, "padding": 2, "dilation": 2}),
    ((2, 4, 9), (2, 2, 2), {"groups": 2, "stride": 2}),
    ((2, 2, 4, 5, 3), (3, 2, 2, 3, 2), {}),  # conv3d
    ((1, 2, 4, 5, 3), (4, 1, 2, 2, 2), {"stride": (1, 2, 1), "padding": (1, 0, 1), "groups": 2}),
]


@pytest.mark.no_roundtrip  # big graphs (forward and backward); test_nn_graphs_round_trip covers the pyrender check
@pytest.mark.filterwarnings("ignore:Using padding='same'")
@pytest.mark.parametrize("xs,ws,kw", CONV_CASES)
def test_conv2d(xs, ws, kw):
    x, w, b = _randn(xs, 0), _randn(ws, 1), _randn(ws[:1], 2)
    tconv = TORCH_CONV[len(xs) - 2]
    _against_torch(lambda x, w, b: x.conv2d(w, b, **kw), lambda x, w, b: tconv(x, w, b, **kw), [x, w, b], atol=1e-4)


@pytest.mark.no_roundtrip
@pytest.mark.parametrize(
    "stride, padding, groups",
    [(1, 1, 1), (2, 1, 1), (2, (0, 2), 1), (1, 1, 16), (2, 1, 4)],  # (12 + 2 - 3) % 2: a row the stride skips
)
def test_conv_input_gradient_is_a_transposed_convolution(stride, padding, groups):
    """A convolution's input gradient is the transposed convolution of the upstream gradient, not traced
    through the windows, whose backward stored a product per tap (9x the input for 3x3) and then summed the shifted
    taps: no buffer of its schedule is bigger than twice the input. Gradients and a second derivative against
    torch."""
    from zeptograd.schedule.kernelize import create_schedule

    cout = 16 if groups == 16 else 8  # 16: depthwise
    xs, ws, gs = _randn((2, 16, 12, 12), 40), _randn((cout, 16 // groups, 3, 3), 41), None
    x, w = Tensor(xs, requires_grad=True), Tensor(ws, requires_grad=True)
    y = x.conv2d(w, stride=stride, padding=padding, groups=groups)
    gs = _randn(y.shape, 42)
    dx, dw = (y * Tensor(gs)).sum().gradient(x, w)
    h = _randn(xs.shape, 43)
    (d2,) = (dx * Tensor(h)).sum().gradient(w)  # built before dx is realized
    items, _ = create_schedule([dx.uop], ["CPU"], device_facts)
    assert max(b.arg[2] for item in items for b in item.bufs) <= 2 * xs.size, [item.ast.arg for item in items]
    tx, tw = torch.tensor(xs, requires_grad=True), torch.tensor(ws, requires_grad=True)
    ty = F.conv2d(tx, tw, stride=stride, padding=padding, groups=groups)
    tdx, tdw = torch.autograd.grad((ty * torch.tensor(gs)).sum(), (tx, tw), create_graph=True)
    np.testing.assert_allclose(dx.numpy(), tdx.detach().numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(dw.numpy(), tdw.detach().numpy(), rtol=1e-4, atol=1e-3)
    # the second derivative: d(sum(dx * h))/dw, through the transposed convolution's own gradient
    (td2,) = torch.autograd.grad((tdx * torch.tensor(h)).sum(), (tw,))
    np.testing.assert_allclose(d2.numpy(), td2.numpy(), rtol=1e-4, atol=1e-3)


def test_nn_graphs_round_trip():
    """One small case per op family with the pyrender round trip of every graph built (forward and backward);
    the parametrized tests skip it to keep the file fast."""
    x, w = _distinct((1, 2, 4, 3), 16), _randn((2, 1, 2, 2), 17)
    kw = {"groups": 2, "stride": 2}
    _against_torch(lambda x, w: x.conv2d(w, **kw), lambda x, w: F.conv2d(x, w, **kw), [x, w])
    _against_torch(
        lambda x, w: x.conv_transpose2d(w, stride=2, padding=1, output_padding=1),
        lambda x, w: F.conv_transpose2d(x, w, stride=2, padding=1, output_padding=1),
        [x, w.reshape(2, 1, 2, 2)],
    )
    _against_torch(lambda x: x.max_pool2d((2, 2), stride=1, padding=1), lambda x: F.max_pool2d(x, 2, 1, 1), [x])
    _against_torch(
        lambda x: x.avg_pool2d((3, 2), padding=1, ceil_mode=True, count_include_pad=False),
        lambda x: F.avg_pool2d(x, (3, 2), padding=1, ceil_mode=True, count_include_pad=False),
        [x],
    )
    y = np.array([1, 0, 2], np.int64)
    logits = _randn((3, 4), 18)
    _against_torch(
        lambda x: x.cross_entropy(Tensor(y), label_smoothing=0.1),
        lambda x: F.cross_entropy(x, torch.tensor(y), label_smoothing=0.1),
        [logits],
    )
    target = (logits > 0).astype(np.float32)
    _against_torch(
        lambda x: x.binary_crossentropy_logits(Tensor(target), pos_weight=Tensor([2.0])),
        lambda x: F.binary_cross_entropy_with_logits(x, torch.tensor(target), pos_weight=torch.tensor([2.0])),
        [logits],
    )
    _against_torch(lambda x: x.layernorm(), lambda x: F.layer_norm(x, (4,)), [logits])
    q = logits.reshape(1, 3, 4)
    _against_torch(
        lambda q: q.scaled_dot_product_attention(q, q, is_causal=True),
        lambda q: F.scaled_dot_product_attention(q, q, q, is_causal=True),
        [q],
    )


# inputs of at least PAD_COPY_MIN elements: the CPU reads a padded copy, channels-last (and a channels-last weight)
# when the convolution is dense with at least CHANNELS_LAST_MIN channels in and out
LARGE_CONV_CASES = [
    ((2, 16, 48, 48), (32, 16, 3, 3), {"padding": 1}),  # channels-last
    ((2, 16, 48, 48), (16, 16, 3, 3), {"stride": 2, "dilation": 2, "padding": (2, 1)}),
    ((2, 16, 47, 45), (24, 16, 2, 3), {}),  # odd sizes, 24 filters (8 lanes), no padding
    ((1, 16, 4100), (16, 16, 5), {"padding": 2}),  # conv1d
    ((1, 16, 10, 20, 24), (16, 16, 3, 1, 2), {"padding": (1, 0, 1)}),  # conv3d
    ((2, 8, 64, 64), (16, 8, 3, 3), {"padding": 1}),  # few input channels: a plain padded copy
    ((2, 16, 48, 48), (32, 8, 3, 3), {"padding": 1, "groups": 2}),  # grouped: a plain padded copy
]


@pytest.mark.no_roundtrip
@pytest.mark.parametrize("xs,ws,kw", LARGE_CONV_CASES)
def test_large_conv_against_torch(xs, ws, kw):
    x, w, b = _randn(xs, 20), _randn(ws, 21) / math.sqrt(math.prod(ws[1:])), _randn(ws[:1], 22)
    tconv = TORCH_CONV[len(xs) - 2]
    _against_torch(lambda x, w, b: x.conv2d(w, b, **kw), lambda x, w, b: tconv(x, w, b, **kw), [x, w, b], atol=2e-4)


@pytest.mark.parametrize(
    "size, k, stride, dilation",
    [
        (9, 3, 1, 1),  # a 3x3 convolution's windows
        (9, 3, 2, 1),  # overlapping and strided (every other column of each row)
        (9, 2, 6, 2),  # dilated with a stride past the row: the rows are zero-padded up to the windows' span
        (10, 3, 2, 3),
    ],
)
def test_windows_on_all_axes_at_once(size, k, stride, dilation):
    """The overlapping windows of both spatial axes are built by one chain of movement ops acting on every axis
    (a 3x3 stride-1 convolution: 7 UOps, not 15); values against torch for conv2d and max_pool2d."""
    from zeptograd.mixin.nn import _windows

    if (stride, dilation) == (1, 1):
        u = Tensor(_randn((1, 1, size, size), 30)).uop
        movement = (Ops.RESHAPE, Ops.EXPAND, Ops.PAD, Ops.SHRINK, Ops.PERMUTE)
        built = _windows(u, (k, k), (1, 1), (1, 1)).toposort(gate=lambda n: n is not u)
        nodes = [n for n in built if n.op in movement and n is not u]
        assert len(nodes) <= 7, [n.op for n in nodes]
    x, w = _randn((2, 3, size, size + 1), 31), _randn((4, 3, k, k), 32)
    kw = {"stride": stride, "dilation": dilation}
    _against_torch(lambda x, w: x.conv2d(w, **kw), lambda x, w: F.conv2d(x, w, **kw), [x, w], atol=1e-4)
    _against_torch(
        lambda x: x.max_pool2d(k, stride, dilation=dilation),
        lambda x: F.max_pool2d(x, k, stride, dilation=dilation),
        [x],
    )


def test_windows_overlapping_on_one_axis_only():
    """A window that overlaps along its rows (3 taps, stride 1) but not its columns (2 taps, stride 2) takes the
    general construction on both axes; values against torch for max_pool2d and conv2d."""
    x, w = _randn((2, 3, 11, 13), 33), _randn((4, 3, 3, 2), 34)
    _against_torch(lambda x: x.max_pool2d((3, 2), (1, 2)), lambda x: F.max_pool2d(x, (3, 2), (1, 2)), [x])
    _against_torch(
        lambda x, w: x.conv2d(w, stride=(1, 2)), lambda x, w: F.conv2d(x, w, stride=(1, 2)), [x, w], atol=1e-4
    )


@pytest.mark.parametrize(
    "device, k, kernels",
    [
        # the weight's channels-last copy, the convolution reading its input where it lies (AVX-512), or the input's
        # channels-last copy too (AVX2: padded_reads_in_place)
        ("CPU", 3, 2 if padded_reads_in_place("CPU") else 3),
        ("CPU", 1, 3),  # a 1x1 convolution (a matmul over channels): the input's channels-last copy too
        ("LLVM", 3, 3),  # LLVM selects each gated load's address: the input's padded channels-last copy
    ],
)
def test_large_conv_kernels_per_device(device, k, kernels):
    # CPU layouts (the GPU devices keep NCHW), so on these devices whatever DEVICE says
    if device == "LLVM":
        pytest.importorskip("llvmlite")
    x = Tensor(_randn((2, 16, 48, 48), 23), device=device)
    w = Tensor(_randn((32, 16, k, k), 24), device=device)
    out = x.conv2d(w, padding=k // 2)
    GlobalCounters.reset()
    out.realize()
    assert GlobalCounters.kernel_count == kernels
    want = F.conv2d(torch.tensor(x.numpy()), torch.tensor(w.numpy()), padding=k // 2).numpy()
    np.testing.assert_allclose(out.numpy(), want, atol=1e-4)


@pytest.mark.parametrize("cout, dtype, stored", [(16, "float64", 24), (24, "float32", 24), (40, "float64", 40)])
def test_channels_last_weight_rows_padded_to_an_odd_number_of_cache_lines(cout, dtype, stored):
    """A channels-last weight (*k, Cin, Cout) that is not stored in panels (Cout one panel, or not a multiple of one)
    and whose rows are a multiple of two cache lines is stored with one line of padding a row (16 float64 channels:
    128-byte rows -> 192); the padding is never read into the result, which is torch's."""
    from zeptograd.schedule.kernelize import create_schedule

    x = Tensor(_randn((2, 16, 48, 48), 25).astype(dtype), device="CPU")
    w = Tensor(_randn((cout, 16, 3, 3), 26).astype(dtype), device="CPU")
    out = x.conv2d(w, padding=1)
    items, _ = create_schedule([out.uop], ["CPU"], device_facts)
    sizes = sorted(b.arg[2] for item in items[:-1] for b in item.bufs[:1])
    assert 3 * 3 * 16 * stored in sizes, sizes
    want = F.conv2d(torch.tensor(x.numpy()), torch.tensor(w.numpy()), padding=1).numpy()
    np.testing.assert_allclose(out.numpy(), want, atol=1e-4)


@pytest.mark.parametrize("panels", [1, 2, 3])
def test_channels_last_weight_stored_in_panels(panels):
    """A convolution's weight whose output channels divide into two or more panels of two vectors (a panel: 16
    float32 with AVX2, 32 with AVX-512) is stored as matmul's B is: Cout / panel contiguous panels (*k, Cin, panel),
    the block the kernel's tile of two vectors of channels walks through; one panel's worth is stored (*k, Cin,
    Cout), its rows padded to an odd number of cache lines. Read back, it is the weight; the convolution is
    torch's."""
    panel = layout_facts("CPU").panel
    cout = panels * panel
    wn = _randn((cout, 16, 3, 3), 27)
    w = Tensor(wn, device="CPU")
    view = channels_last_weight(w.uop, 2, (cout, 16, 3, 3), panel)
    (stored,) = [u for u in view.toposort() if u.op is Ops.CONTIGUOUS]
    got = Tensor._from_uop(stored, "CPU").numpy()
    if panels > 1:
        np.testing.assert_array_equal(got, wn.reshape(panels, panel, 16, 3, 3).transpose(0, 3, 4, 2, 1))
    else:
        rows = wn.transpose(2, 3, 1, 0)  # (*k, Cin, Cout)
        assert got.shape[:3] == rows.shape[:3] and got.shape[3] * 4 % 128 == 64, got.shape
        np.testing.assert_array_equal(got[..., :cout], rows)
    np.testing.assert_array_equal(Tensor._from_uop(view, "CPU").numpy(), wn)
    x = Tensor(_randn((2, 16, 48, 48), 28), device="CPU")
    want = F.conv2d(torch.tensor(x.numpy()), torch.tensor(wn), padding=1).numpy()
    np.testing.assert_allclose(x.conv2d(w, padding=1).numpy(), want, atol=1e-4)


@pytest.mark.no_roundtrip
def test_conv2d_no_bias_flat_padding_and_unbatched():
    x, w = _randn((2, 3, 7, 6), 3), _randn((4, 3, 3, 2), 4)
    # PyTorch's flat form: (left, right, top, bottom), here uneven
    _against_torch(
        lambda x, w: x.conv2d(w, padding=(1, 0, 2, 1)),
        lambda x, w: F.conv2d(F.pad(x, (1, 0, 2, 1)), w),
        [x, w],
        atol=1e-4,
    )
    # an unbatched (C, L) input, as nn.Conv1d accepts
    x1, w1 = x[0, :, 0], w[:, :, 0]
    _against_torch(lambda x, w: x.conv2d(w, padding=1), lambda x, w: F.conv1d(x, w, padding=1), [x1, w1])


def test_conv2d_is_one_kernel():
    x, w, b = Tensor(_randn((2, 3, 7, 6), 5)), Tensor(_randn((4, 3, 3, 3), 6)), Tensor(_randn((4,), 7))
    for kw in ({}, {"padding": 1}, {"stride": 2, "dilation": 2, "padding": 2}):
        out = x.conv2d(w, b, **kw)
        GlobalCounters.reset()
        out.realize()
        assert GlobalCounters.kernel_count == 1, kw


def test_conv2d_dtypes_and_python_device():
    x, w = _randn((1, 2, 5, 4), 8), _randn((3, 2, 2, 2), 9)
    expect = F.conv2d(torch.tensor(x), torch.tensor(w), padding=1).numpy()
    half = Tensor(x, dtype=dtypes.float16).conv2d(Tensor(w, dtype=dtypes.float16), padding=1)
    assert half.dtype is dtypes.float16
    np.testing.assert_allclose(half.numpy().astype(np.float32), expect, rtol=1e-2, atol=1e-2)
    acc = Tensor(x, dtype=dtypes.float16).conv2d(Tensor(w, dtype=dtypes.float16), padding=1, dtype=dtypes.float32)
    assert acc.dtype is dtypes.float32
    py = Tensor(x, device="PYTHON").conv2d(Tensor(w, device="PYTHON"), padding=1, stride=(2, 1))
    assert py.device == "PYTHON"
    np.testing.assert_allclose(py.numpy(), expect[:, :, ::2], rtol=RTOL, atol=1e-5)
    xi, wi = np.arange(12, dtype=np.int32).reshape(1, 1, 3, 4), np.ones((1, 1, 2, 2), np.int32)
    out = Tensor(xi).conv2d(Tensor(wi))
    assert out.dtype is dtypes.int32 and out.tolist() == [[[[10, 14, 18], [26, 30, 34]]]]


# *** Winograd convolution (WINO=1) ***


@pytest.mark.parametrize(
    "xs, ws, kw",
    [
        ((8, 64, 56, 56), (64, 64, 3, 3), {"padding": 1}),  # bench/ops.py's ResNet layer
        ((2, 3, 13, 17), (5, 3, 3, 3), {"padding": 1}),  # sizes that are not whole tiles
        ((1, 4, 9, 6), (2, 4, 3, 3), {}),
        ((2, 5, 7, 7), (3, 5, 3, 3), {"padding": (2, 1)}),
        ((1, 2, 3, 3), (1, 2, 3, 3), {}),  # one output
        ((2, 6, 10, 10), (4, 6, 3, 3), {"padding": 1, "bias": True}),
    ],
)
def test_winograd_conv2d_matches_the_exact_sum(xs, ws, kw):
    """With WINO=1 a 3x3 stride-1 float32 convolution is Winograd F(4x4, 3x3): it matches torch's in float64 to
    1e-5 of the output's scale (F(4x4, 3x3)'s rounding: about 4e-5 for the 64-channel layer whose outputs reach
    5, against 1e-6 for the direct sum), and it is not the direct sum's single kernel."""
    kw = dict(kw)
    x, w = _randn(xs, 31), _randn(ws, 32) / math.sqrt(9 * ws[1])
    b = _randn((ws[0],), 33) if kw.pop("bias", False) else None
    want = F.conv2d(
        torch.tensor(x, dtype=torch.float64),
        torch.tensor(w, dtype=torch.float64),
        None if b is None else torch.tensor(b, dtype=torch.float64),
        **kw,
    ).numpy()
    with Context(WINO=1):
        out = Tensor(x).conv2d(Tensor(w), None if b is None else Tensor(b), **kw)
        GlobalCounters.reset()
        got = out.numpy()
    assert GlobalCounters.kernel_count > 1
    assert got.shape == want.shape and got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-5 * max(1.0, float(np.abs(want).max())))


@pytest.mark.parametrize("kw", [{}, {"padding": 1}, {"stride": 2}, {"padding": (1, 0), "stride": (2, 1)}])
def test_winograd_serves_conv_transpose2d(kw):
    """conv_transpose2d is a stride-1 convolution of the (dilated, padded) input with the flipped kernel, so with
    WINO=1 a 3x3 one is Winograd too (cropping pads included), and matches torch to F(4x4, 3x3)'s rounding."""
    x, w = _randn((2, 4, 9, 7), 40), _randn((4, 3, 3, 3), 41)
    want = F.conv_transpose2d(torch.tensor(x, dtype=torch.float64), torch.tensor(w, dtype=torch.float64), **kw)
    with Context(WINO=1):
        out = Tensor(x).conv_transpose2d(Tensor(w), **kw)
        GlobalCounters.reset()
        got = out.numpy()
    assert GlobalCounters.kernel_count > 1
    np.testing.assert_allclose(got, want.numpy(), rtol=0, atol=2e-5 * max(1.0, float(want.abs().max())))


def test_winograd_leaves_other_convolutions_to_the_direct_sum():
    """WINO=1 changes only 3x3, stride-1, ungrouped float32 convolutions: the others stay one kernel, exact."""
    x = _randn((2, 4, 9, 9), 34)
    cases = [
        ((4, 4, 3, 3), {"stride": 2}),
        ((4, 4, 3, 3), {"dilation": 2}),
        ((4, 2, 3, 3), {"groups": 2}),
        ((4, 4, 5, 5), {"padding": 2}),
        ((4, 4, 2, 2), {}),
    ]
    for ws, kw in cases:
        w = _randn(ws, 35)
        want = F.conv2d(torch.tensor(x), torch.tensor(w), **kw).numpy()
        with Context(WINO=1):
            out = Tensor(x).conv2d(Tensor(w), **kw)
            GlobalCounters.reset()
            got = out.numpy()
        assert GlobalCounters.kernel_count == 1, (ws, kw)
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)


def test_winograd_conv2d_gradients_match_torch():
    """The Winograd graph is Tensor ops, so autograd differentiates it: the input's, the weight's and the bias's
    gradients match torch's direct convolution."""
    x, w, b = _randn((2, 3, 10, 11), 36), _randn((4, 3, 3, 3), 37) / 5, _randn((4,), 38)
    g = _randn((2, 4, 10, 11), 39)
    tx, tw, tb = (torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in (x, w, b))
    (F.conv2d(tx, tw, tb, padding=1) * torch.tensor(g, dtype=torch.float64)).sum().backward()
    with Context(WINO=1):
        zx, zw, zb = (Tensor(v, requires_grad=True) for v in (x, w, b))
        (zx.conv2d(zw, zb, padding=1) * Tensor(g)).sum().backward()
        grads = [t.grad.numpy() for t in (zx, zw, zb)]
    for got, want in zip(grads, (tx.grad, tw.grad, tb.grad)):
        np.testing.assert_allclose(got, want.numpy(), rtol=1e-4, atol=1e-4)


# *** conv_transpose2d ***

TORCH_CONV_T = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}

CONV_T_CASES = [
    ((2, 3, 4, 5), (3, 2, 3, 3), {}),
    ((2, 3, 4, 5), (3, 2, 3, 2), {"stride": 2, "padding": 1, "output_padding": 1}),
    ((2, 3, 4, 5), (3, 2, 3, 3), {"stride": (3, 2), "padding": (2, 0), "output_padding": (1, 0)}),
    ((2, 4, 4, 5), (4, 3, 2, 3), {"groups": 2, "stride": 2, "dilation": (2, 1), "output_padding": (1, 1)}),
    ((2, 3, 4, 5), (3, 2, 3, 3), {"stride": 2, "padding": 3}),  # padding past d * (k - 1): the conv crops
    ((1, 2, 6), (2, 3, 4), {"stride": 3, "padding": 2, "output_padding": 2}),  # 1-d
    ((1, 2, 3, 2, 3), (2, 2, 2, 3, 2), {"stride": (2, 1, 2), "padding": (0, 1, 1)}),  # 3-d
    ((2, 3, 4, 5), (3, 2, 3, 3), {"dilation": 3, "output_padding": 2}),  # output_padding past the stride
    ((2, 8, 4, 4), (8, 4, 2, 2), {"stride": 2}),  # a UNet's upsampling: windows that do not overlap
]


@pytest.mark.no_roundtrip
@pytest.mark.parametrize("xs,ws,kw", CONV_T_CASES)
def test_conv_transpose2d(xs, ws, kw):
    groups = kw.get("groups", 1)
    x, w, b = _randn(xs, 10), _randn(ws, 11), _randn((ws[1] * groups,), 12)
    tconv = TORCH_CONV_T[len(xs) - 2]
    _against_torch(
        lambda x, w, b: x.conv_transpose2d(w, b, **kw), lambda x, w, b: tconv(x, w, b, **kw), [x, w, b], atol=1e-4
    )


# *** pooling ***

TORCH_MAX = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}
TORCH_AVG = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}

POOL_CASES = [
    # (input shape, kernel, kwargs)
    ((2, 3, 7, 6), (2, 2), {}),
    ((2, 3, 7, 6), (3, 3), {"stride": 2, "padding": 1}),
    ((2, 3, 7, 6), (3, 2), {"stride": (1, 3), "padding": (1, 0)}),  # stride != kernel, each way
    ((2, 3, 7, 6), (2, 3), {"stride": 2, "ceil_mode": True}),
    ((2, 3, 7, 6), (3, 3), {"stride": 2, "padding": 1, "ceil_mode": True}),
    ((1, 1, 5, 5), (2, 2), {"stride": 3, "ceil_mode": True}),  # a ceil window would start in the padding: dropped
    ((1, 1, 1, 5), (1, 2), {"ceil_mode": True}),  # a size-1 axis
    ((2, 3, 7, 6), (7, 6), {}),  # global pooling
    ((2, 3, 9), (3,), {"stride": 2, "padding": 1}),  # 1-d
    ((1, 2, 5, 4, 5), (2, 2, 3), {"stride": (2, 1, 2), "padding": (1, 0, 1)}),  # 3-d
]


@pytest.mark.parametrize(
    "x_shape,w_shape,kwargs",
    [
        ((8, 64, 56, 56), (64, 64, 3, 3), {"padding": 1}),  # channels-last copies of input and weight
        ((2, 8, 96, 96), (8, 8, 3, 3), {"padding": 1}),  # a padded copy of the input
        ((2, 4, 9, 9), (6, 2, 3, 3), {"groups": 2, "stride": 2, "padding": 1}),  # no copy
        ((2, 3, 10), (5, 3, 3), {"dilation": 2}),
        ((1, 4, 5, 6, 7), (2, 4, 2, 3, 2), {"padding": 1}),
    ],
)
def test_conv_graph_built_as_uops_is_the_tensor_ops_graph(x_shape, w_shape, kwargs, monkeypatch):
    # conv2d builds its graph from UOps directly when one float dtype sums in one stage; an explicit `dtype` takes
    # the tensor ops (x * w).sum(...), which must build the very same nodes (hash-consing makes them one object)
    rng = np.random.default_rng(0)
    x = Tensor(rng.standard_normal(x_shape, dtype=np.float32))
    w = Tensor(rng.standard_normal(w_shape, dtype=np.float32))
    with monkeypatch.context() as m:
        m.setattr(Tensor, "sum", lambda *a, **k: pytest.fail("the UOp path called Tensor.sum"))
        direct = x.conv2d(w, **kwargs)
    assert direct.uop is x.conv2d(w, dtype="float32", **kwargs).uop


@pytest.mark.no_roundtrip
@pytest.mark.parametrize("n", [1, 5, 8])
@pytest.mark.parametrize("k,s,d", [(1, 1, 1), (1, 2, 3), (2, 2, 1), (2, 3, 1), (3, 1, 1), (3, 2, 2), (2, 1, 3)])
def test_sliding_windows_brute_force(n, k, s, d):
    """The windows every convolution and pool reads (`_pool`, built as UOps) against indexing element by element:
    out[b, o, j] = x[b, o * s + j * d], over two axes at once (the second with the taps of the first swapped)."""
    if d * (k - 1) + 1 > n:
        pytest.skip("the dilated kernel does not fit")
    x = _randn((2, n, n + 1), 0)
    got = Tensor(x)._pool((k, k), (s, s), (d, d)).numpy()
    o0, o1 = (n - d * (k - 1) - 1) // s + 1, (n + 1 - d * (k - 1) - 1) // s + 1
    want = np.empty((2, o0, o1, k, k), dtype=np.float32)
    for i in np.ndindex(*want.shape):
        b, p, q, j, m = i
        want[i] = x[b, p * s + j * d, q * s + m * d]
    np.testing.assert_array_equal(got, want)


def test_sliding_windows_that_overlap_are_not_a_view():
    """Writing to overlapping windows (a zero-padded copy of the axis underneath) leaves the input as it was."""
    x = Tensor(np.arange(6, dtype=np.float32)).realize()
    w = x._pool((3,), (1,), (1,))
    w[0, 0] = 100.0
    np.testing.assert_array_equal(x.numpy(), np.arange(6, dtype=np.float32))
    assert w.numpy()[0, 0] == 100.0


@pytest.mark.parametrize("xs,k,kw", POOL_CASES)
def test_max_pool2d(xs, k, kw):
    tpool = TORCH_MAX[len(k)]
    _against_torch(lambda x: x.max_pool2d(k, **kw), lambda x: tpool(x, k, **kw), [_distinct(xs, 13)])


@pytest.mark.no_roundtrip
@pytest.mark.parametrize(
    "xs,k,kw", [((2, 3, 7, 6), (3, 3), {"dilation": 2, "padding": 1}), ((2, 3, 9), (2,), {"dilation": 3})]
)
def test_max_pool2d_dilation(xs, k, kw):
    tpool = TORCH_MAX[len(k)]
    _against_torch(lambda x: x.max_pool2d(k, **kw), lambda x: tpool(x, k, **kw), [_distinct(xs, 14)])


def test_max_pool2d_defaults_and_ints():
    x = np.arange(24, dtype=np.int32).reshape(1, 4, 6)
    out = Tensor(x).max_pool2d()  # an int kernel_size: 2x2 over the last two axes, stride 2
    assert out.dtype is dtypes.int32 and out.tolist() == [[[7, 9, 11], [19, 21, 23]]]
    # padding with an integer dtype pads with the dtype's least value, not -inf
    assert Tensor([[-5, -7, -1]]).max_pool2d((2,), padding=1).tolist() == [[-5, -1]]


# return_indices and max_unpool: ties, NaN, padding, ceil_mode, dilation and 1-3 spatial dims


def _ties_and_nan(shape: tuple[int, ...], seed: int) -> np.ndarray:
    a = np.random.default_rng(seed).integers(-3, 4, shape).astype(np.float32)  # many ties in each window
    a.reshape(-1)[[3 % a.size, 17 % a.size]] = np.nan
    return a


@pytest.mark.no_roundtrip
@pytest.mark.parametrize("xs,k,kw", POOL_CASES + [((2, 3, 7, 6), (3, 3), {"dilation": 2, "padding": 1})])
def test_max_pool2d_return_indices(xs, k, kw):
    a = _ties_and_nan(xs, 31)
    want_v, want_i = TORCH_MAX[len(k)](torch.tensor(a), k, return_indices=True, **kw)
    values, indices = Tensor(a).max_pool2d(k, return_indices=True, **kw)
    np.testing.assert_array_equal(values.numpy(), want_v.numpy())
    assert indices.dtype is dtypes.int32
    np.testing.assert_array_equal(indices.numpy(), want_i.numpy())
    neg = np.full(xs, -np.inf, np.float32)  # every tap -inf: the first tap inside the input, never the padding
    np.testing.assert_array_equal(
        Tensor(neg).max_pool2d(k, return_indices=True, **kw)[1].numpy(),
        TORCH_MAX[len(k)](torch.tensor(neg), k, return_indices=True, **kw)[1].numpy(),
    )


TORCH_UNPOOL = {1: F.max_unpool1d, 2: F.max_unpool2d, 3: F.max_unpool3d}


@pytest.mark.no_roundtrip
@pytest.mark.parametrize(
    "xs,k,kw",
    [
        ((2, 3, 8, 6), (2, 2), {}),
        ((2, 3, 7, 7), (3, 3), {"stride": 2, "padding": 1}),  # overlapping windows: a repeated index, last wins
        ((2, 3, 9), (3,), {"stride": 2, "padding": 1}),
        ((1, 2, 4, 4, 6), (2, 2, 3), {}),
    ],
)
def test_max_unpool2d_against_torch(xs, k, kw):
    a = _randn(xs, 32).round(1)  # some ties, so overlapping windows share a maximum
    tv, ti = TORCH_MAX[len(k)](torch.tensor(a), k, return_indices=True, **kw)
    _, indices = Tensor(a).max_pool2d(k, return_indices=True, **kw)
    _against_torch(
        lambda v: v.max_unpool2d(indices, k, **kw),
        lambda v: TORCH_UNPOOL[len(k)](v, ti, k, **kw),
        [tv.numpy()],
    )
    size = xs[-len(k) :]
    _against_torch(  # back to the pooled input's size (an odd size the default formula does not give)
        lambda v: v.max_unpool2d(indices, k, output_size=xs, **kw),
        lambda v: TORCH_UNPOOL[len(k)](v, ti, k, output_size=size, **kw),
        [tv.numpy()],
    )


def test_max_unpool2d_errors():
    from zeptograd.helpers import ArgumentError

    v, i = Tensor(_randn((1, 1, 4, 4), 33)).max_pool2d(2, return_indices=True)
    with pytest.raises(ValueError):
        F.max_unpool2d(torch.ones(1, 1, 2, 2), torch.zeros(1, 1, 2, 2, dtype=torch.long), 2, output_size=(9, 9))
    with pytest.raises(ArgumentError, match="output_size"):
        v.max_unpool2d(i, 2, output_size=(9, 9))
    with pytest.raises(ArgumentError, match="indices"):
        v.max_unpool2d(i.reshape(1, 1, 4), 2)
    with pytest.raises(TypeError, match="indices"):
        v.max_unpool2d(i.float(), 2)


# count_include_pad=False only differs where a window reaches into padding (or a ceil_mode extra)
AVG_CASES = [(*case, True) for case in POOL_CASES] + [
    (*case, False) for case in POOL_CASES if case[2].get("padding") or case[2].get("ceil_mode")
]


@pytest.mark.no_roundtrip
@pytest.mark.parametrize("xs,k,kw,count_include_pad", AVG_CASES)
def test_avg_pool2d(xs, k, kw, count_include_pad):
    tpool = TORCH_AVG[len(k)]
    _against_torch(
        lambda x: x.avg_pool2d(k, count_include_pad=count_include_pad, **kw),
        lambda x: tpool(x, k, count_include_pad=count_include_pad, **kw),
        [_randn(xs, 15)],
    )


# *** losses ***

REDUCTIONS = ["mean", "sum", "none"]


@pytest.mark.no_roundtrip
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("smoothing", [0.0, 0.2])
def test_cross_entropy_indices(reduction, smoothing):
    y = np.array([0, 3, 1, 3], np.int64)
    _against_torch(
        lambda x: x.cross_entropy(Tensor(y.astype(np.int32)), reduction=reduction, label_smoothing=smoothing),
        lambda x: F.cross_entropy(x, torch.tensor(y), reduction=reduction, label_smoothing=smoothing),
        [_randn((4, 5), 20)],
    )


@pytest.mark.no_roundtrip
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cross_entropy_spatial_ignore_index_and_unbatched(reduction):
    y = np.random.default_rng(21).integers(0, 3, (2, 4, 2))
    y[0, 1, 0] = y[1, 3, 1] = -100  # torch's default ignore_index
    _against_torch(
        lambda x: x.cross_entropy(Tensor(y), reduction=reduction, label_smoothing=0.1),
        lambda x: F.cross_entropy(x, torch.tensor(y), reduction=reduction, label_smoothing=0.1),
        [_randn((2, 3, 4, 2), 22)],
    )
    y2 = np.array([2, 1, 0], np.int64)
    _against_torch(
        lambda x: x.cross_entropy(Tensor(y2), reduction=reduction, ignore_index=1),
        lambda x: F.cross_entropy(x, torch.tensor(y2), reduction=reduction, ignore_index=1),
        [_randn((3, 4), 23)],
    )
    _against_torch(  # unbatched: logits (C,), target ()
        lambda x: x.cross_entropy(Tensor(2), reduction=reduction),
        lambda x: F.cross_entropy(x, torch.tensor(2), reduction=reduction),
        [_randn((4,), 24)],
    )


@pytest.mark.no_roundtrip
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("smoothing", [0.0, 0.2])
def test_cross_entropy_weight(reduction, smoothing):
    w = np.array([1.0, 2.5, 0.5, 3.0, 0.25], np.float32)
    y = np.array([0, 3, 1, -100, 4, 3], np.int64)
    _against_torch(
        lambda x: x.cross_entropy(Tensor(y), reduction=reduction, label_smoothing=smoothing, weight=Tensor(w)),
        lambda x: F.cross_entropy(
            x, torch.tensor(y), reduction=reduction, label_smoothing=smoothing, weight=torch.tensor(w)
        ),
        [_randn((6, 5), 27)],
    )
    ys = np.random.default_rng(28).integers(0, 5, (2, 3, 2))
    ys[1, 2, 0] = 2
    _against_torch(  # spatial targets, a custom ignore_index
        lambda x: x.cross_entropy(
            Tensor(ys), reduction=reduction, label_smoothing=smoothing, weight=Tensor(w), ignore_index=2
        ),
        lambda x: F.cross_entropy(
            x, torch.tensor(ys), reduction=reduction, label_smoothing=smoothing, weight=torch.tensor(w), ignore_index=2
        ),
        [_randn((2, 5, 3, 2), 29)],
    )
    probs = np.random.default_rng(30).dirichlet(np.ones(5), size=4).astype(np.float32)
    _against_torch(
        lambda x, p: x.cross_entropy(p, reduction=reduction, label_smoothing=smoothing, weight=Tensor(w)),
        lambda x, p: F.cross_entropy(x, p, reduction=reduction, label_smoothing=smoothing, weight=torch.tensor(w)),
        [_randn((4, 5), 31), probs],
    )


def test_cross_entropy_weight_errors():
    from zeptograd.helpers import ArgumentError

    x, y = Tensor(_randn((3, 4), 34)), Tensor([0, 1, 2])
    with pytest.raises(RuntimeError):
        F.cross_entropy(torch.ones(3, 4), torch.tensor([0, 1, 2]), weight=torch.ones(3))
    with pytest.raises(ArgumentError, match="weight"):
        x.cross_entropy(y, weight=Tensor.ones(3))
    with pytest.raises(TypeError, match="weight"):
        x.cross_entropy(y, weight=[1.0, 1.0, 1.0, 1.0])


@pytest.mark.no_roundtrip
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("smoothing", [0.0, 0.3])
def test_cross_entropy_probabilities(reduction, smoothing):
    probs = np.random.default_rng(25).dirichlet(np.ones(4), size=(3, 2)).transpose(0, 2, 1).astype(np.float32)
    _against_torch(
        lambda x, p: x.cross_entropy(p, reduction=reduction, label_smoothing=smoothing),
        lambda x, p: F.cross_entropy(x, p, reduction=reduction, label_smoothing=smoothing),
        [_randn((3, 4, 2), 26), probs],
    )


@pytest.mark.no_roundtrip
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("smoothing", [0.0, 0.25])
def test_sparse_categorical_crossentropy(reduction, smoothing):
    y = np.array([[1, -1, 4], [0, 2, -1]], np.int32)  # -1 is the default ignore_index
    _against_torch(
        lambda x: x.sparse_categorical_crossentropy(Tensor(y), label_smoothing=smoothing, reduction=reduction),
        lambda x: F.cross_entropy(
            x.permute(0, 2, 1), torch.tensor(y).long(), ignore_index=-1, label_smoothing=smoothing, reduction=reduction
        ),
        [_randn((2, 3, 5), 27)],
    )
    y1 = np.array([3, 0, 3, 1], np.int32)
    _against_torch(
        lambda x: x.sparse_categorical_crossentropy(Tensor(y1), ignore_index=3, reduction=reduction),
        lambda x: F.cross_entropy(x, torch.tensor(y1, dtype=torch.int64), ignore_index=3, reduction=reduction),
        [_randn((4, 5), 28)],
    )


@pytest.mark.no_roundtrip
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
def test_nll_loss(reduction, weighted):
    w = np.array([0.5, 2.0, 1.0, 0.1], np.float32)
    y = np.array([1, 3, 0, 1, 2], np.int64)
    logp = np.log(np.random.default_rng(29).dirichlet(np.ones(4), size=5)).astype(np.float32)
    zw, tw = (Tensor(w), torch.tensor(w)) if weighted else (None, None)
    _against_torch(
        lambda x: x.nll_loss(Tensor(y), zw, ignore_index=3, reduction=reduction),
        lambda x: F.nll_loss(x, torch.tensor(y), tw, ignore_index=3, reduction=reduction),
        [logp],
    )
    ys = np.random.default_rng(30).integers(0, 4, (2, 3))
    _against_torch(  # (N, C, d) without ignore_index
        lambda x: x.nll_loss(Tensor(ys), zw, reduction=reduction),
        lambda x: F.nll_loss(x, torch.tensor(ys), tw, reduction=reduction),
        [_randn((2, 4, 3), 31)],
    )


@pytest.mark.no_roundtrip
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_binary_crossentropy(reduction):
    p = np.random.default_rng(32).uniform(0.05, 0.95, (3, 4)).astype(np.float32)
    y = np.random.default_rng(33).uniform(0, 1, (3, 4)).astype(np.float32)  # soft targets
    _against_torch(
        lambda p: p.binary_crossentropy(Tensor(y), reduction=reduction),
        lambda p: F.binary_cross_entropy(p, torch.tensor(y), reduction=reduction),
        [p],
    )
    # torch clamps each log at -100: a probability of exactly 0 or 1 gives a finite loss
    edge = Tensor([0.0, 1.0]).binary_crossentropy(Tensor([1.0, 0.0]), reduction=reduction)
    expect = F.binary_cross_entropy(torch.tensor([0.0, 1.0]), torch.tensor([1.0, 0.0]), reduction=reduction)
    np.testing.assert_allclose(edge.numpy(), expect.numpy())


@pytest.mark.no_roundtrip
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("pos_weight", [False, True])
def test_binary_crossentropy_logits(reduction, pos_weight):
    x = _randn((3, 4), 34) * 4
    x[0, 0], x[1, 1] = 80.0, -80.0  # far past where sigmoid rounds to 0 or 1: still finite and exact
    y = (np.random.default_rng(35).uniform(0, 1, (3, 4)) > 0.5).astype(np.float32)
    pw = np.array([0.5, 1.0, 2.0, 3.0], np.float32)
    _against_torch(
        lambda x: x.binary_crossentropy_logits(Tensor(y), reduction, Tensor(pw) if pos_weight else None),
        lambda x: F.binary_cross_entropy_with_logits(
            x, torch.tensor(y), reduction=reduction, pos_weight=torch.tensor(pw) if pos_weight else None
        ),
        [x],
    )


# *** normalization ***


@pytest.mark.no_roundtrip
@pytest.mark.parametrize("shape,axis", [((2, 3, 5), -1), ((2, 3, 5), (1, 2)), ((4, 1), -1)])
def test_layernorm(shape, axis):
    norm = shape[-1:] if axis == -1 else shape[1:]
    _against_torch(
        lambda x: x.layernorm(axis, eps=1e-5),
        lambda x: F.layer_norm(x, norm, eps=1e-5),
        [_randn(shape, 40) * 3 + 1],
        atol=1e-4,
    )


@pytest.mark.no_roundtrip
@pytest.mark.parametrize("shape,axis", [((2, 3, 5), -1), ((2, 3, 5), (1, 2))])
def test_rms_norm(shape, axis):
    norm = shape[-1:] if axis == -1 else shape[1:]
    _against_torch(
        lambda x: x.rms_norm(axis, eps=1e-6), lambda x: F.rms_norm(x, norm, eps=1e-6), [_randn(shape, 41) + 0.5]
    )


def test_batchnorm():
    x, w, b, mean = _randn((2, 3, 4, 2), 42), _randn((3,), 43), _randn((3,), 44), _randn((3,), 45)
    var = np.random.default_rng(46).uniform(0.5, 2, 3).astype(np.float32)
    invstd = (1 / np.sqrt(var + 1e-5)).astype(np.float32)
    _against_torch(
        lambda x, w, b: x.batchnorm(w, b, Tensor(mean), Tensor(invstd)),
        lambda x, w, b: F.batch_norm(x, torch.tensor(mean), torch.tensor(var), w, b, training=False, eps=1e-5),
        [x, w, b],
    )
    # without weight and bias, and normalized along the last axis
    xs = _randn((4, 3), 47)
    out = Tensor(xs).batchnorm(None, None, Tensor(mean), Tensor(invstd), axis=-1)
    np.testing.assert_allclose(out.numpy(), (xs - mean) * invstd, rtol=RTOL, atol=ATOL)


# *** attention ***


@pytest.mark.no_roundtrip
@pytest.mark.parametrize(
    "mask_kind,causal,scale", [(None, False, None), (None, True, None), ("bool", False, None), ("float", False, 0.3)]
)
def test_scaled_dot_product_attention(mask_kind, causal, scale):
    q, k, v = _randn((2, 2, 3, 4), 50), _randn((2, 2, 5, 4), 51), _randn((2, 2, 5, 3), 52)
    mask = None
    if mask_kind == "bool":
        mask = np.random.default_rng(53).uniform(0, 1, (3, 5)) > 0.4
        mask[:, 0] = True  # no row is masked out entirely
    elif mask_kind == "float":
        mask = _randn((2, 1, 3, 5), 54)
    _against_torch(
        lambda q, k, v: q.scaled_dot_product_attention(
            k, v, None if mask is None else Tensor(mask), is_causal=causal, scale=scale
        ),
        lambda q, k, v: F.scaled_dot_product_attention(
            q, k, v, None if mask is None else torch.tensor(mask), is_causal=causal, scale=scale
        ),
        [q, k, v],
    )


@pytest.mark.no_roundtrip
def test_scaled_dot_product_attention_gqa():
    q, k, v = _randn((1, 4, 3, 2), 55), _randn((1, 2, 3, 2), 56), _randn((1, 2, 3, 2), 57)
    _against_torch(
        lambda q, k, v: q.scaled_dot_product_attention(k, v, is_causal=True, enable_gqa=True),
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True),
        [q, k, v],
    )


@pytest.mark.no_roundtrip
def test_scaled_dot_product_attention_dropout_only_in_training():
    q = Tensor(_randn((2, 3, 4), 58))
    plain = q.scaled_dot_product_attention(q, q).numpy()
    np.testing.assert_array_equal(q.scaled_dot_product_attention(q, q, dropout_p=0.9).numpy(), plain)
    with Tensor.train():
        dropped = q.scaled_dot_product_attention(q, q, dropout_p=0.9).numpy()
    assert not np.allclose(dropped, plain)


# *** initializers ***


@pytest.mark.no_roundtrip  # random numbers are big graphs (Threefry), and sorting more so
def test_kaiming_and_glorot():
    Tensor.manual_seed(3)
    shape = (64, 32, 3, 3)  # fan_in 288
    for name, bound in [
        ("kaiming_uniform", math.sqrt(6 / ((1 + 0.01**2) * 288))),
        ("glorot_uniform", math.sqrt(6 / (64 + 288))),
    ]:
        w = getattr(Tensor, name)(*shape).numpy()
        assert w.shape == shape and w.dtype == np.float32
        assert np.abs(w).max() <= bound and np.abs(w).max() > 0.98 * bound, name
        assert abs(w.mean()) < 0.02 * bound and abs(w.std() - bound / math.sqrt(3)) < 0.03 * bound, name
    w = Tensor.kaiming_uniform(200, 50, a=math.sqrt(5)).numpy()  # PyTorch's nn.Linear choice of a
    assert np.abs(w).max() <= 1 / math.sqrt(50) and np.abs(w).max() > 0.98 / math.sqrt(50)
    std = math.sqrt(2 / (1 + 0.01**2) / 288)
    w = Tensor.kaiming_normal(shape).numpy()  # the shape as one tuple works too
    assert abs(w.mean()) < 0.02 * std and abs(w.std() - std) < 0.03 * std
    assert np.abs(w).max() > 3 * std  # a normal, not a uniform, distribution
    half = Tensor.kaiming_uniform(4, 5, dtype=dtypes.float16, device="PYTHON")
    assert half.dtype is dtypes.float16 and half.device == "PYTHON"
    s = Tensor.scaled_uniform(16, 16).numpy()
    assert np.abs(s).max() <= 1 / 16 and abs(s.std() - 1 / 16 / math.sqrt(3)) < 0.1 / 16


@pytest.mark.no_roundtrip
def test_randperm():
    Tensor.manual_seed(4)
    a, b = Tensor.randperm(20), Tensor.randperm(20)
    assert a.dtype is dtypes.int32 and a.shape == (20,)
    assert sorted(a.tolist()) == list(range(20)) and sorted(b.tolist()) == list(range(20))
    assert a.tolist() != b.tolist() and a.tolist() != list(range(20))
    assert Tensor.randperm(3, dtype=dtypes.int64).dtype is dtypes.int64
    assert Tensor.randperm(0).shape == (0,) and Tensor.randperm(1).tolist() == [0]


# *** bad input ***

X = Tensor.zeros(2, 3, 7, 6)
W = Tensor.zeros(4, 3, 3, 3)
LOGITS = Tensor.zeros(4, 5)


@pytest.mark.parametrize(
    "fn,exc,match",
    [
        (lambda: X.conv2d(Tensor.zeros(4, 3)), ValueError, r"conv2d: weight must be .* got shape \(4, 3\)"),
        (lambda: Tensor.zeros(3, 7).conv2d(W), ValueError, r"conv2d: .* needs a 4-d input .* got shape \(3, 7\)"),
        (lambda: X.conv2d(Tensor.zeros(4, 2, 3, 3)), ValueError, r"conv2d: input has 3 channels .* expects 2"),
        (lambda: X.conv2d(Tensor.zeros(4, 1, 3, 3), groups=2), ValueError, r"conv2d: input has 3 channels .* groups=2"),
        (lambda: X.conv2d(Tensor.zeros(3, 1, 3, 3), groups=3, bias=Tensor.zeros(4)), ValueError, r"conv2d: bias"),
        (
            lambda: Tensor.zeros(2, 4, 7, 6).conv2d(Tensor.zeros(3, 2, 3, 3), groups=2),
            ValueError,
            r"must divide by groups",
        ),
        (lambda: X.conv2d(W, groups=0), ValueError, r"conv2d: groups must be positive"),
        (
            lambda: X.conv2d(Tensor.zeros(4, 3, 8, 3)),
            ValueError,
            r"conv2d: the kernel \(8, 3\) .* bigger than the padded input \(7, 6\)",
        ),
        (lambda: X.conv2d(W, dilation=4), ValueError, r"conv2d: the kernel \(3, 3\) \(dilation \(4, 4\)\) is bigger"),
        (lambda: X.conv2d(W, stride=0), ValueError, r"conv2d: stride must be positive, got 0"),
        (lambda: X.conv2d(W, stride=(1, 2, 3)), ValueError, r"conv2d: stride \(1, 2, 3\) needs 2 entries"),
        (lambda: X.conv2d(W, padding=-1), ValueError, r"conv2d: padding must be non-negative"),
        (lambda: X.conv2d(W, padding=(1, 1, 1)), ValueError, r"conv2d: padding \(1, 1, 1\) needs 2 entries .* or 4"),
        (lambda: X.conv2d(W, padding="full"), ValueError, r"conv2d: padding string must be 'valid' or 'same'"),
        (lambda: X.conv2d(W, padding="same", stride=2), ValueError, r"conv2d: padding='same' needs stride 1"),
        (lambda: X.conv2d(W, stride=1.5), TypeError, r"conv2d: stride must be an int"),
        (lambda: X.conv2d("w"), TypeError, r"conv2d: weight must be a Tensor"),
        (
            lambda: X.conv_transpose2d(Tensor.zeros(2, 4, 3, 3)),
            ValueError,
            r"conv_transpose2d: input has 3 channels .* expects 2",
        ),
        (
            lambda: X.conv_transpose2d(W.reshape(3, 4, 3, 3), stride=2, output_padding=2),
            ValueError,
            r"conv_transpose2d: output_padding \(2, 2\) must be",
        ),
        (
            lambda: X.conv_transpose2d(W.reshape(3, 4, 3, 3), groups=2),
            ValueError,
            r"conv_transpose2d: in channels 3 .* groups 2",
        ),
        (lambda: X.max_pool2d((3, 3), padding=2), ValueError, r"max_pool2d: padding 2 must be at most half the kernel"),
        (lambda: X.max_pool2d((8, 2)), ValueError, r"max_pool2d: the kernel \(8, 2\) .* bigger than the padded input"),
        (lambda: X.avg_pool2d((2, 2), stride=0), ValueError, r"avg_pool2d: stride must be positive"),
        (lambda: X.avg_pool2d((2, 2, 2, 2, 2)), ValueError, r"avg_pool2d: a 5-d kernel .* at least 5 dims"),
        (lambda: X.avg_pool2d(()), ValueError, r"avg_pool2d: kernel_size must not be empty"),
        (
            lambda: LOGITS.cross_entropy(Tensor([0, 1, 2])),
            ValueError,
            r"cross_entropy: Y has shape \(3,\), expected \(4,\)",
        ),
        (
            lambda: LOGITS.cross_entropy(Tensor.zeros(4, 4)),
            ValueError,
            r"cross_entropy: probability targets .* \(4, 5\)",
        ),
        (
            lambda: LOGITS.cross_entropy(Tensor([0, 1, 2, 3]), reduction="avg"),
            ValueError,
            r"cross_entropy: reduction must be one of",
        ),
        (
            lambda: LOGITS.cross_entropy(Tensor([0, 1, 2, 3]), label_smoothing=1.5),
            ValueError,
            r"cross_entropy: label_smoothing must be in \[0, 1\]",
        ),
        (
            lambda: LOGITS.cross_entropy(Tensor([True, False, True, False])),
            TypeError,
            r"cross_entropy: Y must hold integer class indices, got dtype dtypes.bool",
        ),
        (
            lambda: Tensor([1, 2]).cross_entropy(Tensor(0)),
            TypeError,
            r"cross_entropy: input must have a floating-point",
        ),
        (
            lambda: LOGITS.sparse_categorical_crossentropy(Tensor.zeros(4)),
            TypeError,
            r"sparse_categorical_crossentropy: Y must hold integer",
        ),
        (
            lambda: LOGITS.sparse_categorical_crossentropy(Tensor([1, 2])),
            ValueError,
            r"sparse_categorical_crossentropy: Y has shape \(2,\)",
        ),
        (
            lambda: LOGITS.sparse_categorical_crossentropy(Tensor([0, 1, 2, 3]), reduction=None),
            ValueError,
            r"reduction must be one of",
        ),
        (
            lambda: LOGITS.nll_loss(Tensor([0, 1, 2, 3]), weight=Tensor.ones(4)),
            ValueError,
            r"nll_loss: weight must have shape \(5,\)",
        ),
        (
            lambda: LOGITS.nll_loss(Tensor([[0, 1, 2, 3]])),
            ValueError,
            r"nll_loss: Y has shape \(1, 4\), expected \(4,\)",
        ),
        (
            lambda: LOGITS.binary_crossentropy(Tensor.zeros(4)),
            ValueError,
            r"binary_crossentropy: Y has shape \(4,\), the input \(4, 5\)",
        ),
        (
            lambda: LOGITS.binary_crossentropy_logits(LOGITS, reduction="max"),
            ValueError,
            r"binary_crossentropy_logits: reduction",
        ),
        (
            lambda: LOGITS.binary_crossentropy_logits(LOGITS, pos_weight=Tensor.ones(4)),
            ValueError,
            r"pos_weight of shape \(4,\)",
        ),
        (
            lambda: X.batchnorm(None, None, Tensor.zeros(4), Tensor.ones(3)),
            ValueError,
            r"batchnorm: mean must have shape \(3,\)",
        ),
        (lambda: X.layernorm(axis=4), IndexError, r"layernorm: axis 4 is out of range"),
        (
            lambda: LOGITS.scaled_dot_product_attention(Tensor.zeros(4, 3), LOGITS),
            ValueError,
            r"scaled_dot_product_attention: query \(4, 5\), key \(4, 3\)",
        ),
        (
            lambda: LOGITS.scaled_dot_product_attention(LOGITS, LOGITS, Tensor.ones(4, 4), is_causal=True),
            RuntimeError,
            r"attn_mask or is_causal",
        ),
        (
            lambda: LOGITS.scaled_dot_product_attention(LOGITS, LOGITS, Tensor.ones(3, 4)),
            ValueError,
            r"attn_mask of shape \(3, 4\)",
        ),
        (
            lambda: Tensor.kaiming_uniform(4, 0),
            ValueError,
            r"kaiming_uniform: needs a non-empty shape of positive sizes",
        ),
        (lambda: Tensor.glorot_uniform(), ValueError, r"glorot_uniform: needs a non-empty shape"),
        (lambda: Tensor.randperm(-1), ValueError, r"randperm: n must be non-negative"),
        (lambda: Tensor.randperm(3, dtype=dtypes.bool), TypeError, r"randperm: dtype must be"),
    ],
)
def test_bad_input(fn, exc, match):
    with pytest.raises(exc, match=match):
        fn()
