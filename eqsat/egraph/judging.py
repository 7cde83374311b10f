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

The final extraction proves the final e-graph's optimum over the whole e-graph. Where the last
merge round allowed does not pay, the final e-graph is the one that round started from, and the
parent, idle while the worker runs the round, proves it then (:class:`Speculation`): the worker's
judge of that round solves its parts alone meanwhile. Otherwise the worker proves it right after
the run, the parent solving half its parts (:meth:`MergeJudge.prove_final`).
"""
from __future__ import annotations

import contextlib
import pickle
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.reduction import ForkingPickler
from typing import Any

from eqsat.cost.roofline import CostModel
from eqsat.egraph.extract import Extraction, extract, node_costs, read_egraph, to_graph
from eqsat.egraph.ilp import ILPSettings
from eqsat.egraph.limits import Limits, RunReport, over_cap
from eqsat.egraph.solvers import RELAXATIONS
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

SPECULATED = "speculated"  # sent back for the final judge's e-graph: the parent has it (see Speculation)
PROOF_SLACK = 1.05  # an extraction may run past its seconds by this share, and a second more (prove_final)


def filtered_optimum(found: Extraction) -> bool:
    """Whether a judge's answer is the cycle filter's optimum of its e-graph, which the final
    extraction's proof over the whole e-graph starts from (see ``ILPSettings.filtered``)."""
    return found.method == "ilp" and found.status.startswith("Optimal")


def final_extraction(view: EGraphView, costs: list[float], roots: list[Any], limits: Limits, seconds: float,
                     hint: Graph | None, greedy: dict[Any, int] | None, filtered: bool, helper: Any = None
                     ) -> Extraction:
    """The run's answer: the exact extraction of its final e-graph, proved over the whole e-graph
    within ``limits.ilp_nodes`` (``filtered``: ``hint`` is the cycle filter's optimum already)."""
    settings = ILPSettings(limits.ilp_solver, nodes=JUDGE_NODES, prove_nodes=limits.ilp_nodes,
                           memory_gb=limits.memory_gb, filtered=filtered, helper=helper)
    return extract(view, costs, roots, limits.extract, seconds, settings, hint, greedy)


def proof_of(seen: Seen, roots: list[str], limits: Limits, seconds: float, helper: Any = None) -> Extraction:
    """The final extraction of the e-graph a judge saw (``roots``: its root lets), from that
    judge's answer, which must be the filter's optimum (:func:`filtered_optimum`)."""
    view, found, graph, costs = seen
    return final_extraction(view, costs, [view.lets[r] for r in roots], limits, seconds, graph,
                            None if found.clock else found.greedy, True, helper)


def proof_wanted(found: Extraction, limits: Limits) -> bool:
    """Whether the final extraction would prove this judge's answer (a proof is asked for, and the
    answer is the filter's optimum): only then is its e-graph proved ahead (:class:`Speculation`) or
    by the worker (:meth:`MergeJudge.prove_final`)."""
    return limits.ilp_nodes > 0 and limits.extract == "ilp" and filtered_optimum(found) and not found.exact


@dataclass
class Speculation:
    """The final extraction of the e-graph the last merge round starts from, run by the parent
    while the worker runs that round, which mostly does not pay: NASNet-A's, Inception-v3's and
    BERT's did not, and their answer was that e-graph's. Kept only where the round did not pay
    (the e-graph is the final one) and no clock cut the proof short, so the answer is the one the
    final extraction would give; otherwise the record of relaxations is put back as it was."""

    index: int  # the judge whose e-graph it is (0-based, in its run)
    seen: Seen  # kept whatever the proof: the worker does not send this e-graph again
    found: Extraction | None  # None: a clock cut the proof short (the final extraction, with its own time, decides)
    relaxations: tuple[dict[bool, int], dict[bool, int]]  # RELAXATIONS before the proof

    @classmethod
    def run(cls, index: int, seen: Seen, roots: list[str], limits: Limits, until: float) -> Speculation:
        """Prove judge ``index``'s e-graph by ``until`` (``time.perf_counter``'s) at the latest."""
        before = RELAXATIONS.saved()
        found = proof_of(seen, roots, limits, min(limits.ilp_seconds, until - time.perf_counter()))
        speculation = cls(index, seen, None if found.clock else found, before)
        if found.clock:
            speculation.undo()
        return speculation

    def undo(self) -> None:
        RELAXATIONS.restore(self.relaxations)


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
    proved: Extraction | None = None  # the final e-graph's extraction: by the parent ahead, or by the worker
    proof_s: float = 0.0  # the seconds of the worker's proof, after the run (the parent's ahead overlap the run)
    speculated: int | None = None  # (in the worker) the judge whose e-graph the parent proves ahead

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
        return None if report.final_judged is None else self.entry(report, report.final_judged)

    def entry(self, report: RunReport, index: int) -> Seen | None:
        """What judge number ``index`` of ``report``'s run (so far) saw."""
        return self.seen[len(self.seen) - report.judges + index]

    def before_last_round(self, report: RunReport, index: int, roots: list[str], send: Callable[[Any], None]
                          ) -> None:
        """In the worker, before the last merge round allowed: where the final extraction would
        prove the e-graph that round starts from (judge ``index``'s), ``send`` it to the parent,
        which proves it meanwhile; this round's judge then solves its parts alone."""
        seen = self.entry(report, index)
        if seen is not None and proof_wanted(seen[1], self.limits):
            send(("speculate", (index, seen, roots)))
            self.helper, self.speculated = None, index

    def prove_final(self, report: RunReport, roots: list[str], helper: Any, send: Callable[[Any], None]) -> None:
        """In the worker, after the run: the final extraction of the final e-graph, the parent
        solving half its parts (``helper``), where it would prove a judge's answer and the parent
        has not (NasRNN's last merge round pays). The parent proved it after the e-graph had
        crossed, on a core that had waited, and after its own unused proof ahead: NasRNN's proof
        began 0.1 s after its last judge's answer. Not past half the memory cap (this process holds
        the e-graph too). The parent is told the proof's seconds first (``send``): the saturation's
        hard limit gives way to them. A fresh record of relaxations decides what it tries, as the
        parent's did."""
        final, limits = self.final(report), self.limits
        if final is None or report.final_judged == self.speculated or not proof_wanted(final[1], limits) \
                or over_cap(limits.memory_gb / 2):
            return
        send(("proving", limits.ilp_seconds * PROOF_SLACK + 1.0))
        saved = RELAXATIONS.saved()
        RELAXATIONS.reset()
        try:
            self.proved = proof_of(final, roots, limits, limits.ilp_seconds, helper)
        finally:
            RELAXATIONS.restore(saved)

    def sent_back(self, report: RunReport, roots: list[str], helper: Any, send: Callable[[Any], None]
                  ) -> tuple[Seen | str | None, list[str], list[Graph], Extraction | None]:
        """What the parent needs of a run judged in the worker: the final e-graph's judge (only
        :data:`SPECULATED` where the parent has that e-graph already), the clocks, the hint (the
        other judges' e-graphs stay there) and the worker's proof, made first (:meth:`prove_final`)."""
        self.prove_final(report, roots, helper, send)
        final = SPECULATED if self.speculated is not None and report.final_judged == self.speculated \
            else self.final(report)
        return final, self.clocks, self.hint, self.proved

    def adopt(self, report: RunReport, back: tuple[Seen | str | None, list[str], list[Graph], Extraction | None],
              speculation: Speculation | None = None) -> None:
        """Take in what :meth:`sent_back` sent for ``report``'s run, as if this judge had judged it,
        with the proof ``speculation`` made meanwhile: kept where its e-graph is the final one."""
        final, clocks, hint, proved = back
        if proved is not None:
            self.proved, self.proof_s = proved, proved.seconds
        if speculation is not None and report.final_judged == speculation.index:
            final, self.proved = speculation.seen, speculation.found
        elif speculation is not None:  # the round paid: its proof goes unused
            speculation.undo()
        if isinstance(final, str):  # the worker sends it only for the e-graph this process was sent
            raise RuntimeError("the worker sent back no final e-graph, and this process was sent none to prove")
        entries: list[Seen | None] = [None] * report.judges
        if report.final_judged is not None:
            entries[report.final_judged] = final
        self.seen.extend(entries)
        self.clocks.extend(clocks)
        self.hint[:] = hint


def job_bytes(job: tuple, optimum: Optimum | None) -> bytes:
    """A saturation job pickled with its judge, for the worker to judge its own e-graph, or
    without one (the worker then asks the parent) where the judge does not pickle: a cost model
    that holds a module (``torch-cpu``'s) does not."""
    if isinstance(optimum, MergeJudge):
        with contextlib.suppress(TypeError, AttributeError, pickle.PicklingError):
            return bytes(ForkingPickler.dumps(job + (optimum,)))
    return bytes(ForkingPickler.dumps(job + (None,)))


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
