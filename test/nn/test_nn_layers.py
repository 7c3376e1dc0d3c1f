"""The layers of zeptograd.nn against torch.nn: forward outputs and the gradients with respect to the input and
every parameter (torch's parameters copied in by state_dict name), state_dict names and shapes, default
initializations (statistically), training and eval mode, bad arguments, and a tiny training loop.

Oracle: torch (the tests skip without it), except the init statistics (the distributions torch documents)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

import numpy as np
import pytest

from zeptograd import Tensor, dtypes, nn
from zeptograd.uop.buffers import buffer_of

torch = pytest.importorskip("torch")

# every layer's init draws random numbers (Threefry: 20 rounds of ops), so each test builds and compiles large
# graphs; the pyrender round trip of all of them would triple this file's time and checks nothing of the layers
pytestmark = pytest.mark.no_roundtrip


@pytest.fixture(autouse=True)
def _seeded():
    # a fixed seed per test: the same random kernels every run, so the compile cache serves them
    Tensor.manual_seed(0)


def _state(layer: object) -> dict[str, Tensor]:
    """Our layer's tensors by attribute name (what a state dict holds)."""
    return {k: v for k, v in vars(layer).items() if isinstance(v, Tensor)}


def _copy_from_torch(ours: object, theirs: torch.nn.Module) -> None:
    """torch's parameters and buffers into our layer by state_dict name, checking that names and shapes match."""
    sd = theirs.state_dict()
    ours_state = _state(ours)
    assert set(sd) == set(ours_state), f"state dict keys differ: torch {sorted(sd)}, ours {sorted(ours_state)}"
    for k, v in sd.items():
        assert ours_state[k].shape == tuple(v.shape), k
        ours_state[k].assign(v.numpy()).realize()


def _randomize(theirs: torch.nn.Module, rng: np.random.Generator) -> None:
    """Random values for torch's parameters, so that ones/zeros inits don't hide a missing scale or shift."""
    with torch.no_grad():
        for p in theirs.parameters():
            p.copy_(torch.from_numpy(rng.uniform(0.5, 1.5, p.shape).astype(np.float32)))


def _compare(ours: Callable, theirs: torch.nn.Module, x_np: np.ndarray, rtol: float = 1e-4, atol: float = 1e-5) -> None:
    """Forward and backward through both; the loss is sum(out * r) for a fixed random r, so every output
    element gets its own gradient."""
    names = [k for k, _ in theirs.named_parameters()]
    theirs.zero_grad()
    xt = torch.tensor(x_np, requires_grad=True)
    out_t = theirs(xt)
    r = np.random.default_rng(99).standard_normal(tuple(out_t.shape)).astype(np.float32)
    (out_t * torch.from_numpy(r)).sum().backward()
    x = Tensor(x_np)
    out = ours(x)
    assert out.shape == tuple(out_t.shape) and out.dtype is dtypes.float32
    grads = (out * Tensor(r)).sum().gradient(x, *(getattr(ours, k) for k in names))
    Tensor.realize(out, *grads)
    np.testing.assert_allclose(out.numpy(), out_t.detach().numpy(), rtol=rtol, atol=atol, err_msg="forward")
    np.testing.assert_allclose(grads[0].numpy(), xt.grad.numpy(), rtol=rtol, atol=atol, err_msg="input grad")
    for k, g in zip(names, grads[1:]):
        ref = dict(theirs.named_parameters())[k].grad.numpy()
        np.testing.assert_allclose(g.numpy(), ref, rtol=rtol, atol=atol, err_msg=f"grad of {k}")


def _check(ours: object, theirs: torch.nn.Module, x_shape: tuple[int, ...], seed: int = 0, **tol: float) -> None:
    rng = np.random.default_rng(seed)
    _randomize(theirs, rng)
    _copy_from_torch(ours, theirs)
    _compare(ours, theirs, rng.standard_normal(x_shape).astype(np.float32), **tol)


# *** Linear ***


@pytest.mark.parametrize(
    "n_in,n_out,bias,x_shape",
    [(3, 5, True, (4, 3)), (4, 2, False, (2, 3, 4)), (1, 1, True, (1, 1)), (3, 5, True, (3,))],
)
def test_linear_matches_torch(n_in, n_out, bias, x_shape):
    _check(nn.Linear(n_in, n_out, bias=bias), torch.nn.Linear(n_in, n_out, bias=bias), x_shape)


def _assert_uniform(values: np.ndarray, bound: float) -> None:
    """Drawn from uniform(-bound, bound): inside the bounds, reaching near both ends, mean 0 and std
    bound / sqrt(3) within about 5 standard errors."""
    v = values.ravel().astype(np.float64)
    n = v.size
    assert np.all(np.abs(v) <= bound)
    assert v.max() > bound * (1 - 20 / n) and v.min() < -bound * (1 - 20 / n)
    std = bound / math.sqrt(3)
    assert abs(v.mean()) < 5 * std / math.sqrt(n)
    assert abs(v.std() / std - 1) < 5 * math.sqrt(0.8 / n)  # the relative standard error of a uniform's std


def test_linear_init_is_torchs():
    Tensor.manual_seed(0)
    layer = nn.Linear(64, 32)
    assert layer.weight.shape == (32, 64) and layer.bias is not None and layer.bias.shape == (32,)
    _assert_uniform(layer.weight.numpy(), 1 / 8)
    b = layer.bias.numpy()
    assert np.all(np.abs(b) <= 1 / 8) and b.std() > 0.03
    other = nn.Linear(64, 32)
    assert not np.array_equal(other.weight.numpy(), layer.weight.numpy())


# *** convolutions ***

# (in_channels, out_channels, kernel_size), the other arguments, the input's shape
CONV2D_CASES = [
    ((3, 4, 3), {"padding": 1}, (2, 3, 5, 5)),
    ((4, 6, (3, 2)), {"stride": (2, 1), "padding": (1, 0), "dilation": (1, 2), "groups": 2}, (2, 4, 6, 5)),
    ((4, 4, 3), {"groups": 4, "padding": "same", "bias": False}, (1, 4, 5, 4)),  # depthwise
    ((2, 3, 2), {"padding": "same", "dilation": 1}, (1, 2, 4, 5)),  # 'same' with an even kernel: more on the right
    ((3, 2, 1), {}, (1, 3, 1, 1)),
    ((3, 4, 3), {"padding": 1, "padding_mode": "reflect"}, (2, 3, 5, 5)),
    ((3, 4, 3), {"padding": (2, 1), "padding_mode": "circular", "stride": 2}, (2, 3, 5, 5)),
    ((3, 4, (2, 3)), {"padding": "valid", "padding_mode": "replicate"}, (3, 5, 5)),  # unbatched
]


@pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel")  # torch's note on its own speed
@pytest.mark.parametrize("args,kwargs,x_shape", CONV2D_CASES)
def test_conv2d_matches_torch(args, kwargs, x_shape):
    _check(nn.Conv2d(*args, **kwargs), torch.nn.Conv2d(*args, **kwargs), x_shape)


CONV1D_CASES = [
    ((2, 4, 3), {"stride": 2, "padding": 1, "dilation": 2}, (2, 2, 9)),
    ((4, 2, 2), {"groups": 2, "padding": "same", "padding_mode": "replicate"}, (3, 4, 5)),
    ((2, 3, 5), {"bias": False}, (2, 5)),  # unbatched
]


@pytest.mark.parametrize("args,kwargs,x_shape", CONV1D_CASES)
def test_conv1d_matches_torch(args, kwargs, x_shape):
    _check(nn.Conv1d(*args, **kwargs), torch.nn.Conv1d(*args, **kwargs), x_shape)


CONV_TRANSPOSE2D_CASES = [
    ((3, 4, 3), {"stride": 2, "padding": 1, "output_padding": 1}, (2, 3, 3, 3)),
    ((4, 2, (2, 3)), {"stride": (1, 2), "dilation": 2, "groups": 2}, (1, 4, 3, 2)),
    ((2, 3, 3), {"bias": False}, (2, 3, 3)),  # unbatched
]


@pytest.mark.parametrize("args,kwargs,x_shape", CONV_TRANSPOSE2D_CASES)
def test_conv_transpose2d_matches_torch(args, kwargs, x_shape):
    _check(nn.ConvTranspose2d(*args, **kwargs), torch.nn.ConvTranspose2d(*args, **kwargs), x_shape)


def test_conv_transpose1d_matches_torch():
    kwargs = {"stride": 3, "padding": 1, "output_padding": 2, "groups": 2}
    _check(nn.ConvTranspose1d(2, 4, 3, **kwargs), torch.nn.ConvTranspose1d(2, 4, 3, **kwargs), (2, 2, 4))


@pytest.mark.parametrize(
    "make,fan_in",
    [
        (lambda: nn.Conv2d(6, 16, (3, 4), groups=2), 3 * 12),
        (lambda: nn.Conv1d(8, 64, 4), 32),
        (lambda: nn.ConvTranspose2d(16, 12, 3, groups=4), 3 * 9),  # torch's fan_in: weight.shape[1] * kernel
    ],
)
def test_conv_init_is_torchs(make, fan_in):
    Tensor.manual_seed(1)
    layer = make()
    _assert_uniform(layer.weight.numpy(), 1 / math.sqrt(fan_in))
    assert np.all(np.abs(layer.bias.numpy()) <= 1 / math.sqrt(fan_in))


# *** state dict names and shapes ***

LAYER_PAIRS = [
    (lambda m: m.Linear(3, 4), None),
    (lambda m: m.Linear(3, 4, bias=False), None),
    (lambda m: m.Conv1d(2, 4, 3), None),
    (lambda m: m.Conv2d(4, 6, (3, 2), groups=2, bias=False), None),
    (lambda m: m.ConvTranspose1d(2, 4, 3, groups=2), None),
    (lambda m: m.ConvTranspose2d(4, 6, (3, 2), groups=2), None),
    (lambda m: m.BatchNorm2d(3), None),
    (lambda m: m.BatchNorm1d(3, affine=False), None),
    (lambda m: m.BatchNorm1d(3, track_running_stats=False), None),
    (lambda m: m.LayerNorm((2, 3)), None),
    (lambda m: m.LayerNorm(3, elementwise_affine=False), None),
    (lambda m: m.LayerNorm(3, bias=False), None),
    (lambda m: m.RMSNorm(3), lambda: torch.nn.RMSNorm(3)),
    (lambda m: m.GroupNorm(2, 4), None),
    (lambda m: m.GroupNorm(2, 4, affine=False), None),
    (lambda m: m.Embedding(5, 3), None),
    (lambda m: m.Embedding(5, 3, padding_idx=1), None),
    (lambda m: m.Conv3d(2, 4, (3, 2, 1), groups=2), None),
    (lambda m: m.ConvTranspose3d(2, 4, 2), None),
    (lambda m: m.InstanceNorm2d(3, affine=True), None),
    (lambda m: m.InstanceNorm1d(3), None),
    (lambda m: m.LSTMCell(3, 4), None),
    (lambda m: m.LSTMCell(3, 4, bias=False), None),
    (lambda m: m.Linear(3, 4, dtype="float64"), lambda: torch.nn.Linear(3, 4, dtype=torch.float64)),
    (lambda m: m.BatchNorm2d(3, dtype=dtypes.float16), lambda: torch.nn.BatchNorm2d(3, dtype=torch.float16)),
]


@pytest.mark.parametrize("make,make_torch", LAYER_PAIRS)
def test_state_dict_names_and_shapes_match_torch(make, make_torch):
    ours, theirs = make(nn), (make_torch or (lambda: make(torch.nn)))()
    sd = theirs.state_dict()
    state = _state(ours)
    assert {k: state[k].shape for k in state} == {k: tuple(v.shape) for k, v in sd.items()}
    assert all(state[k].dtype.name == str(v.dtype).removeprefix("torch.") for k, v in sd.items())
    assert all(buffer_of(t.uop) is not None for t in state.values())  # realized: a buffer each, no lazy graph


def test_parameters_are_distinct_buffers():
    # two layers with the same init must not share one (hash-consed) lazy node: gradients would mix
    a, b = nn.LayerNorm(4), nn.LayerNorm(4)
    assert a.weight.uop is not b.weight.uop and a.bias.uop is not b.bias.uop and a.weight.uop is not a.bias.uop
    x = Tensor(np.arange(8, dtype=np.float32).reshape(2, 4))
    ga, gb = (b(a(x) * 3.0) * Tensor([1.0, 2.0, 3.0, 4.0])).sum().gradient(a.weight, b.weight)
    assert not np.allclose(ga.numpy(), gb.numpy())
    a.weight.assign(Tensor([2.0, 2.0, 2.0, 2.0])).realize()
    assert b.weight.tolist() == [1.0, 1.0, 1.0, 1.0]


# *** BatchNorm ***


@pytest.mark.parametrize(
    "x_shape,momentum,torch_class",
    [((4, 3, 2, 2), 0.1, "BatchNorm2d"), ((5, 3), None, "BatchNorm1d"), ((2, 3, 4), 0.5, "BatchNorm1d")],
)
def test_batchnorm_training_and_eval_match_torch(x_shape, momentum, torch_class):
    rng = np.random.default_rng(3)
    ours, theirs = nn.BatchNorm2d(3, momentum=momentum), getattr(torch.nn, torch_class)(3, momentum=momentum)
    _randomize(theirs, rng)
    _copy_from_torch(ours, theirs)
    for step in range(3):
        x_np = (rng.standard_normal(x_shape) * (step + 1) + step).astype(np.float32)
        theirs.train()
        with Tensor.train():
            _compare(ours, theirs, x_np)
    np.testing.assert_allclose(ours.running_mean.numpy(), theirs.running_mean.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ours.running_var.numpy(), theirs.running_var.numpy(), rtol=1e-5, atol=1e-6)
    assert ours.num_batches_tracked.dtype is dtypes.int64 and ours.num_batches_tracked.item() == 3
    theirs.eval()
    _compare(ours, theirs, rng.standard_normal(x_shape).astype(np.float32))
    assert ours.num_batches_tracked.item() == 3  # eval mode leaves the statistics alone
    np.testing.assert_allclose(ours.running_mean.numpy(), theirs.running_mean.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("affine,track", [(False, True), (True, False)])
def test_batchnorm_options_match_torch(affine, track):
    rng = np.random.default_rng(4)
    ours = nn.BatchNorm1d(3, affine=affine, track_running_stats=track)
    theirs = torch.nn.BatchNorm1d(3, affine=affine, track_running_stats=track)
    _randomize(theirs, rng)
    _copy_from_torch(ours, theirs)
    x_np = rng.standard_normal((4, 3, 2)).astype(np.float32)
    with Tensor.train():
        _compare(ours, theirs.train(), x_np)
    _compare(ours, theirs.eval(), x_np * 2 + 1)  # without running statistics, eval uses the batch's too
    if track:
        np.testing.assert_allclose(ours.running_var.numpy(), theirs.running_var.numpy(), rtol=1e-5, atol=1e-6)


def test_batchnorm_running_stats_do_not_build_a_growing_graph():
    bn = nn.BatchNorm1d(2)
    base = np.arange(8, dtype=np.float32).reshape(4, 2)
    sizes, var = [], np.ones(2)
    with Tensor.train():
        for i in range(5):
            bn(Tensor(base * (i + 1)))
            # each call's update is pending until the next call's assign realizes it: the graph holds one update
            sizes.append(len(bn.running_var.uop.toposort()))
            var = 0.9 * var + 0.1 * (base * (i + 1)).var(axis=0, ddof=1)
    assert len(set(sizes)) == 1, sizes
    np.testing.assert_allclose(bn.running_var.numpy(), var, rtol=1e-5)  # they land when read
    assert bn.num_batches_tracked.item() == 5


def test_pending_running_stats_of_many_batchnorms_land_in_one_realize(monkeypatch):
    # the next training call's first assign lands every BatchNorm's pending update together; landed one by one,
    # each realize walked all the other pending graphs (a step cost grew with the square of the depth)
    import zeptograd.tensor as tensor_module

    rng = np.random.default_rng(5)
    ours = [nn.BatchNorm1d(3) for _ in range(8)]
    theirs = [torch.nn.BatchNorm1d(3) for _ in range(8)]
    batches = [rng.standard_normal((4, 3)).astype(np.float32) for _ in range(2)]
    calls = []
    real = tensor_module.realize
    monkeypatch.setattr(tensor_module, "realize", lambda ts: (calls.append(len(ts)), real(ts))[1])
    with Tensor.train():
        for x_np in batches:
            calls.clear()
            x, tx = Tensor(x_np), torch.from_numpy(x_np)
            for bn, tbn in zip(ours, theirs):
                x, tx = bn(x).relu(), tbn(tx).relu()
    assert len(calls) == 1, calls  # the second pass: one realize of all 8 * 3 pending updates
    for bn, tbn in zip(ours, theirs):
        np.testing.assert_allclose(bn.running_mean.numpy(), tbn.running_mean.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(bn.running_var.numpy(), tbn.running_var.numpy(), rtol=1e-5, atol=1e-6)


def test_batchnorm_buffers_get_no_grad():
    bn = nn.BatchNorm1d(2)
    x = Tensor(np.arange(8, dtype=np.float32).reshape(4, 2))
    bn(x).sum().backward()  # eval mode: the running statistics are in the graph
    assert bn.running_mean.grad is None and bn.running_var.grad is None
    assert bn.weight.grad is not None and bn.bias.grad is not None


# *** LayerNorm, RMSNorm, GroupNorm ***


@pytest.mark.parametrize(
    "args,kwargs,x_shape",
    [
        ((5,), {}, (2, 3, 5)),
        ((3, 4), {"eps": 1e-3}, (2, 3, 4)),
        ((4,), {"elementwise_affine": False}, (1, 4)),
        ((4,), {"bias": False}, (4,)),
    ],
)
def test_layernorm_matches_torch(args, kwargs, x_shape):
    shape = args if len(args) > 1 else args[0]
    _check(nn.LayerNorm(shape, **kwargs), torch.nn.LayerNorm(shape, **kwargs), x_shape)


@pytest.mark.parametrize(
    "shape,eps,affine,x_shape",
    [(5, 1e-6, True, (2, 3, 5)), ((3, 4), None, True, (2, 3, 4)), (4, 1e-2, False, (1, 4))],
)
def test_rmsnorm_matches_torch(shape, eps, affine, x_shape):
    _check(nn.RMSNorm(shape, eps=eps, elementwise_affine=affine), torch.nn.RMSNorm(shape, eps, affine), x_shape)


@pytest.mark.parametrize(
    "groups,channels,affine,x_shape",
    [(2, 4, True, (2, 4, 3, 3)), (1, 3, True, (1, 3, 5)), (4, 4, False, (2, 4, 2, 2)), (3, 6, True, (2, 6))],
)
def test_groupnorm_matches_torch(groups, channels, affine, x_shape):
    _check(nn.GroupNorm(groups, channels, affine=affine), torch.nn.GroupNorm(groups, channels, affine=affine), x_shape)


# *** Embedding, Dropout ***


@pytest.mark.parametrize("idx_shape", [(2, 3), (5,), ()])
def test_embedding_matches_torch(idx_shape):
    rng = np.random.default_rng(5)
    theirs = torch.nn.Embedding(6, 4)
    ours = nn.Embedding(6, 4)
    _copy_from_torch(ours, theirs)
    idx_np = rng.integers(0, 6, idx_shape)
    idx_np.flat[0] = 2  # repeated indices: their gradients add up in the weight's row
    if idx_np.size > 1:
        idx_np.flat[-1] = 2
    out_t = theirs(torch.from_numpy(idx_np))
    r = rng.standard_normal(tuple(out_t.shape)).astype(np.float32)
    (out_t * torch.from_numpy(r)).sum().backward()
    out = ours(Tensor(idx_np.astype(np.int32)))
    (g,) = (out * Tensor(r)).sum().gradient(ours.weight)
    np.testing.assert_allclose(out.numpy(), out_t.detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(g.numpy(), theirs.weight.grad.numpy(), rtol=1e-5, atol=1e-6)
    # int64 indices work too
    np.testing.assert_allclose(ours(Tensor(idx_np.astype(np.int64))).numpy(), out_t.detach().numpy(), rtol=1e-6)


def test_embedding_init_is_standard_normal():
    Tensor.manual_seed(2)
    w = nn.Embedding(64, 32).weight.numpy().astype(np.float64)
    n = w.size
    assert abs(w.mean()) < 5 / math.sqrt(n)
    assert abs(w.std() - 1) < 5 / math.sqrt(2 * n)
    assert np.abs(w).max() > 2.5  # tails: a uniform init would not reach this


def test_dropout_training_and_eval():
    Tensor.manual_seed(3)
    x = Tensor(np.ones((64, 64), np.float32))
    drop = nn.Dropout(0.25)
    assert drop(x) is x  # eval mode
    with Tensor.train():
        y = drop(x)
        assert nn.Dropout(0.0)(x) is x
        assert nn.Dropout(1.0)(x).numpy().max() == 0
    (g,) = (y * 2.0).sum().gradient(x)
    out, grad = y.numpy(), g.numpy()
    kept = out != 0
    np.testing.assert_allclose(out[kept], 1 / 0.75, rtol=1e-6)
    assert abs(1 - kept.mean() - 0.25) < 5 * math.sqrt(0.25 * 0.75 / kept.size)
    np.testing.assert_allclose(grad, np.where(kept, 2 / 0.75, 0.0), rtol=1e-6)  # the same mask backward


# *** bad arguments and inputs ***


@pytest.mark.parametrize(
    "make,exc,match",
    [
        (lambda: nn.Linear(0, 3), ValueError, r"Linear: in_features must be positive, got 0"),
        (lambda: nn.Linear(3, -1), ValueError, r"Linear: out_features must be positive"),
        (lambda: nn.Linear(3.0, 2), TypeError, r"Linear: in_features must be an int"),
        (lambda: nn.Conv2d(3, 4, 3, groups=2), ValueError, r"Conv2d: in_channels \(3\) must be divisible by groups"),
        (lambda: nn.Conv2d(4, 3, 3, groups=2), ValueError, r"Conv2d: out_channels \(3\) must be divisible by groups"),
        (lambda: nn.Conv2d(4, 4, 3, groups=0), ValueError, r"Conv2d: groups must be positive"),
        (lambda: nn.Conv2d(4, 4, (3, 0)), ValueError, r"Conv2d: kernel_size must be positive"),
        (lambda: nn.Conv2d(4, 4, (3, 3, 3)), ValueError, r"Conv2d: kernel_size must be an int or a sequence of 2"),
        (lambda: nn.Conv1d(4, 4, 3, stride=0), ValueError, r"Conv1d: stride must be positive"),
        (lambda: nn.Conv1d(4, 4, 3, padding=-1), ValueError, r"Conv1d: padding must be non-negative"),
        (lambda: nn.Conv1d(4, 4, 3, padding="full"), ValueError, r"Conv1d: padding must be .*'same' or 'valid'"),
        (lambda: nn.Conv2d(4, 4, 3, padding="same", stride=2), ValueError, r"Conv2d: padding='same' is not supported"),
        (lambda: nn.Conv2d(4, 4, 3, padding_mode="mirror"), ValueError, r"Conv2d: padding_mode must be one of"),
        (lambda: nn.ConvTranspose2d(4, 4, 3, padding="same"), ValueError, r"ConvTranspose2d: padding must be an int"),
        (
            lambda: nn.ConvTranspose2d(4, 4, 3, stride=2, output_padding=2),
            ValueError,
            r"output_padding \(2, 2\) must be smaller",
        ),
        (
            lambda: nn.ConvTranspose1d(4, 4, 3, padding_mode="reflect"),
            ValueError,
            r"ConvTranspose1d: padding_mode must be one of 'zeros'",
        ),
        (lambda: nn.BatchNorm2d(0), ValueError, r"BatchNorm: num_features must be positive"),
        (
            lambda: nn.BatchNorm2d(3, momentum=2.0),
            ValueError,
            r"BatchNorm: momentum must be None or a number between 0 and 1",
        ),
        (lambda: nn.LayerNorm(()), ValueError, r"LayerNorm: normalized_shape must be an int or a non-empty sequence"),
        (lambda: nn.LayerNorm(4, eps=-1.0), ValueError, r"LayerNorm: eps must be a non-negative number"),
        (lambda: nn.RMSNorm((2, 0)), ValueError, r"RMSNorm: dim must be positive"),
        (
            lambda: nn.GroupNorm(3, 4),
            ValueError,
            r"GroupNorm: num_channels \(4\) must be divisible by num_groups \(3\)",
        ),
        (lambda: nn.GroupNorm(0, 4), ValueError, r"GroupNorm: num_groups must be positive"),
        (lambda: nn.Embedding(0, 3), ValueError, r"Embedding: vocab_size must be positive"),
        (lambda: nn.Dropout(1.5), ValueError, r"Dropout: probability has to be between 0 and 1, got 1.5"),
        (lambda: nn.Dropout("0.5"), ValueError, r"Dropout: probability has to be between 0 and 1"),
    ],
)
def test_bad_constructor_arguments(make, exc, match):
    with pytest.raises(exc, match=match):
        make()


@pytest.mark.parametrize(
    "make,x,exc,match",
    [
        (
            lambda: nn.Linear(3, 2),
            Tensor.zeros(4, 5),
            RuntimeError,
            r"Linear: expected in_features=3 .* shape \(4, 5\)",
        ),
        (lambda: nn.Linear(3, 2), Tensor(1.0), RuntimeError, r"Linear: the input of shape \(\) has too few dimensions"),
        (lambda: nn.Linear(3, 2), [1.0, 2.0, 3.0], TypeError, r"Linear: the input must be a Tensor, got list"),
        (
            lambda: nn.Conv2d(3, 4, 3),
            Tensor.zeros(1, 2, 5, 5),
            RuntimeError,
            r"Conv2d: expected input with 3 channels \(weight of shape \(4, 3, 3, 3\), groups=1\), "
            r"got input of shape \(1, 2, 5, 5\)",
        ),
        (
            lambda: nn.Conv2d(3, 4, 3),
            Tensor.zeros(3, 5),
            RuntimeError,
            r"Conv2d: expected a 3-D \(unbatched\) or 4-D \(batched\) input, got input of shape \(3, 5\)",
        ),
        (
            lambda: nn.Conv1d(2, 4, 3),
            Tensor.zeros(1, 1, 2, 5),
            RuntimeError,
            r"Conv1d: expected a 2-D \(unbatched\) or 3-D",
        ),
        (
            lambda: nn.ConvTranspose2d(2, 4, 3),
            Tensor.zeros(1, 4, 3, 3),
            RuntimeError,
            r"ConvTranspose2d: expected input with 2 channels",
        ),
        (
            lambda: nn.BatchNorm2d(3),
            Tensor.zeros(2, 4, 2),
            RuntimeError,
            r"BatchNorm: expected num_features=3 on axis 1 .* shape \(2, 4, 2\)",
        ),
        (
            lambda: nn.BatchNorm2d(3),
            Tensor.zeros(3),
            ValueError,
            r"BatchNorm: expected an \(N, C\) or \(N, C, ...\) input, got input of shape \(3,\)",
        ),
        (
            lambda: nn.LayerNorm((2, 3)),
            Tensor.zeros(3, 2),
            RuntimeError,
            r"LayerNorm: normalized_shape=\(2, 3\) expects an input of shape \(\*, 2, 3\), got input of shape \(3, 2\)",
        ),
        (lambda: nn.RMSNorm(4), Tensor.zeros(4, 3), RuntimeError, r"RMSNorm: normalized_shape=\(4,\) expects"),
        (lambda: nn.GroupNorm(2, 4), Tensor.zeros(2, 6, 3), RuntimeError, r"GroupNorm: expected num_channels=4"),
        (lambda: nn.GroupNorm(2, 4), Tensor.zeros(4), RuntimeError, r"GroupNorm: expected an \(N, C, ...\) input"),
        (
            lambda: nn.Embedding(5, 3),
            Tensor([1.0, 2.0]),
            TypeError,
            r"Embedding: the indices must be an integer tensor, got dtype dtypes.float32",
        ),
    ],
)
def test_bad_inputs(make, x, exc, match):
    layer = make()
    with pytest.raises(exc, match=match):
        layer(x)


def test_batchnorm_training_needs_more_than_one_value_per_channel():
    bn = nn.BatchNorm1d(3)
    with (
        Tensor.train(),
        pytest.raises(ValueError, match=r"BatchNorm: expected more than 1 value per channel .* \(1, 3\)"),
    ):
        bn(Tensor.zeros(1, 3))
    assert bn(Tensor.zeros(1, 3)).shape == (1, 3)  # eval mode uses the running statistics: fine


# *** training end to end ***


def test_two_layer_model_learns_with_plain_sgd():
    Tensor.manual_seed(0)
    rng = np.random.default_rng(6)
    x_np = rng.standard_normal((32, 4)).astype(np.float32)
    y_np = (np.sin(x_np[:, :1]) + x_np[:, 1:2] * x_np[:, 2:3]).astype(np.float32)
    x, y = Tensor(x_np), Tensor(y_np)
    l1, l2 = nn.Linear(4, 16), nn.Linear(16, 1)
    params = [l1.weight, l1.bias, l2.weight, l2.bias]
    losses = []
    for _ in range(20):
        for p in params:
            p.grad = None
        loss = (l2(l1(x).relu()) - y).square().mean()
        loss.backward()
        for p in params:
            p.assign(p - 0.1 * p.grad)
        Tensor.realize(loss, *params)
        losses.append(loss.item())
    assert losses[-1] < 0.6 * losses[0], losses
    assert sum(b < a for a, b in itertools.pairwise(losses)) >= 15, losses


# *** Conv3d, ConvTranspose output_size, InstanceNorm, LayerNorm2d, LSTMCell, padding_idx, dtype/device


@pytest.mark.parametrize(
    "args,kwargs,x_shape",
    [((2, 4, 3), {"padding": 1}, (2, 2, 4, 3, 5)), ((4, 2, (2, 1, 3)), {"stride": 2, "groups": 2}, (4, 5, 3, 6))],
)
def test_conv3d_matches_torch(args, kwargs, x_shape):
    _check(nn.Conv3d(*args, **kwargs), torch.nn.Conv3d(*args, **kwargs), x_shape)


def test_conv_transpose3d_matches_torch():
    kwargs = {"stride": 2, "padding": 1, "output_padding": 1}
    _check(nn.ConvTranspose3d(2, 3, 3, **kwargs), torch.nn.ConvTranspose3d(2, 3, 3, **kwargs), (1, 2, 3, 2, 3))


@pytest.mark.parametrize(
    "kwargs,x_shape,size",
    [
        ({"stride": 2}, (2, 2, 4, 4), (10, 10)),
        ({"stride": 3, "padding": 1}, (1, 2, 3, 4), (8, 11)),
        ({"stride": (2, 3), "dilation": 2}, (1, 2, 3, 3), (1, 3, 10, 12)),  # the whole output shape
    ],
)
def test_conv_transpose_output_size_matches_torch(kwargs, x_shape, size):
    class Sized(torch.nn.ConvTranspose2d):
        def forward(self, x):  # type: ignore[override]
            return super().forward(x, output_size=list(size))

    class OursSized(nn.ConvTranspose2d):
        def __call__(self, x: Tensor, output_size=None) -> Tensor:
            return super().__call__(x, output_size=size)

    ours = OursSized(2, 3, 3, **kwargs)
    rng = np.random.default_rng(3)
    theirs = Sized(2, 3, 3, **kwargs)
    _randomize(theirs, rng)
    _copy_from_torch(ours, theirs)
    _compare(ours, theirs, rng.standard_normal(x_shape).astype(np.float32))


def test_conv_transpose_output_size_out_of_reach():
    from zeptograd.helpers import ArgumentError

    with pytest.raises(ValueError):
        torch.nn.ConvTranspose2d(2, 3, 3, stride=2)(torch.ones(1, 2, 4, 4), output_size=[12, 12])
    with pytest.raises(ArgumentError, match="output_size"):
        nn.ConvTranspose2d(2, 3, 3, stride=2)(Tensor.ones(1, 2, 4, 4), output_size=(12, 12))


@pytest.mark.parametrize(
    "ours,theirs,x_shape",
    [
        (lambda: nn.InstanceNorm1d(3), lambda: torch.nn.InstanceNorm1d(3), (2, 3, 5)),
        (lambda: nn.InstanceNorm2d(3, affine=True), lambda: torch.nn.InstanceNorm2d(3, affine=True), (2, 3, 4, 5)),
        (lambda: nn.InstanceNorm3d(2, eps=1e-3), lambda: torch.nn.InstanceNorm3d(2, eps=1e-3), (1, 2, 3, 2, 4)),
        (lambda: nn.InstanceNorm(3), lambda: torch.nn.InstanceNorm2d(3, affine=True), (2, 3, 4, 5)),  # tinygrad's
    ],
)
def test_instance_norm_matches_torch(ours, theirs, x_shape):
    _check(ours(), theirs(), x_shape)


def test_layernorm2d_matches_torch_layernorm_over_channels():
    class ChannelsLast(torch.nn.LayerNorm):
        def forward(self, x):  # type: ignore[override]
            return super().forward(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)

    _check(nn.LayerNorm2d(4, eps=1e-6), ChannelsLast(4, eps=1e-6), (2, 4, 3, 5))


@pytest.mark.parametrize("bias,batched,with_state", [(True, True, True), (False, True, False), (True, False, True)])
def test_lstm_cell_matches_torch(bias, batched, with_state):
    rng = np.random.default_rng(11)
    theirs, ours = torch.nn.LSTMCell(3, 4, bias=bias), nn.LSTMCell(3, 4, bias=bias)
    _randomize(theirs, rng)
    _copy_from_torch(ours, theirs)
    lead = (2,) if batched else ()
    x, h, c = (rng.standard_normal((*lead, n)).astype(np.float32) for n in (3, 4, 4))
    ts = [torch.tensor(a, requires_grad=True) for a in (x, h, c)]
    zs = [Tensor(a) for a in (x, h, c)]
    ht, ct = theirs(ts[0], (ts[1], ts[2]) if with_state else None)
    hz, cz = ours(zs[0], (zs[1], zs[2]) if with_state else None)
    r1, r2 = (rng.standard_normal(tuple(ht.shape)).astype(np.float32) for _ in range(2))
    ((ht * torch.tensor(r1)).sum() + (ct * torch.tensor(r2)).sum()).backward()
    names = [k for k, _ in theirs.named_parameters()]
    targets = [zs[0], *(zs[1:] if with_state else []), *(getattr(ours, k) for k in names)]
    grads = ((hz * Tensor(r1)).sum() + (cz * Tensor(r2)).sum()).gradient(*targets)
    np.testing.assert_allclose(hz.numpy(), ht.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(cz.numpy(), ct.detach().numpy(), rtol=1e-5, atol=1e-6)
    want = [ts[0].grad, *([ts[1].grad, ts[2].grad] if with_state else [])]
    want += [dict(theirs.named_parameters())[k].grad for k in names]
    for g, w in zip(grads, want):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-4, atol=1e-5)


def test_lstm_cell_init_is_torchs():
    Tensor.manual_seed(2)
    cell = nn.LSTMCell(5, 16)
    for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
        _assert_uniform(getattr(cell, name).numpy(), 1 / math.sqrt(16))


@pytest.mark.parametrize("padding_idx", [2, -1])
def test_embedding_padding_idx_matches_torch(padding_idx):
    rng = np.random.default_rng(6)
    theirs, ours = torch.nn.Embedding(6, 4, padding_idx=padding_idx), nn.Embedding(6, 4, padding_idx=padding_idx)
    np.testing.assert_array_equal(ours.weight.numpy()[padding_idx], np.zeros(4, np.float32))  # as torch's init
    with torch.no_grad():
        theirs.weight.copy_(torch.from_numpy(rng.standard_normal((6, 4)).astype(np.float32)))  # a nonzero row
    _copy_from_torch(ours, theirs)
    idx = np.array([[2, 5, 0], [5, 2, 2]])
    out_t = theirs(torch.from_numpy(idx))
    r = rng.standard_normal(tuple(out_t.shape)).astype(np.float32)
    (out_t * torch.from_numpy(r)).sum().backward()
    out = ours(Tensor(idx.astype(np.int32)))
    (g,) = (out * Tensor(r)).sum().gradient(ours.weight)
    np.testing.assert_allclose(out.numpy(), out_t.detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(g.numpy(), theirs.weight.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_embedding_padding_idx_out_of_range():
    from zeptograd.helpers import ArgumentError

    with pytest.raises(ArgumentError, match="padding_idx"):
        nn.Embedding(4, 2, padding_idx=4)
    with pytest.raises(ArgumentError, match="padding_idx"):
        nn.Embedding(4, 2, padding_idx=-5)


def test_layers_take_dtype_and_device():
    layer = nn.Linear(3, 2, dtype=dtypes.float64)
    theirs = torch.nn.Linear(3, 2, dtype=torch.float64)
    _copy_from_torch(layer, theirs)
    x = np.random.default_rng(7).standard_normal((4, 3))
    out = layer(Tensor(x))
    assert out.dtype is dtypes.float64
    np.testing.assert_allclose(out.numpy(), theirs(torch.tensor(x)).detach().numpy(), rtol=1e-12)
    Tensor.manual_seed(3)
    a = nn.Conv2d(2, 3, 3, device="PYTHON")
    Tensor.manual_seed(3)
    b = nn.Conv2d(2, 3, 3)
    assert a.weight.device == "PYTHON" and a.bias.device == "PYTHON"
    np.testing.assert_array_equal(a.weight.numpy(), b.weight.numpy())  # the same draw, on another device
    for make in (
        lambda: nn.LayerNorm(3, dtype="float16"),
        lambda: nn.GroupNorm(1, 3, dtype=np.float16),
        lambda: nn.RMSNorm(3, dtype=torch.float16),
        lambda: nn.Embedding(3, 3, dtype="half"),
        lambda: nn.InstanceNorm(3, dtype="float16"),
        lambda: nn.LSTMCell(3, 3, dtype="float16"),
    ):
        assert all(t.dtype is dtypes.float16 for t in _state(make()).values())


def test_layers_refuse_integer_dtypes():
    from zeptograd.helpers import DTypeError

    with pytest.raises(RuntimeError):
        torch.nn.Linear(3, 2, dtype=torch.int32)
    with pytest.raises(DTypeError, match="Linear"):
        nn.Linear(3, 2, dtype=dtypes.int32)
    with pytest.raises(TypeError, match="Conv2d"):
        nn.Conv2d(2, 3, 3, dtype="complex")
