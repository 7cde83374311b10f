"""A device name -> its cost model: the measured CPU (``ort-cpu[:threads]``), HypoGPU with tuned
kernels (``hypogpu[:source]``), or the roofline of a profile name, profile file or Device."""
from __future__ import annotations

from eqsat.cost.costmodel import CostModel
from eqsat.cost.devices import Device, get_device
from eqsat.cost.roofline import RooflineCost
from eqsat.cost.tuned import TunedHypoGPUCost, parse_source

MEASURED = "ort-cpu"
"""The measured device: ``ort-cpu`` (one thread) or ``ort-cpu:N`` (N intra-op threads)."""


def measured_threads(device: str) -> int | None:
    """The thread count of a measured device name, None for any other name."""
    if device == MEASURED:
        return 1
    if device.startswith(MEASURED + ":"):
        count = device[len(MEASURED) + 1:]
        if not count.isdigit() or int(count) < 1:
            raise ValueError(f"device {device!r}: the thread count after {MEASURED}: must be a positive integer")
        return int(count)
    return None


def cost_model(device: str | Device | CostModel) -> CostModel:
    """A cost model: given; ``ort-cpu[:threads]``, measured on this machine
    (:class:`eqsat.cost.measured.OrtCpuCost`); or the roofline model of a device name, profile file
    or Device."""
    if isinstance(device, str) and (source := parse_source(device)) is not None:
        return TunedHypoGPUCost(source)
    if isinstance(device, str) and (threads := measured_threads(device)) is not None:
        from eqsat.cost.measured import OrtCpuCost

        return OrtCpuCost(threads)
    if isinstance(device, (str, Device)):
        return RooflineCost(device)
    return device


def check_device(device: str) -> None:
    """Fail early, naming the device, when ``device`` is neither measured nor a roofline profile."""
    if measured_threads(device) is None and parse_source(device) is None:
        get_device(device)
