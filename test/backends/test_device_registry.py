"""The device registry when an optional device's package is missing: the device is not listed, and naming it
raises DeviceUnavailable saying what to install (checked in a child process with the package hidden)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from zeptograd.runtime.device import DeviceUnavailable, _Device


@pytest.mark.parametrize(
    "device, package, module, loader, extra",
    [
        ("LLVM", "llvmlite", "ops_llvm", "llvmlite_binding", "llvm"),
        ("CL", "pyopencl", "ops_cl", "pyopencl", "opencl"),
        ("WEBGPU", "wgpu", "ops_webgpu", "wgpu_module", "webgpu"),
    ],
)
def test_missing_package_names_the_extra(device: str, package: str, module: str, loader: str, extra: str):
    registry = _Device()
    registry._usable[device] = False
    assert device not in registry.get_available_devices()
    with pytest.raises(DeviceUnavailable, match=rf'pip install -e "\.\[{extra}\]"'):
        registry.canonicalize(device)
    code = (
        f"import sys; sys.modules[{package!r}] = None\n"
        f"from zeptograd.runtime.{module} import {loader}\n"
        f"try:\n    {loader}()\nexcept RuntimeError as e:\n    print(type(e).__name__, e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120).stdout
    assert out.startswith("DeviceUnavailable") and f'".[{extra}]"' in out
