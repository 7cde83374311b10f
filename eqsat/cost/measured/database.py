"""The measurement database: one JSON object per line, appended as kernels are timed, reused by
every later run.

A line holds a kernel's key, the context it was measured in (this machine's fingerprint, the
runtime and its version, the thread count) and its :class:`~eqsat.cost.measured.timer.Timing`. Lines
from another context are foreign: kept in the file, never used (another device's lines, e.g.
``ort-cpu``'s beside ``torch-cpu``'s, silently; stale ones with a warning). A line that does not parse is
corrupt: skipped. Both are counted and reported once, as a warning naming the file and the
corrupt lines. Each line is written with one ``write`` on a file opened for appending, under an
exclusive ``flock``; a torn last line (a writer killed mid-line) is ended first, so it stays one
corrupt line instead of swallowing the next record. A file that cannot be written (read-only) or
read leaves the database in memory for the run, with a warning.

Timing is serialized across processes too (:meth:`MeasurementDB.measure`: a lock file beside the
database), and the first process's timing is reused by the second: two cold runs timed every
kernel twice, each inflated by the other. Each line records the load average and core count it
was timed under (``load1``, ``cores``), and a timing taken with more runnable processes than
cores is reported once as taken under contention. Such a timing (or one with no load recorded, from
before the load was kept) is only kept until the machine is quiet: then the kernel is timed again,
and a later line timed without contention is the one used. Contention inflated timings several
times and unevenly (ResNet-50's 3x3 convolutions: 14-21 ms in lines with no load recorded,
3-5 ms timed again on a quiet machine), and one calibration scale per model cannot undo that.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import platform
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path
from typing import Any

from eqsat.cost.measured.timer import Timing
from eqsat.diskcache import database_path

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
    """Where a measurement holds: machine, runtime (its first word the device kind, then its
    version and what else a timing depends on), intra-op threads."""

    machine: str
    runtime: str
    threads: int

    @classmethod
    def here(cls, threads: int) -> Context:
        import onnxruntime as ort

        return cls(machine_fingerprint(), f"onnxruntime {ort.__version__}", threads)


def kind(runtime: str) -> str:
    """The device kind of a context's ``runtime`` (its first word): the lines of another kind in a
    shared database are another device's, not stale ones."""
    return runtime.split(" ", 1)[0]


def machine_load() -> tuple[float, int]:
    """The 1-minute load average and the logical core count (load 0.0 where the OS keeps none)."""
    return (os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0), os.cpu_count() or 1


def timed_under_contention(row: dict[str, Any]) -> bool:
    """Whether a database line was timed with more runnable processes than cores, or records no
    load at all: its timing may be inflated, so a quiet machine times the kernel again."""
    load1, cores = row.get("load1"), row.get("cores")
    if not isinstance(load1, (int, float)) or not isinstance(cores, int):
        return True
    return load1 > cores


def default_path() -> Path | None:
    """``$EQSAT_LAB_MEASUREMENTS``, else ``measurements.jsonl`` in the cache folder (None: the
    cache is off, and measurements live only as long as the process)."""
    return database_path(ENV_PATH)


class MeasurementDB:
    """Timings by kernel key for one :class:`Context`, read from and appended to ``path``. On a
    miss the lines other processes appended since the last read are read first, so two
    processes pricing the same graphs time each kernel once between them (mostly). A kernel's
    timing is its first line timed without contention, else its first line (kept in
    :attr:`suspect` until a quiet machine times it again)."""

    def __init__(self, context: Context, path: Path | str | None = None):
        self.context = context
        self.path = Path(path) if path is not None else None
        self.timings: dict[str, Timing] = {}
        self.suspect: set[str] = set()  # keys whose timing was taken under contention (or load unknown)
        self.corrupt = self.foreign = self.contended = 0
        self._offset = 0  # bytes of the file read so far
        self._lines = 0  # lines of the file read so far
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
        corrupt, foreign, bad = self.corrupt, self.foreign, []
        try:
            with self.path.open("rb") as f:
                f.seek(self._offset)
                data = f.read()
        except OSError as exc:
            self._in_memory(f"cannot be read ({exc.strerror or exc})")
            return
        end = data.rfind(b"\n") + 1  # a line still being written is read next time
        self._offset += end
        for raw in data[:end].split(b"\n")[:-1]:
            self._lines += 1
            try:
                row = json.loads(raw)
                context = {k: row[k] for k in mine}
                key, timing = row["key"], Timing(**row["timing"])
                if not isinstance(key, str) or timing.problem() is not None:
                    raise ValueError
            except (ValueError, KeyError, TypeError, RecursionError):
                self.corrupt += 1
                bad.append(self._lines)
                continue
            if context != mine:
                if kind(str(context.get("runtime"))) == kind(self.context.runtime):
                    self.foreign += 1  # stale or another thread count: said once
                continue  # another device's line (ort-cpu's beside torch-cpu's): silently not ours
            self._keep(key, timing, timed_under_contention(row))
        corrupt, foreign = self.corrupt - corrupt, self.foreign - foreign
        if corrupt or foreign:
            lines = ", ".join(map(str, bad[:5])) + (", ..." if len(bad) > 5 else "")
            parts = [f"{corrupt} corrupt line(s) skipped"] * bool(corrupt)
            parts += [f"{foreign} line(s) from another machine, runtime version or thread count not used"
                      ] * bool(foreign)
            where = f" (corrupt: line {lines})" if bad else ""
            warnings.warn(f"{self.path}: {'; '.join(parts)}{where}", stacklevel=3)

    def _keep(self, key: str, timing: Timing, contended: bool) -> None:
        """Use ``timing`` for ``key`` if it is the first, or the first taken without contention
        after timings that were not: the first trusted timing is the one used, so every process
        reading the file prices the kernel alike."""
        if key in self.timings and (key not in self.suspect or contended):
            return
        self.timings[key] = timing
        (self.suspect.add if contended else self.suspect.discard)(key)

    def get(self, key: str) -> Timing | None:
        found = self.timings.get(key)
        if found is None:
            self._read()
            found = self.timings.get(key)
        return found

    def _in_memory(self, why: str) -> None:
        """Go on without the file (read-only, unreadable): this run's timings stay in memory."""
        warnings.warn(f"{self.path}: the measurement database {why}; this run keeps its timings in memory only",
                      stacklevel=4)
        self.path = None

    @contextmanager
    def _locked(self, suffix: str = "") -> Iterator[int | None]:
        """An exclusive ``flock`` on the database (``suffix=""``, opened for appending: the fd is
        yielded) or on its lock file beside it (``".lock"``); None when it cannot be opened."""
        if self.path is None:
            yield None
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            mode = os.O_RDWR | os.O_CREAT | (os.O_APPEND if not suffix else 0)
            fd = os.open(str(self.path) + suffix, mode, 0o644)
        except OSError as exc:
            if not suffix:
                self._in_memory(f"cannot be written ({exc.strerror or exc})")
            yield None
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield fd
        finally:
            os.close(fd)  # closing releases the lock

    def measure(self, key: str, time_it: Callable[[], Timing]) -> Timing:
        """``key``'s timing: from the database, or ``time_it()`` under the database's measuring
        lock, after reading what other processes appended while this one waited for it; timed
        again when the database's timing was taken under contention and the machine is quiet now."""
        return self.measure_all([key], lambda: [time_it()])[0]

    def measure_all(self, keys: Sequence[str], time_them: Callable[[], Sequence[Timing]]) -> list[Timing]:
        """The timings of ``keys`` taken together (graphs timed interleaved, which mean something
        only side by side): all from the database, or all timed by ``time_them()``, as
        :meth:`measure` times one. A run that reads them makes the choice the run that timed them
        made."""
        found = [self.get(k) for k in keys]
        if all(f is not None for f in found) and not any(self._again(k) for k in keys):
            return found
        with self._locked(".lock"):
            self._read()
            if any(self.timings.get(k) is None or self._again(k) for k in keys):
                timed = list(time_them())
                if len(timed) != len(keys):
                    raise ValueError(f"{len(keys)} keys timed together, {len(timed)} timings returned")
                for k, t in zip(keys, timed):
                    self.put(k, t)
        return [self.timings[k] for k in keys]

    def _again(self, key: str) -> bool:
        """Whether ``key``'s timing was taken under contention and the machine is quiet now."""
        if key not in self.suspect:
            return False
        load1, cores = machine_load()
        return load1 <= cores

    def put(self, key: str, timing: Timing) -> None:
        """Keep ``timing`` and append it to the file (one write of one whole line, under the lock)."""
        load1, cores = machine_load()
        self._keep(key, timing, load1 > cores)
        if load1 > cores:
            self.contended += 1
            if self.contended == 1:
                warnings.warn(f"{self.path or 'measurements'}: timing under contention (load average {load1:.1f} "
                              f"on {cores} cores); timings may be inflated, the file records the load of each",
                              stacklevel=3)
        line = json.dumps({**asdict(self.context), "key": key, "timing": asdict(timing),
                           "load1": round(load1, 2), "cores": cores}) + "\n"
        with self._locked() as fd:
            if fd is None:
                return
            try:
                size = os.fstat(fd).st_size
                if size and os.pread(fd, 1, size - 1) != b"\n":
                    line = "\n" + line  # end a torn last line: it stays one corrupt line of its own
                os.write(fd, line.encode())
            except OSError as exc:
                self._in_memory(f"cannot be written ({exc.strerror or exc})")


_OPEN: dict[tuple[Context, str], MeasurementDB] = {}
