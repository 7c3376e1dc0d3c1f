"""The facts of a CPU that a renderer for it plans and renders with: its x86 feature flags and cache sizes.

`HostCPU.read()` reads the host's once (Linux's /proc/cpuinfo and sysfs), when a device that runs on it opens;
a renderer for another machine is given that machine's facts instead:

>>> avx2 = HostCPU(frozenset({"avx2", "fma"}))
>>> avx2.vector_bytes, avx2.vector_registers, avx2.avx512
(32, 16, False)
>>> avx512 = HostCPU(frozenset({"avx2", "fma", "avx512f", "avx512dq", "avx512vl"}), l2_bytes=2 << 20)
>>> avx512.vector_bytes, avx512.vector_registers, avx512.avx512_masked_loads
(64, 32, True)
"""

from __future__ import annotations

import functools
import os
import platform
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from zeptograd.renderer import Renderer


@dataclass(frozen=True)
class HostCPU:
    """A CPU's facts. The defaults are a CPU nothing is known of: no x86 extensions, 32 KiB of L1 and 1 MiB of L2
    a core (what the C renderer's GCC vector extensions then compile to is the compiler's affair)."""

    flags: frozenset[str] = frozenset()
    """The CPU's feature flags as Linux's /proc/cpuinfo names them (`avx2`, `fma`, `avx512f`, ...)."""
    l1_bytes: int = 32 << 10
    """A core's L1 data cache, in bytes."""
    l2_bytes: int = 1 << 20
    """A core's L2 cache, in bytes."""
    use_avx512: bool = True
    """512-bit vectors where the CPU has AVX-512 (`ZG_AVX512=0` in the environment of `read()` turns them off)."""

    def __post_init__(self) -> None:
        if not isinstance(self.flags, frozenset) or not all(isinstance(f, str) for f in self.flags):
            raise TypeError(f"HostCPU.flags is a frozenset of str, got {self.flags!r}")
        for name in ("l1_bytes", "l2_bytes"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"HostCPU.{name} is a positive number of bytes, got {value!r}")

    @property
    def avx2_fma(self) -> bool:
        """Has the CPU AVX2 and FMA (the x86 builtins the C renderer calls on float vectors)?"""
        return {"avx2", "fma"} <= self.flags

    @property
    def avx512(self) -> bool:
        """Are 512-bit vectors used: AVX-512F (with AVX2 and FMA), not turned off (`use_avx512`)? Twice the FMAs an
        instruction, and on a core with two 512-bit FMA units twice the peak."""
        return self.avx2_fma and "avx512f" in self.flags and self.use_avx512

    @property
    def avx512_masked_loads(self) -> bool:
        """AVX-512's masked loads at 512, 256 and 128 bits: a mask from a vector of bools needs AVX512DQ, the
        narrower widths AVX512VL."""
        return self.avx512 and {"avx512dq", "avx512vl"} <= self.flags

    @property
    def vector_bytes(self) -> int:
        """The bytes of one vector register the code uses: 64 with AVX-512, else 32."""
        return 64 if self.avx512 else 32

    @property
    def vector_registers(self) -> int:
        """Vector registers of a core the code may keep values in: 32 with AVX-512, else 16."""
        return 32 if self.vector_bytes == 64 else 16

    @classmethod
    def read(cls) -> HostCPU:
        """The host's facts, read once per process (`ZG_AVX512=0` applied: 256-bit vectors).

        >>> HostCPU.read() is HostCPU.read()
        True
        """
        return _read(os.environ.get("ZG_AVX512", "1") != "0")


@functools.cache
def _read(use_avx512: bool) -> HostCPU:
    return HostCPU(_x86_flags(), _cache_bytes(1, 32 << 10), _cache_bytes(2, 1 << 20), use_avx512)


def _x86_flags() -> frozenset[str]:
    """The feature flags of the host's CPU (/proc/cpuinfo; none off x86 Linux)."""
    if platform.machine() not in ("x86_64", "AMD64"):
        return frozenset()
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return frozenset()
    line = next((x for x in text.splitlines() if x.startswith("flags")), "")
    return frozenset(line.partition(":")[2].split())


def _cache_bytes(level: int, default: int) -> int:
    """A core's data (or unified) cache of `level`, from Linux's sysfs; `default` where it is not known."""
    for index in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
        try:
            kind = (index / "type").read_text().strip()
            if (index / "level").read_text().strip() == str(level) and kind in ("Data", "Unified"):
                size = (index / "size").read_text().strip()
                return int(size[:-1]) << 10 if size.endswith("K") else int(size)
        except (OSError, ValueError):
            continue
    return default


def take_host(renderer: Renderer, host: HostCPU | None) -> HostCPU:
    """Give a CPU renderer the facts of `host` (None: this host's, read once) that the planner reads of it.

    >>> from zeptograd.renderer import Renderer
    >>> take_host(Renderer(), HostCPU(frozenset({"avx2", "fma"}), l1_bytes=48 << 10)).l1_bytes
    49152
    """
    host = HostCPU.read() if host is None else host
    if not isinstance(host, HostCPU):
        raise TypeError(f"a renderer's host is a HostCPU, got {type(host).__name__}")
    renderer.vector_registers = host.vector_registers
    renderer.l1_bytes, renderer.l2_bytes = host.l1_bytes, host.l2_bytes
    return host
