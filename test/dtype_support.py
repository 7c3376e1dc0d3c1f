"""Which dtypes a device computes, for tests that need one: a test skips by name where its device lacks a dtype,
and fails (UnsupportedDType) where a device that claims the dtype cannot compile it.

    from dtype_support import needs_dtype

    def test_half_sum(device):
        needs_dtype(device, dtypes.float16)
        ...
"""

from __future__ import annotations

import pytest

from zeptograd import Device
from zeptograd.dtype import DType


def supports(device: str | None, dtype: DType) -> bool:
    """Whether `device` (None: the default device, which `DEVICE=` names) computes and stores `dtype`.

    >>> from zeptograd import dtypes
    >>> supports("PYTHON", dtypes.float64)
    True
    """
    return dtype.scalar() in Device[device or Device.DEFAULT].renderer.supported_dtypes()


def needs_dtype(device: str | None, *needed: DType) -> None:
    """Skip the calling test where `device` (None: the default device) lacks one of the `needed` dtypes, naming it."""
    __tracebackhide__ = True  # the skip is reported at the test's line, not here
    name = device or Device.DEFAULT
    missing = [d for d in needed if not supports(name, d)]
    if missing:
        pytest.skip(f"{Device.canonicalize(name)} has no {', '.join(d.name for d in missing)}")
