"""What every compiled backend must agree on, run on each one this host has (LLVM, CL, WEBGPU where wgpu finds an
adapter, CUDA and PTX with a GPU):
the op suite's random programs against numpy, and arithmetic bit for bit the PYTHON reference's."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from zeptograd import Device, Tensor, dtypes
from zeptograd.codegen import UnsupportedDType

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "ops"))  # the op suite's program generators

BACKENDS = ("LLVM", "CL", "CUDA", "PTX", "WEBGPU")
# (random-program seeds, programs a seed, fused programs a seed): a few seconds of compiling on each device
RANDOM_PROGRAMS = {"LLVM": (3, 20, 10), "CL": (2, 15, 6), "CUDA": (2, 15, 6), "PTX": (2, 15, 6), "WEBGPU": (2, 15, 6)}


def usable(device: str) -> str:
    if not Device.usable(device):
        pytest.skip(f"{device} is not usable on this host")
    return device


# strict: each passes (and so fails here) once the library computes it on that device
KNOWN_FAILURES = {
    ("WEBGPU", 1): pytest.mark.xfail(
        raises=UnsupportedDType, strict=True, reason="gather on WEBGPU builds an int64 index, which WGSL lacks"
    ),
}


@pytest.mark.no_roundtrip
@pytest.mark.parametrize(
    "device, seed",
    [pytest.param(d, s, marks=KNOWN_FAILURES.get((d, s), ())) for d in BACKENDS for s in range(RANDOM_PROGRAMS[d][0])],
)
def test_random_programs(device: str, seed: int):
    """The op suite's random programs (movement, elementwise, reductions, joins), checked against numpy."""
    from test_tensor_ops import run_random_programs
    from test_tensor_programs import run_program

    usable(device)
    base = 1000 * (3 + 2 * BACKENDS.index(device))
    _, programs, fused = RANDOM_PROGRAMS[device]
    run_random_programs(base + seed, programs, device, 4096)
    for k in range(fused):
        run_program(base + 1000 + 10 * seed + k, device, 6)


@pytest.mark.no_roundtrip
@pytest.mark.parametrize("device", BACKENDS)
def test_same_bits_as_the_python_reference(device: str):
    """Arithmetic without transcendentals (which the PYTHON device computes exactly) is bit for bit the PYTHON
    device's: the fused multiply-add only where the IR has one, division and sqrt correctly rounded, max with
    NaN, floor division, casts, and half precision where the device has it."""
    usable(device)
    has_half = dtypes.float16 in Device[device].renderer.supported_dtypes()
    has_double = dtypes.float64 in Device[device].renderer.supported_dtypes()
    rng = np.random.default_rng(5)
    a = rng.standard_normal(64).astype(np.float32)
    b = rng.standard_normal(64).astype(np.float32)
    a[:3] = [np.nan, 0.0, -0.0]

    def program(dev: str) -> list[np.ndarray]:
        x, y = Tensor(a, device=dev), Tensor(b, device=dev)
        f = Tensor(np.nan_to_num(a), device=dev)  # NaN to int is undefined: casts get finite values
        out = [
            # a driver that contracts a*b+c (WEBGPU: WGSL cannot forbid it) rounds this once
            x * y + (0.0 if getattr(Device[device].renderer, "may_contract", False) else 0.1),
            x * 3 - y * 5,
            x / y,
            y.abs().sqrt(),
            x.maximum(y),
            (f * 7).cast(dtypes.int32),
            (f * 9).cast(dtypes.int32) // 4,
        ]
        if has_double:  # without float64 the product is computed in float32 (codegen/demote.py): not the same bits
            out.append(x.cast(dtypes.float64).mul(3.3).cast(dtypes.float32))
        if has_half:
            h = x.cast(dtypes.float16)
            out += [h * y.cast(dtypes.float16), x.cast(dtypes.float64).mul(3.3).cast(dtypes.float16)]
        return [t.numpy() for t in out]

    for got, want in zip(program(device), program("PYTHON"), strict=True):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("device", BACKENDS)
def test_assignment_and_copies(device: str):
    """The unified STORE on every backend: reads made before an assignment see the old values (a transposed
    self-assignment needs a scratch copy), `+=` and a strided slice write land in the buffer, and copies to and
    from the host devices keep the values."""
    usable(device)
    a = np.random.default_rng(11).standard_normal((4, 4)).astype(np.float32)
    t = Tensor(a, device=device).realize()
    old = t + 1
    t.assign(t.T * 2)
    np.testing.assert_array_equal(t.numpy(), a.T * 2)
    np.testing.assert_array_equal(old.numpy(), a + 1)
    t += 1
    t[1:3, ::2] = 0.5
    want = a.T * 2 + 1
    want[1:3, ::2] = 0.5
    np.testing.assert_array_equal(t.numpy(), want)
    cpu = t.to("CPU")
    assert cpu.device == "CPU"
    np.testing.assert_array_equal(cpu.numpy(), want)
    back = Tensor(a, device="PYTHON").to(device) * 3
    assert back.device == device
    np.testing.assert_array_equal(back.numpy(), a * 3)
    np.testing.assert_array_equal(t[1:3].contiguous().to("PYTHON").numpy(), want[1:3])


@pytest.mark.parametrize("device", BACKENDS)
def test_training_step_matches_numpy(device: str):
    """A Linear layer's SGD step, its parameters made on the device (Device.DEFAULT), against the same step by
    hand in float64."""
    from zeptograd.nn import Linear
    from zeptograd.nn.optim import SGD

    usable(device)
    old = Device.DEFAULT
    Device.DEFAULT = device
    try:
        rng = np.random.default_rng(12)
        layer = Linear(6, 3)
        w0, b0 = layer.weight.numpy(), layer.bias.numpy()
        x, y = rng.standard_normal((10, 6)).astype(np.float32), rng.standard_normal((10, 3)).astype(np.float32)
        opt = SGD([layer.weight, layer.bias], lr=0.1)
        opt.zero_grad()
        loss = ((layer(Tensor(x)) - Tensor(y)) ** 2).mean()
        loss.backward()
        opt.step()
        assert layer.weight.device == device
        err = x.astype(np.float64) @ w0.T + b0 - y
        g = 2 * err / err.size
        np.testing.assert_allclose(loss.item(), (err**2).mean(), rtol=1e-5)
        np.testing.assert_allclose(layer.weight.numpy(), w0 - 0.1 * (g.T @ x), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(layer.bias.numpy(), b0 - 0.1 * g.sum(axis=0), rtol=1e-5, atol=1e-6)
    finally:
        Device.DEFAULT = old
