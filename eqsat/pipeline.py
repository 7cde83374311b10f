"""The whole optimize job as one function: :func:`optimize_model` loads a model (a benchmark
name, an ``.onnx`` file or a :class:`~eqsat.ir.graph.Graph` in memory), prices it, calibrates a
measured cost model on it, searches, verifies, applies the guards that may keep the input
(:data:`eqsat.guards.GUARDS`, in order), chooses the memory layout a runtime that leaves it to
its caller (PyTorch) should run the best graph in, writes the file and prices the written file
again.

It prints nothing: the :class:`Outcome` holds every number the CLI (``eqsat-lab optimize``), the
experiments and a PyTorch backend report. ``progress`` (if given) hears the name of each phase as
it starts.
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from eqsat.cost.costmodel import CostModel, Layout
from eqsat.cost.devices import DEFAULT_DEVICE, ORT_CPU
from eqsat.guards import GUARDS, RUNTIME, WRITTEN, Guard, Kept, first_kept, measured_slower
from eqsat.ir.graph import Graph
from eqsat.onnx.written import Written
from eqsat.search import SearchResult
from eqsat.searches import ALPHA

ONNX_DEVICE = ORT_CPU.name  # an ONNX file runs on this machine: price it as measured here
BUILTIN_DEVICE = DEFAULT_DEVICE  # the benchmark graphs' papers priced them for a GPU
ONNX_OPS = ("standard", "onnxruntime")
GIVEN = "given by the caller"


@dataclass(frozen=True)
class WrittenFile:
    """One file the job wrote: what :func:`eqsat.onnx.written.write_optimized` checked, and the
    file imported again and priced (``cost``: :func:`eqsat.onnx.written.written_cost`) against
    ``best_us``, the price the search promised for it."""

    file: Written
    cost: Mapping[str, Any]
    best_us: float

    @property
    def written_us(self) -> float:
        return self.cost["written_us"]

    def to_dict(self) -> dict[str, Any]:
        return self.file.to_dict() | dict(self.cost)


@dataclass(frozen=True)
class Outcome:
    """What one optimize job did. ``result``: the verified search result after every guard (its
    ``best`` is the graph to use); ``graph``: the input; ``device`` and ``device_why``: the cost
    model's device and why it was chosen; ``calibration``: a measured model's fit to the input run
    end to end (None for a formula); ``runtime``: the input after onnxruntime's own fusions
    (``runtime_us``, ``runtime_fusions``; None for a model that prices the runtime itself);
    ``best_us``: the best as the runtime runs it; ``writes``: the files written, in order (a file
    refused by the ``written-file`` guard, then the input copied); ``phases``: seconds per phase;
    ``kept``: which guard kept the input and on what numbers (None: the best graph was taken);
    ``refused``: the result before the ``written-file`` guard, when that guard kept the input;
    ``load_s``: seconds to load the model; ``onnx_ops``: the ONNX ops a written file may use;
    ``layout``: the memory layout the runtime should run the best graph in, measured end to end
    (:meth:`~eqsat.cost.costmodel.CostModel.choose_layout`; None where the model runs nothing or
    the runtime lays tensors out itself). A layout is how a PyTorch module stores its tensors, not
    part of the graph: an ONNX file written has none."""

    result: SearchResult
    graph: Graph
    device: str
    device_why: str
    calibration: Any | None = None
    runtime: Mapping[str, Any] | None = None
    best_us: float = 0.0
    writes: tuple[WrittenFile, ...] = ()
    phases: Mapping[str, float] = field(default_factory=dict)
    load_s: float = 0.0
    onnx_ops: str = "standard"
    refused: SearchResult | None = None  # the result whose file the written-file guard refused
    layout: Layout | None = None

    @property
    def best(self) -> Graph:
        return self.result.best

    @property
    def kept(self) -> Kept | None:
        return self.result.kept

    @property
    def written(self) -> WrittenFile | None:
        """The file on disk (the last one written), or None when nothing was written."""
        return self.writes[-1] if self.writes else None

    def to_dict(self) -> dict[str, Any]:
        """The JSON record ``eqsat-lab optimize --json`` writes (without the process's start-up)."""
        payload = self.result.to_dict() | {"device_chosen_by": self.device_why}
        if self.calibration is not None:
            payload["calibration"] = self.calibration.to_dict()
        if self.runtime is not None:
            payload["runtime"] = dict(self.runtime)
        if self.layout is not None:
            payload["layout"] = self.layout.to_dict()
        payload["phases"] = dict(self.phases)
        if self.written is not None:
            payload["onnx"] = self.written.to_dict()
        return payload


def is_onnx(source: str | Path | Graph) -> bool:
    return isinstance(source, Path) or (isinstance(source, str) and source.endswith(".onnx"))


def default_device(source: str | Path | Graph, device: str | None = None) -> tuple[str, str]:
    """The device to price on and why: the one given, else :data:`ONNX_DEVICE` for an ONNX file (a
    user optimizing a file runs it; a GPU profile would tune it for a device they may not have),
    else :data:`BUILTIN_DEVICE`."""
    if device:
        return device, GIVEN
    if is_onnx(source):
        return ONNX_DEVICE, "the default for an ONNX file: measured in onnxruntime on this machine"
    if isinstance(source, Graph):
        return BUILTIN_DEVICE, "the default for a graph in memory: the benchmark graphs' device"
    return BUILTIN_DEVICE, "the default for a benchmark graph: its paper's device"


def writes_contrib(device: str, onnx_ops: str | None = None) -> bool:
    """onnxruntime's contrib kernels only where the user targets onnxruntime: ``onnx_ops``, else
    when the file was priced on the measured onnxruntime device (not torch-cpu: PyTorch runs no
    contrib kernels)."""
    if onnx_ops:
        return onnx_ops == "onnxruntime"
    return measures_in_onnxruntime(device)


def measures_in_onnxruntime(device: str) -> bool:
    """Whether ``device`` times graphs in onnxruntime on this CPU (``ort-cpu``): its pick was
    confirmed there end to end, so its written file is not timed a second time."""
    from eqsat.cost.registry import measured_device

    found = measured_device(device)
    return found is not None and found[0] is ORT_CPU


def memory_bytes() -> int:
    """The memory this machine has free for a run (Linux: MemAvailable; else all of it)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    import os

    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


CHECK_MAX_GIB = 16  # the numerical check's tensors, in float64, above this are refused before any work


def check_size(graph: Graph, what: str) -> None:
    """Refuse a graph whose tensors the numerical check cannot hold before any work: it holds every
    tensor in float64 (``--param tokens=100000000`` ended in a MemoryError, exit 3), estimated here
    from the shapes alone, against :data:`CHECK_MAX_GIB` and the memory free here, the lower."""
    need = 8 * sum(math.prod(shape) for n in graph.nodes() for shape in n.shapes)
    have = memory_bytes()
    if need > CHECK_MAX_GIB * 2**30:
        raise ValueError(f"{what}: its tensors need {need / 2**30:,.1f} GiB in float64 for the numerical check, "
                         f"more than its cap of {CHECK_MAX_GIB} GiB; choose smaller sizes")
    if need > have:
        raise ValueError(f"{what}: its tensors need {need / 2**30:,.1f} GiB in float64 for the numerical check, "
                         f"more than the {have / 2**30:,.1f} GiB free here; choose smaller sizes")


def load_source(source: str | Path | Graph, batch: int = 1, dims: Mapping[str, int] | None = None,
                params: Mapping[str, Any] | None = None) -> tuple[Graph, Any]:
    """The graph ``source`` names: a graph in memory, a benchmark builder (with ``params``) or an
    ``.onnx`` file (with ``batch``/``dims``); the second value is the ONNX import, or None. A graph
    too large for this machine's memory is refused here (:func:`check_size`)."""
    if isinstance(source, Graph):
        return source, None
    if is_onnx(source):
        from eqsat import onnx as onnx_io

        imported = onnx_io.load(source, batch=batch, dims=dict(dims or {}))
        check_size(imported.graph, str(source))
        return imported.graph, imported
    from eqsat.models import build

    graph = build(source, **dict(params or {}))
    shown = " ".join(f"{k}={','.join(map(str, v)) if isinstance(v, tuple) else v}" for k, v in (params or {}).items())
    check_size(graph, f"model {source} {shown}".strip())
    return graph, None


def search_limits(engine: Any, source: str | Path | Graph, preset: str | None = None,
                  params: Mapping[str, Any] | None = None, overrides: Mapping[str, Any] | None = None) -> Any:
    """The search's preset (default its paper preset), specialized to a benchmark model built as
    its paper built it (TASO's per-model budgets), with ``overrides`` (limit field -> value)
    applied; a fixed ``k_multi`` is TENSAT's setting, without merges by need unless given."""
    from eqsat.searches import preset_limits

    taso_model = source if isinstance(source, str) and not is_onnx(source) and not params else ""
    base = preset_limits(engine, preset or engine.default_preset, taso_model)
    given = dict(overrides or {})
    if "k_multi" in given:
        given.setdefault("multi_by_need", 0)
    try:
        return replace(base, **given)
    except TypeError:
        raise ValueError(f"search {engine.name!r} has no limit named among {', '.join(given)} "
                         f"(its limits: {', '.join(base.__dataclass_fields__)})") from None


def _rules(rules: Sequence[Any] | None, engine: Any) -> list[Any]:
    from eqsat.rules.rulefile import Rule
    from eqsat.rules.rulesets import default_rules

    if rules and all(isinstance(r, Rule) for r in rules):
        return list(rules)
    return default_rules(rules or engine.default_rule_sets)


def keep_runtime_gain(graph: Graph, result: SearchResult, model: Any, baseline: Mapping[str, Any] | None = None,
                      best: Mapping[str, Any] | None = None, guards: tuple[Guard, ...] = GUARDS) -> SearchResult:
    """The input instead of a best graph that is no faster, by the model's ``resolution``, than
    the input after the runtime's own fusions (the ``runtime-fusions`` guard; ``baseline`` and
    ``best``: :func:`~eqsat.onnx.runtime_baseline.runtime_baseline` of ``graph`` and of the best
    graph, when the caller has them). A best graph whose whole gain is the runtime's would be
    written as the input spelled again by the exporter: work the input does not do, for no gain."""
    from eqsat.onnx.runtime_baseline import runtime_baseline

    if result.best == graph:
        return result
    evidence = replace(result.evidence(graph, model), runtime=baseline or runtime_baseline(graph, model),
                       best_runtime=best or runtime_baseline(result.best, model))
    kept = first_kept(evidence, RUNTIME, guards)
    return result if kept is None else result.input_kept(graph, kept)


INSIDE = ("kernel_timing", "end_to_end_timing")  # phases spent inside the others (a measured model's timing)


def timing_phases(phases: Mapping[str, float], model: CostModel) -> dict[str, float]:
    """``phases`` and the seconds ``model`` spent timing kernels alone and graphs end to end
    (:data:`INSIDE`: within the phases that asked for them; a measured model's timing was in
    none of them, and a BERT run printed 7.87 s of phases for 264 s of work)."""
    return dict(phases) | {k: v for k, v in model.timing_s().items() if k in INSIDE}


def optimize_model(source: str | Path | Graph, *, search: str = ALPHA, device: str | None = None,
                   rules: Sequence[Any] | None = None, limits: Any = None, preset: str | None = None,
                   overrides: Mapping[str, Any] | None = None, out: str | Path | None = None, seed: int = 0,
                   batch: int = 1, dims: Mapping[str, int] | None = None, params: Mapping[str, Any] | None = None,
                   onnx_ops: str | None = None, guards: tuple[Guard, ...] = GUARDS,
                   progress: Callable[[str], None] | None = None) -> Outcome:
    """Optimize ``source`` (a benchmark name, an ``.onnx`` path or a :class:`Graph` in memory) with
    the registered search ``search`` (:data:`eqsat.searches.SEARCHES`) priced on ``device``
    (default: :func:`default_device`). ``rules``: shipped rule-set names or rule files, or parsed
    rules (default: the search's own); ``limits``: the search's limits value, else its ``preset``
    with ``overrides``; ``seed``: the numerical check's inputs; ``batch``, ``dims``: an ONNX
    file's symbolic sizes; ``params``: a benchmark builder's; ``out``: where an ONNX source's
    optimized file goes (checked in onnxruntime; None: nothing written); ``onnx_ops``: see
    :func:`writes_contrib`; ``guards``: the table of reasons to keep the input (an experiment that
    studies a search's best as such may pass fewer rows). A user error (an unknown model, device,
    search, preset or limit) is a ValueError or :class:`eqsat.errors.EqsatError` naming it."""
    from eqsat.cost.registry import cost_model
    from eqsat.heap import release_freed_memory
    from eqsat.onnx.runtime_baseline import runtime_baseline
    from eqsat.onnx.written import (
        FILE_CHECK_MORE,
        FILE_CHECK_RUNS,
        timed_in_onnxruntime,
        write_optimized,
        written_cost,
    )
    from eqsat.search import prepare, run_verified
    from eqsat.searches import get_search

    def phase(name: str) -> None:
        if progress is not None:
            progress(name)

    if onnx_ops is not None and onnx_ops not in ONNX_OPS:
        raise ValueError(f"onnx_ops {onnx_ops!r}: choose from {', '.join(ONNX_OPS)}")
    device, device_why = default_device(source, device)
    engine = get_search(search)
    engine.warm()
    phase("load")
    load_start = time.perf_counter()
    graph, imported = load_source(source, batch, dims, params)
    limits = limits if limits is not None else search_limits(engine, source, preset, params, overrides)
    load_s = time.perf_counter() - load_start
    prepare_start = time.perf_counter()
    prepare(engine, graph, limits)  # this graph's fixed work, started now (optional, see Search)
    prepare_s = time.perf_counter() - prepare_start
    phase("parse")
    parse_start = time.perf_counter()
    parsed = _rules(rules, engine)
    parse_s = time.perf_counter() - parse_start
    model = cost_model(device)
    phase("calibrate")
    start = time.perf_counter()
    calibration = model.calibrate(graph)  # a measured model fits its prices to the input run end to end
    calibrate_s = time.perf_counter() - start
    phase("search")
    start = time.perf_counter()
    result = run_verified(engine, graph, parsed, model, limits, seed, guards)
    release_freed_memory()  # the check's float64 arrays, freed, leave before the file is written beside them
    search_s = time.perf_counter() - start
    phase("runtime")
    start = time.perf_counter()
    runtime = runtime_baseline(graph, model) if model.latency_us(graph) is None else None
    best_runtime = runtime if runtime is None or result.best == graph else runtime_baseline(result.best, model)
    if imported is not None and runtime is not None:  # a file for onnxruntime: only a gain beyond its own fusions
        result = keep_runtime_gain(graph, result, model, runtime, best_runtime, guards)
        best_runtime = runtime if result.best == graph else best_runtime
    # the best as the runtime runs it: after its own fusions, for a model of kernels alone
    best_us = result.best_us if runtime is None else best_runtime["runtime_us"]
    phases = {"prepare": prepare_s, "parse": parse_s, "calibrate": calibrate_s, **result.timings,
              # the search's wall time outside its named phases: the guards, a measured pick's end-to-end check
              "search_other": max(search_s - sum(result.timings.values()), 0.0),
              "runtime": time.perf_counter() - start}
    phase("layout")
    start = time.perf_counter()
    layout = model.choose_layout(result.best)
    phases["layout"] = time.perf_counter() - start
    outcome = Outcome(result, graph, str(device), device_why, calibration, runtime, best_us, (), phases, load_s,
                      "onnxruntime" if writes_contrib(device, onnx_ops) else "standard", layout=layout)
    if imported is None or out is None:
        return replace(outcome, phases=timing_phases(phases, model))
    contrib = writes_contrib(device, onnx_ops)

    def write(best: Graph, promised_us: float) -> WrittenFile:
        phase("write")
        start = time.perf_counter()
        file = write_optimized(imported, best, source, out, contrib)
        phase("price")
        middle = time.perf_counter()
        # a file that is the input copied imports as the input did: its graph, not a second import
        cost = written_cost(out, promised_us, model, batch, dict(dims or {}),
                            graph=imported.graph if file.input_copied else None)
        phases["write"] = phases.get("write", 0.0) + middle - start
        phases["price"] = phases.get("price", 0.0) + time.perf_counter() - middle
        return WrittenFile(file, cost, promised_us)

    first = write(result.best, best_us)
    timed = None
    if not first.file.input_copied and not measures_in_onnxruntime(device):
        # priced elsewhere: at least not slower where onnxruntime runs it here. ort-cpu's own check
        # timed the two graphs as the writer exports them, which now round-trips a file within
        # noise; this check on BERT's 440 MB file held nine sessions: 32 s and 5.5 GB
        phase("file_check")
        start = time.perf_counter()
        key = f"{graph.digest}:{result.best.digest}:{contrib}"
        timed = timed_in_onnxruntime(source, out, key)
        if measured_slower(timed) and result.best_us < result.original_us:  # against the prediction:
            timed = timed_in_onnxruntime(source, out, key, runs=FILE_CHECK_RUNS * FILE_CHECK_MORE)  # time longer
        phases["file_check"] = time.perf_counter() - start
        first = replace(first, cost=dict(first.cost) | timed)
    evidence = replace(result.evidence(graph, model), runtime=runtime, written_us=first.written_us,
                       input_copied=first.file.input_copied, file_timed=timed)
    kept = first_kept(evidence, WRITTEN, guards)
    if kept is None:
        return replace(outcome, writes=(first,), phases=timing_phases(phases, model))
    # the file as written (a standard file cannot hold every fusion the search priced) runs no
    # faster than the input as onnxruntime runs it, or ran slower than it: the input is the file
    second = write(graph, runtime["runtime_us"] if runtime is not None else result.original_us)
    return replace(outcome, result=result.input_kept(graph, kept), refused=result, writes=(first, second),
                   phases=timing_phases(phases, model))
