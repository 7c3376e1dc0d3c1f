"""Shared test setup.

Every test runs with SPEC=1: each new UOp is checked against the stage-independent spec as it is built, so
a rule that builds a malformed node fails the test that made it fire. Tests that build illegal nodes on
purpose (to check the spec's errors) are marked `no_spec`.

Every test's graphs are checked for an exact pyrender round trip: each UOp built during the test is
recorded, and after the test every root graph (a node no other recorded node uses) must come back from
`eval(pyrender(root))` as the very same, hash-consed node. All of them, in every test: the property tests'
thousands of graphs add about 5 s to the suite.
"""

from __future__ import annotations

import pytest

from zeptograd.helpers import Context
from zeptograd.uop import PYRENDER_GLOBALS, UOp


@pytest.fixture(autouse=True)
def spec_on_build(request: pytest.FixtureRequest):
    with Context(SPEC=0 if request.node.get_closest_marker("no_spec") else 1):
        yield


@pytest.fixture(autouse=True)
def pyrender_round_trip(request: pytest.FixtureRequest):
    if request.node.get_closest_marker("no_roundtrip"):
        yield
        return
    created: list[UOp] = []
    original_new = UOp.__new__

    def recording_new(cls, *args, **kwargs):
        u = original_new(cls, *args, **kwargs)
        created.append(u)
        return u

    UOp.__new__ = staticmethod(recording_new)  # type: ignore[method-assign]
    try:
        yield
    finally:
        UOp.__new__ = staticmethod(original_new)  # type: ignore[method-assign]
    unique = list(dict.fromkeys(created))
    used = {s for u in unique for s in u.src}
    for root in (u for u in unique if u not in used):
        rebuilt = eval(root.pyrender(), dict(PYRENDER_GLOBALS))
        assert rebuilt is root, f"pyrender round trip failed for {root!r}"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "no_roundtrip: the test's graphs are not pyrender round-tripped")
    config.addinivalue_line("markers", "no_spec: the test builds illegal nodes on purpose (SPEC=0)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """With `DEVICE` naming another compiled device (`DEVICE=LLVM pytest ...`), the tests parametrized over the
    CPU device run on that device instead (their ids still say CPU): the op suite runs on any backend. A device
    that cannot run here (`DEVICE=WEBGPU` without a Vulkan driver) skips every test, saying what to install."""
    from zeptograd.runtime.device import Device, DeviceUnavailable

    target = Device.DEFAULT
    if target in ("CPU", "PYTHON"):
        return
    try:
        Device.canonicalize(target)
    except DeviceUnavailable as e:
        skip = pytest.mark.skip(reason=f"DEVICE={target} cannot run here: {e}")
        for item in items:
            item.add_marker(skip)
        return
    for item in items:
        spec = getattr(item, "callspec", None)
        if spec is not None and spec.params.get("device") == "CPU":
            spec.params["device"] = target
