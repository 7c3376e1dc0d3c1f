"""The device registry: `Device["CPU"]`, and `Device.DEFAULT` (from `$DEVICE`, else CPU).

>>> Device.canonicalize("cpu")
'CPU'
"""

from __future__ import annotations

import os
from typing import Any

DEVICES = ("CPU", "PYTHON")


class _Device:
    def __init__(self) -> None:
        self._opened: dict[str, Any] = {}
        self.DEFAULT: str = self.canonicalize(os.environ.get("DEVICE") or "CPU")

    def canonicalize(self, name: str | None) -> str:
        """The registry's name for a device (`'cpu'` and `'CPU:0'` are `'CPU'`); None is the default."""
        if name is None:
            return self.DEFAULT
        if not isinstance(name, str):
            raise TypeError(f"a device is named by a string, got {type(name).__name__}: {name!r}")
        base = name.split(":")[0].upper()
        if base not in DEVICES:
            raise ValueError(f"unknown device {name!r}; the devices are {', '.join(DEVICES)}")
        return base

    def __getitem__(self, name: str) -> Any:
        name = self.canonicalize(name)
        if name not in self._opened:
            if name == "CPU":
                from zeptograd.runtime.ops_cpu import CPUDevice

                self._opened[name] = CPUDevice()
            else:
                from zeptograd.runtime.ops_python import PythonDevice

                self._opened[name] = PythonDevice()
        return self._opened[name]

    def __setattr__(self, key: str, value: Any) -> None:
        if key == "DEFAULT":
            value = self.canonicalize(value) if hasattr(self, "DEFAULT") else value
        object.__setattr__(self, key, value)


Device = _Device()
