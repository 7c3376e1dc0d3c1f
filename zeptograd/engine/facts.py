"""What the scheduler needs to know of a device, read from the device and its renderer.

The scheduler knows no device (schedule/ imports nothing of the runtime): the engine hands `create_schedule` these
facts, which decide the layouts a contraction reads (schedule/layout.py) and whether a scatter may run as one
kernel whose loops add in order.

>>> facts = device_facts("CPU")
>>> facts.runs_in_order, facts.layout.vector_layouts, device_facts("PYTHON").layout.vector_layouts
(True, True, False)
"""

from __future__ import annotations

from zeptograd.dtype import dtypes
from zeptograd.runtime.device import Device, cpu_layouts, device_tensor_cores, padded_reads_in_place, runs_in_order
from zeptograd.schedule.kernelize import DeviceFacts
from zeptograd.schedule.layout import LayoutFacts
from zeptograd.uop.ops import Ops


def layout_facts(device: str) -> LayoutFacts:
    """The facts that decide the layouts `device`'s contractions read, from its renderer.

    >>> layout_facts("PYTHON").vector_layouts
    False
    """
    base = Device.canonicalize(device)
    vector = cpu_layouts(base)
    lanes = Device[base].renderer.max_lanes(Ops.LOAD, dtypes.float32) if vector else 1
    return LayoutFacts(vector, lanes, vector and padded_reads_in_place(base), device_tensor_cores(base))


def device_facts(device: str) -> DeviceFacts:
    """What the scheduler needs to know of `device`: its layout facts, and whether it runs a kernel's loops in
    order."""
    base = Device.canonicalize(device)
    return DeviceFacts(layout_facts(base), runs_in_order(base))
