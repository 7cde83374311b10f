"""What a merge by need is judged by: the exact optimum of the e-graph so far, and its graph.

A :class:`MergeJudge` extracts (:data:`Optimum`) beside the e-graph it judges: the saturation
worker is sent one with its job and judges its own e-graph, so the e-graph is read, priced and
extracted in one process, one step after another. A judge in the parent read a view that had
crossed processes, on a core that had waited idle while the worker saturated: NasRNN's four
extractions took 0.64-0.85 s of the parent's CPU against 0.51-0.59 s where they ran right after
the read, and a 0.1 s sleep before each judge, in one process, cost as much. Where the judge
cannot be sent (a cost model that does not pickle) the worker asks the parent, as before. The
worker marks the answer's e-classes ``chosen`` (``EGraphRunner.mark_best``); the answer carries
each node's e-class, so the worker names an e-class the runner already named by that reference
instead of sending the node's term again (each command costs egglog 30-90 µs: NasRNN's first
mark took 33 ms with every term sent, 15 ms without).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from eqsat.cost.roofline import CostModel
from eqsat.egraph.extract import Extraction, extract, node_costs, read_egraph, to_graph
from eqsat.egraph.ilp import ILPSettings
from eqsat.egraph.limits import Limits, RunReport
from eqsat.egraph.view import EGraphView
from eqsat.ir.graph import Graph, Node

Optimum = Callable[[EGraphView, list[str]], tuple[float, Graph, list[Any]]]
"""The exact extracted cost of an e-graph (its view and root lets), the graph that has it and
the e-class of each of its nodes (in ``nodes()`` order; None: a split): what merges by need are
judged by, and whose ops they pair."""

JUDGE_NODES = 10_000  # branch-and-bound nodes of a judge's extraction and of the final one's cycle filter
JUDGE_SECONDS = 10.0  # its safety net (a judge the clock stops marks the run as time-bounded)

Seen = tuple[EGraphView, Extraction, Graph, list[float]]
"""A judge's e-graph, its answer, that answer's graph and the e-graph's node prices."""


@dataclass
class MergeJudge:
    """The :data:`Optimum` of one run's merges by need, and what its judges saw: each judge's
    e-graph, answer, graph and prices (``seen``; the final extraction starts from the one that saw
    the final e-graph), what the clock decided (``clocks``) and the last judge's graph (``hint``:
    it lies in every later, larger e-graph of the run). Node prices are kept by signature across
    judges (``prices``). ``helper`` makes the part helper a judge's extraction solves its parts
    with, two at a time (the other process, waiting)."""

    model: CostModel
    graph: Graph
    limits: Limits
    prices: dict[tuple, float] = field(default_factory=dict)
    seen: list[Seen | None] = field(default_factory=list)
    clocks: list[str] = field(default_factory=list)
    hint: list[Graph] = field(default_factory=list)
    helper: Callable[[], Any] | None = None  # a new part helper for each judge (not sent: each process sets its own)

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "helper": None}

    def __call__(self, view: EGraphView, lets: list[str]) -> tuple[float, Graph, list[Any]]:
        # a judge compares optima: the cycle filter's is exact on what it keeps, and the whole-e-graph
        # proof is left to the final extraction, which runs once
        # no bound pruning: a judge's start is the last judge's graph, and the chain bounds lie far below it
        # (NasRNN's 181 against 683-899 us): it dropped only e-nodes the reduction drops, for 50 ms
        limits = self.limits
        settings = ILPSettings(solver=limits.ilp_solver, acyclic="filter", memory_gb=limits.memory_gb,
                               nodes=JUDGE_NODES, helper=self.helper() if self.helper else None, prune=False)
        roots = [view.lets[r] for r in lets]
        costs = node_costs(view, self.model, self.graph.dtype, self.prices)
        found = extract(view, costs, roots, limits.extract, min(limits.ilp_seconds, JUDGE_SECONDS), settings,
                        self.hint[0] if self.hint else None)
        if found.clock:
            self.clocks.append(f"{found.clock} (judging a merge round)")
        classes: dict[Node, Any] = {}
        leaves = {n.attr("name"): n for n in self.graph.leaves()}
        self.hint[:] = [to_graph(view, found.choice, roots, leaves, self.graph, classes)]
        self.seen.append((view, found, self.hint[0], costs))
        return found.cost, self.hint[0], [classes.get(n) for n in self.hint[0].nodes()]

    def final(self, report: RunReport) -> Seen | None:
        """What the judge that saw ``report``'s final e-graph saw (None: none did). This run's judges
        are the last ``report.judges`` entries (a replay after a kill adds its own)."""
        if report.final_judged is None:
            return None
        return self.seen[len(self.seen) - report.judges + report.final_judged]

    def sent_back(self, report: RunReport) -> tuple[Seen | None, list[str], list[Graph]]:
        """What the parent needs of a run judged in the worker: the final e-graph's judge, the
        clocks and the hint (the other judges' e-graphs stay there)."""
        return self.final(report), self.clocks, self.hint

    def adopt(self, report: RunReport, back: tuple[Seen | None, list[str], list[Graph]]) -> None:
        """Take in what :meth:`sent_back` sent for ``report``'s run, as if this judge had judged it."""
        final, clocks, hint = back
        entries: list[Seen | None] = [None] * report.judges
        if report.final_judged is not None:
            entries[report.final_judged] = final
        self.seen.extend(entries)
        self.clocks.extend(clocks)
        self.hint[:] = hint


def judged(runner: Any, ask: Optimum, roots: list[str]) -> tuple[float, Graph, dict[Node, str]]:
    """A judge's answer (``ask``: a :class:`MergeJudge` here, or a question to the parent process),
    with a reference to each of its graph's e-classes the runner named."""
    refs: dict[int, str] = {}
    cost, best, classes = ask(read_egraph(runner.egraph, runner.lang, refs=refs), roots)
    return cost, best, known_refs(best, classes, refs)


def known_refs(graph: Graph, classes: list[Any], refs: dict[int, str]) -> dict[Node, str]:
    """The best graph's nodes whose e-class a reference names: a mark need not name them again.
    By position: a graph crosses processes as its structure, rebuilt there as new nodes."""
    return {n: refs[c] for n, c in zip(graph.nodes(), classes) if c in refs}
