"""Device profiles for the roofline cost model, as a table of data.

Peak throughput is for the dtype the graphs are stored in (dense BF16/FP16 on
tensor-core GPUs). ``h100`` and ``weak`` are the reference devices; the others
are public spec-sheet figures, with an assumed launch overhead. A user's own
device can be loaded from a JSON file with the same fields.
"""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import ClassVar

MIN_RATE = 1.0  # FLOP/s and B/s: a profile's floor, so a graph's time (at most ~1e30 FLOPs) stays finite
MAX_DEVICE_FIGURE = 1e30  # the ceiling of every figure of a profile (peak, bandwidth, launch µs)


@dataclass(frozen=True)
class Device:
    """A roofline device: peak FLOP/s, memory bandwidth in B/s, kernel launch overhead in µs."""

    name: str
    peak_flops: float
    bandwidth: float
    launch_us: float
    note: str = ""
    cost_model: ClassVar[str] = "eqsat.cost.roofline:RooflineCost"  # as the other kinds' rows: "module:class"

    def __post_init__(self) -> None:
        for field_name in ("name", "note"):
            value = getattr(self, field_name)
            if not isinstance(value, str):
                raise ValueError(f"a device's {field_name} must be a string, got {type(value).__name__}")
        for field_name in ("peak_flops", "bandwidth", "launch_us"):
            value = getattr(self, field_name)
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                raise ValueError(f"device {self.name!r}: {field_name} must be a number, got {type(value).__name__}")
            try:  # a 400-digit integer raised OverflowError in every later use
                finite = math.isfinite(value) and abs(value) <= MAX_DEVICE_FIGURE
            except OverflowError:
                finite = False
            if not finite:
                raise ValueError(f"device {self.name!r}: {field_name} must be a finite number "
                                 f"at most {MAX_DEVICE_FIGURE:g}")
        for field_name in ("peak_flops", "bandwidth"):
            if not getattr(self, field_name) > 0:
                raise ValueError(f"device {self.name!r}: {field_name} must be positive")
            if not getattr(self, field_name) >= MIN_RATE:  # 1e-300 FLOP/s priced every graph "inf -> inf µs"
                raise ValueError(f"device {self.name!r}: {field_name} must be at least {MIN_RATE:g} per second "
                                 f"(got {getattr(self, field_name):g}): smaller rates overflow every price")
        if not self.launch_us >= 0:
            raise ValueError(f"device {self.name!r}: launch_us must be >= 0")

    def to_dict(self) -> dict:
        return asdict(self)


_PROFILES = (
    Device("h100", 989e12, 3.35e12, 4.0, "H100 SXM, BF16 dense (the reference device)"),
    Device("h200", 989e12, 4.8e12, 4.0, "H200 SXM: the H100's arithmetic with 4.8 TB/s HBM3e; launch as h100's"),
    Device("weak", 4e12, 100e9, 10.0, "the reference hypothetical weak device"),
    Device("a100", 312e12, 2.0e12, 4.0, "A100, FP16/BF16 dense; launch overhead assumed"),
    Device("v100", 125e12, 0.9e12, 5.0, "V100, FP16 tensor cores; launch overhead assumed"),
    Device("k80", 4.37e12, 240e9, 10.0, "one K80 GK210 die, FP32 (no half-precision units); launch assumed"),
)
DEVICES: dict[str, Device] = {d.name: d for d in _PROFILES}
REFERENCE_DEVICES = ("h100", "weak")  # the reference pair of the papers' examples (cost tables)
DEFAULT_DEVICE = REFERENCE_DEVICES[0]  # what searches and experiments price on unless told
GPU_CHECK_PROFILES = (DEFAULT_DEVICE, "h200")  # the rooflines the GPU check's predictions are priced on


@dataclass(frozen=True)
class MeasuredDevice:
    """A device priced by timing kernels on this machine: ``name`` (one thread) or ``name:N`` (N
    threads), and its cost model as ``"module:class"`` taking the thread count, imported on first
    use (onnxruntime is slow to load; PyTorch is an optional extra)."""

    name: str
    cost_model: str
    note: str

    def with_threads(self, threads: int) -> str:
        """The device name for ``threads`` intra-op threads."""
        return self.name if threads == 1 else f"{self.name}:{threads}"


MEASURED_DEVICES: dict[str, MeasuredDevice] = {d.name: d for d in (
    MeasuredDevice("ort-cpu", "eqsat.cost.measured:OrtCpuCost", "kernels timed in onnxruntime's CPU provider"),
    MeasuredDevice("torch-cpu", "eqsat.cost.measured.torchdev:TorchCpuCost",
                   "kernels timed in PyTorch eager on this CPU (the torch extra)"),
    MeasuredDevice("torch-cuda", "eqsat.cost.measured.torchdev:TorchCudaCost",
                   "kernels timed in PyTorch eager on this machine's GPU, CUDA events (the torch extra)"),
)}
ORT_CPU = MEASURED_DEVICES["ort-cpu"]
TORCH_CPU = MEASURED_DEVICES["torch-cpu"]
TORCH_CUDA = MEASURED_DEVICES["torch-cuda"]


@dataclass(frozen=True)
class TunedDevice:
    """A device whose GEMMs are priced by tuned kernels: ``name`` (``default_source`` tunes) or
    ``name:SOURCE``; its cost model as ``"module:class"`` taking the source, and the function that
    checks a source as ``"module:function"`` (``source, device -> source``, written plainly). Both
    live with the tuners, above ``eqsat``, and are imported on first use."""

    name: str
    cost_model: str
    check_source: str
    default_source: str
    note: str = ""


TUNED_DEVICES: dict[str, TunedDevice] = {d.name: d for d in (
    TunedDevice("hypogpu", "autotune.tuned_cost:TunedHypoGPUCost", "autotune.tuned_cost:check_source", "ansor@64",
                "HypoGPU, every GEMM priced by its tuned kernel (hypogpu:oracle, hypogpu:TUNER@TRIALS)"),
)}
HYPOGPU = TUNED_DEVICES["hypogpu"]
HYPOGPU_ROOFLINE = DEVICES["a100"]  # HypoGPU is A100-like: the same peak and DRAM bandwidth


def get_device(name_or_path: str | Device) -> Device:
    """A built-in profile by name, or a JSON file with Device's fields."""
    if isinstance(name_or_path, Device):
        return name_or_path
    if name_or_path in DEVICES:
        return DEVICES[name_or_path]
    path = Path(name_or_path)
    if path.suffix == ".json" and path.exists():
        try:
            data = json.loads(path.read_text())
        except (json.JSONDecodeError, RecursionError, ValueError) as exc:  # ValueError: a 5,000-digit number
            why = "nested too deep" if isinstance(exc, RecursionError) else str(exc).split(";")[0]
            raise ValueError(f"{path}: not valid JSON for a device profile ({why})") from None
        if not isinstance(data, dict):
            raise ValueError(f"{path}: a device profile is a JSON object with name, peak_flops, bandwidth, launch_us")
        try:
            return Device(**data)
        except TypeError as exc:
            raise ValueError(
                f"{path}: not a device profile ({exc}); fields: name, peak_flops, bandwidth, launch_us"
            ) from None
        except ValueError as exc:  # a field out of range: name the file, not only the profile
            raise ValueError(f"{path}: {exc}") from None
    raise KeyError(f"unknown device {name_or_path!r} (built in: {', '.join(DEVICES)}; or a .json profile)")
