"""The measurement database: one JSON object per line, appended as kernels are timed, reused by
every later run.

A line holds a kernel's key, the context it was measured in (this machine's fingerprint,
onnxruntime's version, the thread count) and its :class:`~eqsat.cost.measured.timer.Timing`. Lines
from another context are foreign: kept in the file, never used. A line that does not parse is
corrupt: skipped. Both are counted and reported once, as a warning naming the file. Each line is
written with one ``write`` on a file opened for appending, so processes measuring at the same
time interleave whole lines.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import platform
import warnings
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path

from eqsat.cost.measured.timer import Timing
from eqsat.diskcache import cache_dir

ENV_PATH = "EQSAT_LAB_MEASUREMENTS"


@cache
def machine_fingerprint() -> str:
    """The CPU model, its logical core count and the OS/architecture, hashed: a measurement is
    trusted only on the machine kind that made it."""
    model = platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    text = f"{model}|{os.cpu_count()}|{platform.system()}|{platform.machine()}"
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


@dataclass(frozen=True)
class Context:
    """Where a measurement holds: machine, onnxruntime version, intra-op threads."""

    machine: str
    runtime: str
    threads: int

    @classmethod
    def here(cls, threads: int) -> Context:
        import onnxruntime as ort

        return cls(machine_fingerprint(), f"onnxruntime {ort.__version__}", threads)


def default_path() -> Path | None:
    """``$EQSAT_LAB_MEASUREMENTS``, else ``measurements.jsonl`` in the cache folder (None: the
    cache is off, and measurements live only as long as the process)."""
    where = os.environ.get(ENV_PATH)
    if where:
        return Path(where)
    folder = cache_dir()
    return folder / "measurements.jsonl" if folder is not None else None


class MeasurementDB:
    """Timings by kernel key for one :class:`Context`, read from and appended to ``path``. On a
    miss the lines other processes appended since the last read are read first, so two
    processes pricing the same graphs time each kernel once between them (mostly)."""

    def __init__(self, context: Context, path: Path | str | None = None):
        self.context = context
        self.path = Path(path) if path is not None else None
        self.timings: dict[str, Timing] = {}
        self.corrupt = self.foreign = 0
        self._offset = 0  # bytes of the file read so far
        self._read()

    @classmethod
    def shared(cls, context: Context, path: Path | str | None) -> MeasurementDB:
        """One database per (context, file) in a process: every cost model there sees every timing."""
        key = (context, str(path))
        if key not in _OPEN:
            _OPEN[key] = cls(context, path)
        return _OPEN[key]

    def _read(self) -> None:
        """Read the lines appended since the last read (whole lines only)."""
        if self.path is None or not self.path.exists():
            return
        mine = asdict(self.context)
        corrupt, foreign = self.corrupt, self.foreign
        with self.path.open("rb") as f:
            f.seek(self._offset)
            data = f.read()
        end = data.rfind(b"\n") + 1  # a line still being written is read next time
        self._offset += end
        for raw in data[:end].splitlines():
            try:
                row = json.loads(raw)
                context = {k: row[k] for k in mine}
                key, timing = row["key"], Timing(**row["timing"])
                if not isinstance(key, str) or not (math.isfinite(timing.median_us) and timing.median_us >= 0
                                                     and timing.runs > 0):
                    raise ValueError
            except (ValueError, KeyError, TypeError):
                self.corrupt += 1
                continue
            if context != mine:
                self.foreign += 1
                continue
            self.timings.setdefault(key, timing)  # the first timing of a kernel is the one used
        corrupt, foreign = self.corrupt - corrupt, self.foreign - foreign
        if corrupt or foreign:
            parts = [f"{corrupt} corrupt line(s) skipped"] * bool(corrupt)
            parts += [f"{foreign} line(s) from another machine, onnxruntime or thread count not used"] * bool(foreign)
            warnings.warn(f"{self.path}: {'; '.join(parts)}", stacklevel=3)

    def get(self, key: str) -> Timing | None:
        found = self.timings.get(key)
        if found is None:
            self._read()
            found = self.timings.get(key)
        return found

    def put(self, key: str, timing: Timing) -> None:
        """Keep ``timing`` and append it to the file (one write of one whole line)."""
        self.timings.setdefault(key, timing)
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = json.dumps({**asdict(self.context), "key": key, "timing": asdict(timing)}) + "\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)


_OPEN: dict[tuple[Context, str], MeasurementDB] = {}
