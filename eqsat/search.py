"""One interface for graph searches: ``run(graph, rules, cost_model, limits) -> SearchResult``.

A search (the α-backtracking baseline in :mod:`taso_baseline.search`, equality saturation in
:mod:`eqsat.egraph`) takes a graph, rules, a cost model and its own limits, and returns one
:class:`SearchResult`: the best graph, its cost, timings and a per-search ``work`` record. Named
presets (the papers' settings, a smoke-test scale) keep every default in one place.
Verification is not a search's business: :func:`run_verified` checks any search's result
against its input once, numerically, and refuses a graph that differs.

The registry of concrete searches is :mod:`eqsat.searches` (it names both packages' classes by
string, imported on first use, which this module must not import); the guards that may keep the
input instead of a best graph are the table of :mod:`eqsat.guards`.
"""
from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Protocol

from eqsat.cost.roofline import CostModel
from eqsat.errors import EqsatError
from eqsat.graph_rewrite import GraphRewrite
from eqsat.guards import GUARDS, SEARCH, Evidence, Guard, Kept, first_kept
from eqsat.ir.evaluate import Comparison, compare_graphs
from eqsat.ir.graph import Graph
from eqsat.ir.recompute import graph_flops, recomputations, without_recomputation
from eqsat.rules.rulefile import Rule

GUARD_ROWS = {g.name: g for g in GUARDS}


class SearchError(EqsatError):
    """A search result that must not be used (it differs from its input)."""


def speedup_pct(original_us: float, best_us: float) -> float:
    """How much faster ``best`` is than ``original``, in percent (0 when either cost is 0 or not finite)."""
    if not (best_us > 0 and math.isfinite(best_us) and math.isfinite(original_us)):
        return 0.0
    return 100.0 * (original_us / best_us - 1.0)


class Work(Protocol):
    """A search's own record of what it did (queue pops, iterations, extraction...)."""

    def summary(self) -> str: ...

    def detail_lines(self) -> list[str]: ...

    def to_dict(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class SearchResult:
    """What every search returns: the best graph and its cost, the input's cost, wall seconds,
    why it stopped, phase timings, the search's ``work`` record, (after :func:`run_verified`)
    the numerical comparison with the input, and ``clock``: what a wall-clock limit decided.
    A search stopped only by its work limits (states, iterations, e-nodes, solver nodes) gives the
    same graph for the same input on any machine at any load; one its clock cut short
    (``time_bounded``) may not."""

    search: str
    model: str
    device: str
    original_us: float
    best_us: float
    best: Graph
    search_s: float
    stop: str
    work: Work
    timings: Mapping[str, float] = field(default_factory=dict)
    verified: Comparison | None = None
    clock: str = ""  # the wall-clock limits that cut this run short ("": reproducible)
    kept: Kept | None = None  # the guard that kept the input instead of a best graph, and its numbers

    @property
    def time_bounded(self) -> bool:
        """A clock, not work, decided the result: a re-run, or a run on a busy machine, may differ."""
        return bool(self.clock)

    def input_kept(self, graph: Graph, kept: Kept) -> SearchResult:
        """This result with ``graph`` (the input) as its best, ``kept`` as the record of why and
        its sentence added to the stop reason: every guard that refuses a best graph keeps the
        input the same way (:mod:`eqsat.guards`)."""
        return replace(self, best=graph, best_us=self.original_us, stop=f"{self.stop}; {kept.why}", kept=kept)

    def evidence(self, graph: Graph, cost_model: CostModel) -> Evidence:
        """What the guards of :mod:`eqsat.guards` read about this result against its input ``graph``."""
        return Evidence(graph, self.best, self.original_us, self.best_us, cost_model)

    @property
    def speedup_pct(self) -> float:
        return speedup_pct(self.original_us, self.best_us)

    def to_dict(self) -> dict[str, Any]:
        return {"search": self.search, "model": self.model, "device": self.device,
                "original_us": self.original_us, "best_us": self.best_us, "speedup_pct": self.speedup_pct,
                "search_s": self.search_s, "stop": self.stop, "time_bounded": self.time_bounded,
                "clock": self.clock, "kept": None if self.kept is None else self.kept.to_dict(),
                "best_ops": self.best.op_count(),
                "timings": dict(self.timings), **self.work.to_dict(),
                "verified": None if self.verified is None else asdict(self.verified)}

    def summary(self) -> str:
        """One line: costs, time, the work record's own summary, the stop reason and, when a clock
        decided, that the run is time-bounded."""
        bounded = f"; time-bounded by {self.clock}, not reproducible" if self.clock else ""
        return (f"{self.model} on {self.device}: {self.original_us:.2f} -> {self.best_us:.2f} µs "
                f"({self.speedup_pct:+.1f}%) in {self.search_s:.2f} s, {self.work.summary()}, "
                f"stop: {self.stop}{bounded}")


class Search(Protocol):
    """A graph search: a name, named presets of its limits (``default_preset`` reproduces its
    paper), the shipped rule sets it reads by default, ``warm`` and ``run``. ``limits(preset, model)`` may
    specialize a preset per model (TASO's example scripts set per-model budgets)."""

    name: str
    presets: Mapping[str, Any]
    default_preset: str
    default_rule_sets: tuple[str, ...]  # the shipped sets it reads when the user names none

    def limits(self, preset: str, model: str = "") -> Any: ...

    def warm(self) -> None:
        """Start what ``run`` will need (a worker process) while the caller still loads the model."""

    # optional: ``prepare(graph, limits)``, called once the model is built and before the rules
    # are parsed, starts the fixed work ``run`` will do for that graph (the e-graph search's
    # worker loads the rules the graph's last run needed); ``ready()`` waits until what ``warm``
    # started can take a run (an experiment timing many runs calls it once, untimed)

    def run(self, graph: Graph, rules: Sequence[Rule], cost_model: CostModel, limits: Any) -> SearchResult: ...


class WithGraphRewrites:
    """A search that also applies graph-level rewrites (:mod:`eqsat.graph_rewrite`) through its
    limits' ``graph_rewrites``: TENSAT with PET's transformations inside its e-graph, the α search
    with them among its moves. Presets and rules are the search's own; the result is named ``name``."""

    def __init__(self, search: Search, name: str, rewrites: Sequence[GraphRewrite]):
        self.search, self.name, self.rewrites = search, name, tuple(rewrites)
        self.presets = search.presets
        self.default_preset = search.default_preset
        self.default_rule_sets = search.default_rule_sets

    def limits(self, preset: str, model: str = "") -> Any:
        return self._with(self.search.limits(preset, model))

    def _with(self, limits: Any) -> Any:
        """``limits`` with this search's rewrites after the ones they already have (the identities)."""
        return replace(limits, graph_rewrites=tuple(dict.fromkeys(limits.graph_rewrites + self.rewrites)))

    def warm(self) -> None:
        self.search.warm()

    def prepare(self, graph: Graph, limits: Any) -> None:
        prepare(self.search, graph, self._with(limits))

    def ready(self) -> None:
        ready(self.search)

    def run(self, graph: Graph, rules: Sequence[Rule], cost_model: CostModel, limits: Any) -> SearchResult:
        result = self.search.run(graph, rules, cost_model, self._with(limits))
        return replace(result, search=self.name)


def prepare(search: Search, graph: Graph, limits: Any) -> None:
    """Call ``search``'s optional ``prepare(graph, limits)`` (see :class:`Search`), if it has one."""
    hook = getattr(search, "prepare", None)
    if hook is not None:
        hook(graph, limits)


def ready(search: Search) -> None:
    """Call ``search``'s optional ``ready()`` (see :class:`Search`), if it has one."""
    hook = getattr(search, "ready", None)
    if hook is not None:
        hook()


def verify(graph: Graph, result: SearchResult, seed: int = 0) -> SearchResult:
    """``result`` with its numerical comparison against ``graph``; a :class:`SearchError` naming the
    search and model if the best graph computes something else (some rule is unsound)."""
    check = compare_graphs(graph, result.best, trials=1, seed=seed)
    if not check.equal:
        raise SearchError(f"{result.search} search on {result.model}: the best graph differs from the input "
                          f"({check.detail}); a rule it used is unsound (check the rules with "
                          f"`eqsat-lab rules verify`)")
    return replace(result, verified=check)


def keep_unresolved_gain(graph: Graph, result: SearchResult, cost_model: CostModel) -> SearchResult:
    """The input instead of a best graph whose gain is below the cost model's ``resolution`` (the
    relative difference its prices can tell apart: 0 for a formula, the timing noise for a
    measured model, raised to the noise measured on the input by a calibration): a rewrite the
    measurements cannot show pays is not taken. A model that can time whole graphs
    (``end_to_end_us``) then decides on the two graphs timed end to end: both the predicted and
    the measured gain must exceed the resolution, and where they cannot be run end to end (prices
    that no end-to-end time calibrated or confirms) the input is kept. The rows are
    :data:`eqsat.guards.GUARDS` of the search stage."""
    return apply_search_guards(graph, result, cost_model)


def apply_search_guards(graph: Graph, result: SearchResult, cost_model: CostModel,
                        guards: tuple[Guard, ...] = GUARDS) -> SearchResult:
    """``result``, or the input kept by the first guard of the search stage that refuses its best
    (:func:`eqsat.guards.first_kept`); a best confirmed end to end says so in its stop reason."""
    evidence = result.evidence(graph, cost_model)
    kept = first_kept(evidence, SEARCH, guards)
    if kept is not None:
        return result.input_kept(graph, kept)
    note = evidence.note()
    return replace(result, stop=f"{result.stop}; {note}") if note else result


# --------------------------------------------------------------------------- no recomputation
def unfuse_recomputation(result: SearchResult, cost_model: CostModel) -> SearchResult:
    """``result`` without fusions that recompute a result the graph also computes plainly (a conv
    fused with SiLU's sigmoid beside the same conv for its Mul, see :mod:`eqsat.ir.recompute`),
    when the graph unfused is cheaper than the input; the reason goes in the stop reason. Else
    unchanged: the ``recomputation`` guard then keeps the input. A search's price may call such a
    copy free; the work it adds is not."""
    found = recomputations(result.best)
    if not found:
        return result
    repaired = without_recomputation(result.best)
    cost = cost_model.graph_time_us(repaired)
    if not cost < result.original_us:
        return result
    extra = graph_flops(result.best) - graph_flops(repaired)
    ops = ", ".join(sorted({r.fused.op for r in found}))
    why = f"{len(found)} fused {ops} recomputed a result another op reads (+{extra / 1e6:.1f} MFLOP"
    return replace(result, best=repaired, best_us=cost, stop=f"{result.stop}; {why} recomputed): unfused")


def refuse_recomputation(graph: Graph, result: SearchResult, cost_model: CostModel) -> SearchResult:
    """``result`` with recomputing fusions undone (:func:`unfuse_recomputation`), or the input when
    unfused it is no faster (the ``recomputation`` guard)."""
    result = unfuse_recomputation(result, cost_model)
    kept = GUARD_ROWS["recomputation"].check(result.evidence(graph, cost_model))
    return result if kept is None else result.input_kept(graph, kept)


def check_finite(time_us: float, model: str, device: str) -> None:
    """Refuse a price that overflowed to inf (or is nan or negative) before it is printed as a
    result: a profile of 1e-300 FLOP/s printed "inf -> inf µs"."""
    if not (math.isfinite(time_us) and time_us >= 0):
        raise ValueError(f"{model} on {device}: the cost model priced it at {time_us} µs, not a finite time; "
                         f"check the device's profile or measurement records")


def run_verified(search: Search, graph: Graph, rules: Sequence[Rule], cost_model: CostModel, limits: Any,
                 seed: int = 0, guards: tuple[Guard, ...] = GUARDS) -> SearchResult:
    """Run ``search`` and verify its result against ``graph`` (``seed`` picks the random inputs);
    the verification's seconds join the result's timings. A fusion that recomputes is undone
    (:func:`unfuse_recomputation`); then the guards of the search stage (``guards``, default
    :data:`eqsat.guards.GUARDS`) may keep the input. A price that is not a finite time is refused."""
    check_finite(cost_model.graph_time_us(graph), graph.name, cost_model.name)
    result = search.run(graph, rules, cost_model, limits)
    check_finite(result.best_us, graph.name, cost_model.name)
    result = unfuse_recomputation(result, cost_model)
    result = apply_search_guards(graph, result, cost_model, guards)
    start = time.perf_counter()
    checked = verify(graph, result, seed)
    return replace(checked, timings={**checked.timings, "verify": time.perf_counter() - start})
