"""Every device name read one way, and made into its cost model one way.

A device name is ``NAME[:suffix]``. :data:`KINDS` is the table of the kinds of device: its rows
(in :mod:`eqsat.cost.devices`), what the suffix after ``NAME:`` says and how it is read —
measured on this machine (``ort-cpu:4``: threads), tuned (``hypogpu:oracle``: who tunes its
GEMMs), roofline profiles (``h100``, no suffix; or a ``.json`` profile file). :func:`parse_device`
reads a name into a :class:`DeviceChoice`, and :func:`cost_model` builds its row's model: the one
place a cost model is made from a name, so a new kind of device is one row here. A row names its
model as ``"module:name"``, imported on first use, so a model may live above ``eqsat`` (the tuned
``hypogpu`` model lives with its tuners, in :mod:`autotune.tuned_cost`).
"""
from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from eqsat.cost.costmodel import CostModel
from eqsat.cost.devices import DEVICES, MEASURED_DEVICES, TUNED_DEVICES, Device, MeasuredDevice, TunedDevice, get_device
from eqsat.refs import resolve

OVERSUBSCRIBE = 4  # measured-device threads allowed per core

Row = Device | MeasuredDevice | TunedDevice


def _threads(row: MeasuredDevice, suffix: str | None, device: str) -> int:
    """A measured device's thread count: 1 without a suffix. At most ``OVERSUBSCRIBE`` threads per
    core of this machine: ``ort-cpu:100000`` hung starting 100,000 threads, and past a few per
    core a timing measures the scheduler."""
    if suffix is None:
        return 1
    most = OVERSUBSCRIBE * (os.cpu_count() or 1)
    if not suffix.isdigit() or not 1 <= int(suffix) <= most:
        raise ValueError(f"device {device!r}: the thread count after {row.name}: must be 1 to {most} "
                         f"({OVERSUBSCRIBE} per core of this machine)")
    return int(suffix)


def _source(row: TunedDevice, suffix: str | None, device: str) -> str:
    """Who tunes a tuned device's kernels (its row's default without a suffix), checked by the
    row's ``check_source``."""
    return resolve(row.check_source)(row.default_source if suffix is None else suffix, device)


def _profile(row: Device, suffix: str | None, device: str) -> Device:
    """A roofline profile is its own argument: the suffix is part of its name."""
    return row


@dataclass(frozen=True)
class Kind:
    """One kind of device: its rows by name, what ``NAME:suffix`` says (``""``: a name has no
    suffix) and how the suffix is read into the argument its row's cost model is built with."""

    name: str
    rows: Mapping[str, Row]
    suffix: str
    read: Callable[[Any, str | None, str], Any]

    def find(self, device: str) -> tuple[Row, str | None] | None:
        """The row ``device`` names and the text after ``NAME:`` (None without one)."""
        name, colon, suffix = device.partition(":") if self.suffix else (device, "", "")
        row = self.rows.get(name)
        return None if row is None else (row, suffix if colon else None)


MEASURED = Kind("measured", MEASURED_DEVICES, "threads", _threads)
TUNED = Kind("tuned", TUNED_DEVICES, "source", _source)
ROOFLINE = Kind("roofline", DEVICES, "", _profile)
KINDS = (MEASURED, TUNED, ROOFLINE)


@dataclass(frozen=True)
class DeviceChoice:
    """A device name read: its kind, its row, and the argument (threads, source or profile) its
    row's cost model is built with."""

    name: str
    kind: Kind
    row: Row
    arg: Any

    def build(self, **options: Any) -> CostModel:
        """The row's cost model (``"module:class"``, imported on first use: onnxruntime is slow
        to load, PyTorch is an optional extra, the tuned models live with the tuners); ``options``
        go to its constructor (a measured model's ``progress``, ``path``, ``warmup``, ``runs``)."""
        return resolve(self.row.cost_model)(self.arg, **options)


def parse_device(device: str | Device) -> DeviceChoice:
    """``device`` read by the first kind with a row of its name; else a ``.json`` roofline profile
    file (:func:`~eqsat.cost.devices.get_device`, which names every built-in profile when it is not)."""
    if isinstance(device, Device):
        return DeviceChoice(device.name, ROOFLINE, device, device)
    for kind in KINDS:
        found = kind.find(device)
        if found is not None:
            row, suffix = found
            return DeviceChoice(device, kind, row, kind.read(row, suffix, device))
    profile = get_device(device)
    return DeviceChoice(device, ROOFLINE, profile, profile)


def cost_model(device: str | Device | CostModel, **options: Any) -> CostModel:
    """A cost model: given, or built from a device name or profile by its kind's row."""
    if isinstance(device, (str, Device)):
        return parse_device(device).build(**options)
    return device


def check_device(device: str) -> None:
    """Fail early, naming the device, when ``device`` names no row and no profile file."""
    parse_device(device)


def measured_device(device: str) -> tuple[MeasuredDevice, int] | None:
    """The measured row ``device`` names and its thread count; None for any other kind."""
    if MEASURED.find(device) is None:
        return None
    choice = parse_device(device)
    return choice.row, choice.arg


def measured_threads(device: str) -> int | None:
    """The thread count of a measured device name, None for any other name."""
    found = measured_device(device)
    return None if found is None else found[1]


def is_measured(device: str) -> bool:
    """Whether ``device`` prices kernels by timing them on this machine."""
    return MEASURED.find(device) is not None
