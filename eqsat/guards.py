"""The guards that keep the input instead of a search's best graph: one ordered table of rows.

A search's best graph is written only when nothing speaks against it. Each :class:`Guard` row
names one reason to keep the input, the stage where its evidence exists (``search``: the best
graph and the cost model; ``runtime``: the input and the best after onnxruntime's own fusions;
``written``: the file as written, imported and priced again) and a check that reads that evidence
and returns a :class:`Kept` record or None. :func:`first_kept` runs a stage's rows in table
order and stops at the first that keeps the input; the record says which guard and on what
numbers, and its ``why`` is the text the stop reason prints. Nothing parses that text back.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from eqsat.cost.costmodel import CostModel
from eqsat.ir.graph import Graph
from eqsat.ir.recompute import graph_flops, recomputations, without_recomputation

SEARCH, RUNTIME, WRITTEN = "search", "runtime", "written"  # the stages, in the order the pipeline reaches them


@dataclass(frozen=True)
class Kept:
    """Why the input was kept: the guard (a row of :data:`GUARDS`, or a search's own), the two
    prices it compared (``input_us`` against ``best_us``, on the guard's ``basis``), the
    ``threshold`` the gain had to pass (a relative resolution; 0: any gain) and ``why``, the
    sentence the stop reason carries."""

    guard: str
    why: str
    input_us: float = 0.0
    best_us: float = 0.0
    threshold: float = 0.0
    basis: str = "priced"

    @property
    def gain(self) -> float:
        """``input_us / best_us``: the speed-up the refused graph had on the guard's basis."""
        return self.input_us / self.best_us if self.best_us > 0 else 1.0

    @property
    def brief(self) -> str:
        """A few words for a table cell: the guard, and the gain it refused on its basis."""
        return f"{self.guard}, {self.basis} {self.gain:.3f}x"

    @classmethod
    def from_dict(cls, row: Mapping[str, Any]) -> Kept:
        """The record :meth:`to_dict` wrote (its derived ``gain`` is recomputed)."""
        return cls(**{k: v for k, v in row.items() if k != "gain"})

    def to_dict(self) -> dict[str, Any]:
        return {"guard": self.guard, "why": self.why, "input_us": self.input_us, "best_us": self.best_us,
                "gain": self.gain, "threshold": self.threshold, "basis": self.basis}


@dataclass
class Evidence:
    """What the guards read, gathered by the pipeline as it goes (not a value: the end-to-end
    timing is taken once, on first use, and only if a guard needs it)."""

    graph: Graph
    best: Graph
    original_us: float
    best_us: float
    model: CostModel
    runtime: Mapping[str, Any] | None = None  # runtime_baseline of the input
    best_runtime: Mapping[str, Any] | None = None  # ... and of the best graph
    written_us: float | None = None  # the written file, imported and priced again
    input_copied: bool = False  # the written file is the input file copied
    file_timed: Mapping[str, float] | None = None  # the written file against the input, timed in onnxruntime
    _timed: Any = field(default=None, repr=False)

    @property
    def changed(self) -> bool:
        return self.best != self.graph

    @property
    def resolution(self) -> float:
        return self.model.resolution

    def timed(self) -> tuple[float, float] | None:
        """The two graphs timed end to end (None: the model runs nothing); an exception from the
        runtime is raised again on every call."""
        if self._timed is None:
            try:
                self._timed = ("ok", self.model.end_to_end_us(self.graph, self.best))
            except Exception as exc:  # onnxruntime's errors have no common base
                self._timed = ("error", exc)
        kind, value = self._timed
        if kind == "error":
            raise value
        return value

    def note(self) -> str:
        """What a passing end-to-end check adds to the stop reason ("" when none was timed)."""
        if self._timed is None or self._timed[0] != "ok" or self._timed[1] is None:
            return ""
        before, after = self._timed[1]
        return f"measured end to end {before / after:.3f}x"


def _recomputed(e: Evidence) -> Kept | None:
    found = recomputations(e.best) if e.changed else []
    if not found:
        return None
    repaired = without_recomputation(e.best)
    extra = graph_flops(e.best) - graph_flops(repaired)
    ops = ", ".join(sorted({r.fused.op for r in found}))
    return Kept("recomputation", f"{len(found)} fused {ops} recomputed a result another op reads "
                f"(+{extra / 1e6:.1f} MFLOP recomputed): input kept, unfused it is no faster",
                e.original_us, e.model.graph_time_us(repaired))


def _predicted(e: Evidence) -> Kept | None:
    if e.resolution <= 0 or not e.changed or e.best_us < e.original_us * (1 - e.resolution):
        return None
    return Kept("resolution", f"input kept: predicted {e.original_us / e.best_us if e.best_us > 0 else 1.0:.3f}x, "
                f"not faster by the cost model's resolution ({e.resolution:.1%})",
                e.original_us, e.best_us, e.resolution)


def _unmeasurable(e: Evidence) -> Kept | None:
    if e.resolution <= 0 or not e.changed:
        return None
    try:
        e.timed()
    except Exception as exc:
        return Kept("unmeasurable", f"input kept: the gain cannot be measured end to end "
                    f"({' '.join(str(exc).split())})", e.original_us, e.best_us, e.resolution)
    return None


def _end_to_end(e: Evidence) -> Kept | None:
    if e.resolution <= 0 or not e.changed:
        return None
    timed = e.timed()
    basis = "measured end to end" if timed is not None else "priced"
    before, after = timed if timed is not None else (e.original_us, e.best_us)
    if after < before * (1 - e.resolution):
        return None
    return Kept("end-to-end", f"input kept: {basis} {before / after:.3f}x, not faster by the cost model's "
                f"resolution ({e.resolution:.0%})", before, after, e.resolution, basis)


def _runtime_fusions(e: Evidence) -> Kept | None:
    if not e.changed or e.runtime is None or e.best_runtime is None:
        return None
    before, after = e.runtime["runtime_us"], e.best_runtime["runtime_us"]
    resolution = max(e.resolution, 0.0)
    if after < before * (1 - resolution):
        return None
    beyond = before / after if after > 0 else 1.0
    return Kept("runtime-fusions", f"input kept: {beyond:.3f}x beyond onnxruntime's own fusions, not faster "
                f"by the cost model's resolution ({resolution:.0%})", before, after, resolution, "runtime")


def _written_file(e: Evidence) -> Kept | None:
    if e.runtime is None or e.input_copied or e.written_us is None:
        return None
    before, after = e.runtime["runtime_us"], e.written_us
    if after < before * (1 - e.resolution):
        return None
    gain = before / after if after > 0 else 1.0
    return Kept("written-file", f"input written: the file as written is {gain:.3f}x", before, after,
                e.resolution, "written file")


FILE_RESOLUTION = 0.01  # a written file slower than the input by more than this (or the noise) is not written:
# at 2%, files the check let pass at 0.98-0.99 measured 0.979 in 40 runs (the zoo's LLaMA block on h100)
FILE_FLOOR_US = 5.0  # ... and by more than this: a 10 µs model's calls differ by 0.4 µs from one file to another


def file_threshold(file_timed: Mapping[str, float]) -> float:
    """How much slower than its input a written file may measure: the noise, at least
    :data:`FILE_RESOLUTION`."""
    return max(FILE_RESOLUTION, file_timed["ort_noise"])


def measured_slower(file_timed: Mapping[str, float]) -> bool:
    """Whether a written file timed against its input (``timed_in_onnxruntime``) ran slower by
    more than :func:`file_threshold` and :data:`FILE_FLOOR_US`."""
    before, after = file_timed["ort_input_us"], file_timed["ort_written_us"]
    return after > before * (1 + file_threshold(file_timed)) and after - before > FILE_FLOOR_US


def _measured_file(e: Evidence) -> Kept | None:
    if e.file_timed is None or e.input_copied or not measured_slower(e.file_timed):
        return None
    before, after = e.file_timed["ort_input_us"], e.file_timed["ort_written_us"]
    threshold = file_threshold(e.file_timed)
    return Kept("measured-file", f"input written: the file as written measured {before / after:.3f}x the input "
                f"in onnxruntime on this CPU, slower by more than the noise ({threshold:.1%})", before, after,
                threshold, "onnxruntime")


@dataclass(frozen=True)
class Guard:
    """One reason to keep the input: its name, the stage whose evidence it reads, the check and
    what it means."""

    name: str
    stage: str
    check: Callable[[Evidence], Kept | None]
    description: str


GUARDS: tuple[Guard, ...] = (
    Guard("recomputation", SEARCH, _recomputed,
          "a fusion recomputes a result the graph also computes plainly, and the graph unfused is no faster"),
    Guard("resolution", SEARCH, _predicted,
          "the predicted gain is below the cost model's resolution (the noise of its prices)"),
    Guard("unmeasurable", SEARCH, _unmeasurable,
          "a model that times whole graphs cannot run the two graphs end to end"),
    Guard("end-to-end", SEARCH, _end_to_end,
          "the two graphs timed end to end (or priced) differ by less than the resolution"),
    Guard("runtime-fusions", RUNTIME, _runtime_fusions,
          "an ONNX file for onnxruntime: the best is no faster than the input after onnxruntime's own fusions"),
    Guard("written-file", WRITTEN, _written_file,
          "the file as written, imported and priced again, is no faster than the input as onnxruntime runs it"),
    Guard("measured-file", WRITTEN, _measured_file,
          "a file priced on another device than ort-cpu runs slower than the input in onnxruntime on this CPU"),
)


def first_kept(evidence: Evidence, stage: str, guards: tuple[Guard, ...] = GUARDS) -> Kept | None:
    """The first row of ``stage`` in ``guards`` that keeps the input, in table order, or None."""
    for guard in guards:
        if guard.stage == stage:
            kept = guard.check(evidence)
            if kept is not None:
                return kept
    return None
