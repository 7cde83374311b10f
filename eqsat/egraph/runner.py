"""Driving egglog: insert a graph, run rule iterations under limits, report each iteration.

egglog's Python API has no node or time limit and cannot interrupt an
iteration, so iterations are driven from here: every iteration saturates the
constness analysis, then runs the rewrite ruleset once (and the multi-pattern
ruleset in the first ``k_multi`` iterations), optionally under a back-off
scheduler that bans rules with too many matches in an iteration, and the
e-graph's size and the clock are checked after it.

Caps hold inside an iteration too: the rules are loaded as :data:`BATCHES` rulesets, which
together make ``rw`` (and ``multi``), so an iteration is one simultaneous pass (egg's
semantics) unless it would break a cap. An iteration that may overshoot the node limit (a
multi-pattern one, or one the last growth predicts past it) is run after saving the e-graph
(egglog's push); if it leaves more than ``nodes x (1 + NODE_SLACK)`` e-nodes it is undone (pop)
and run again batch by batch, checking after each batch. An iteration predicted to overrun
the clock runs batch by batch from the start. Batches see each other's results, so a stepped
iteration is not the simultaneous pass: it happens only where a cap stops the run anyway.
Rules are sent to egglog one per call: parsing many rules in one program costs memory
superlinearly in 13.2.
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import egglog.bindings as egglog

from ..graph import Graph, Node
from ..rules import Rule
from .language import HEADER, egg_string, split_proj_attrs
from .rewrites import Compiled, compile_rules

BATCHES = 16  # rulesets per rule kind: the granularity at which a cap can stop an iteration
NODE_SLACK = 0.10  # a batch that leaves more than nodes x (1 + NODE_SLACK) e-nodes is undone


def growth(before: int, after: int) -> float:
    """How much an iteration multiplied the e-graph (at least 1): the forecast of the next
    iteration's growth. Its time is forecast to grow with the square (matches grow with the
    e-graph on both sides of a pattern); the runner and the saturation worker both use these."""
    return max(after / max(before, 1), 1.0)


@dataclass(frozen=True)
class Limits:
    """The e-graph search's settings; TENSAT's paper limits by default: 15 iterations, 50k e-nodes,
    multi-pattern rules in 1. ``extract`` is ``ilp`` (exact, up to ``ilp_seconds``) or ``greedy``."""

    iterations: int = 15
    nodes: int = 50_000
    seconds: float = 60.0
    k_multi: int = 1
    match_limit: int | None = None  # back-off scheduler threshold per rule and iteration (None: off)
    extract: str = "ilp"
    ilp_seconds: float = 60.0
    ilp_solver: str = "highs"  # a row of eqsat.egraph.solvers.SOLVERS
    dump_egraph: str = ""  # write the saturated e-graph with node costs here (egraph-serialize JSON)

    def __post_init__(self) -> None:
        if self.extract not in ("ilp", "greedy"):
            raise ValueError(f"extract must be ilp or greedy, got {self.extract!r}")
        from .solvers import SOLVERS

        if self.ilp_solver not in SOLVERS:
            raise ValueError(f"ilp_solver must be one of {', '.join(SOLVERS)}, got {self.ilp_solver!r}")
        if self.iterations < 0 or self.nodes < 1 or self.k_multi < 0:
            raise ValueError(
                f"e-graph limits must be >= 0 iterations, >= 1 e-node and k_multi >= 0; got "
                f"{self.iterations} iterations, {self.nodes} e-nodes, k_multi {self.k_multi}"
            )
        if not (self.seconds >= 0 and math.isfinite(self.seconds)):
            raise ValueError(f"the e-graph time limit must be a finite number of seconds >= 0, got {self.seconds}")


@dataclass(frozen=True)
class Iteration:
    index: int
    enodes: int
    seconds: float
    matches: dict[str, int]
    multi: bool


@dataclass
class RunReport:
    iterations: list[Iteration] = field(default_factory=list)
    stop: str = ""
    load_s: float = 0.0
    rules_compiled: int = 0
    multi_compiled: int = 0
    egglog_rules: int = 0
    rules_skipped: dict[str, int] = field(default_factory=dict)

    @property
    def enodes(self) -> int:
        return self.iterations[-1].enodes if self.iterations else 0

    def matches(self) -> dict[str, int]:
        total: dict[str, int] = {}
        for it in self.iterations:
            for k, v in it.matches.items():
                total[k] = total.get(k, 0) + v
        return total


class EGraphRunner:
    """An egglog e-graph holding one tensor graph and the compiled rules."""

    def __init__(self, rules: Sequence[Rule] | Compiled, multi: bool = True):
        """Load compiled rules (or compile ``rules``; ``multi=False`` drops multi-pattern ones)."""
        compiled = rules if isinstance(rules, Compiled) else compile_rules(rules, multi=multi)
        self.lang = compiled.lang
        self.egraph = egglog.EGraph()
        start = time.perf_counter()
        self._send(HEADER)
        for kind in ("rw", "multi"):
            names = " ".join(f"{kind}_{b}" for b in range(BATCHES))
            self._send(" ".join(f"(ruleset {kind}_{b})" for b in range(BATCHES)) +
                       f" (unstable-combined-ruleset {kind} {names})")
        self._send(compiled.declarations)
        for k, rule in enumerate(compiled.rules):
            for kind in ("rw", "multi"):
                rule = rule.replace(f":ruleset {kind} :name", f":ruleset {kind}_{k % BATCHES} :name")
            self._send(rule)
        self.groups = compiled.groups
        self.report = RunReport(
            load_s=time.perf_counter() - start,
            rules_compiled=len(compiled.names),
            multi_compiled=len(compiled.multi_names),
            rules_skipped=compiled.skipped,
            egglog_rules=len(compiled.rules),
        )
        self.roots: list[str] = []

    def _send(self, text: str) -> list[Any]:
        return self.egraph.run_program(*self.egraph.parse_program(text)) if text.strip() else []

    # ------------------------------------------------------------------ insertion
    def insert(self, graph: Graph) -> list[str]:
        """Add ``graph`` one ``let`` per node; returns the let names of its outputs."""
        names: dict[Node, str] = {}
        lines: list[str] = []
        for i, n in enumerate(graph.nodes()):
            var = f"$n{i}"
            if n.is_leaf:
                expr = f"(leaf {egg_string(n.attr('name'))})"
            elif n.op == "split":  # only its projections become e-nodes (splitproj)
                continue
            elif n.op == "proj":
                sp = n.inputs[0]
                if sp.op != "split":
                    raise ValueError(f"proj of {sp.op} is not supported in the e-graph")
                ctor = self.lang.ctor(
                    "splitproj",
                    split_proj_attrs(sp.attr("axis"), n.attr("index")),
                    1,
                    len(sp.attr("sizes")),
                    len(n.shape),
                )
                expr = f"({ctor.name} {names[sp.inputs[0]]} {' '.join(map(str, sp.attr('sizes')))})"
            else:
                ctor = self.lang.ctor(n.op, n.attrs, len(n.inputs), rank=len(n.shape) if len(n.shapes) == 1 else None)
                expr = f"({ctor.name} {' '.join(names[x] for x in n.inputs)})"
            names[n] = var
            lines.append(f"(let {var} {expr})")
            lines.append(f"(set (rank {var}) {len(n.shape)})")
            lines.extend(f"(set (dim {var} {k}) {d})" for k, d in enumerate(n.shape))
            if n.op == "weight":
                lines.append(f"(const {var})")
        self._send(self.lang.take_pending())
        for k in range(0, len(lines), 400):
            self._send("\n".join(lines[k : k + 400]))
        self.roots = [names[o] for o in graph.outputs]
        return self.roots

    # ------------------------------------------------------------------ running
    def equal(self, a: str, b: str) -> bool:
        """Whether two let names (as :meth:`insert` returns them) are in one e-class."""
        try:
            self._send(f"(check (= {a} {b}))")
        except Exception:  # egglog reports a failed check as an error
            return False
        return True

    def size(self) -> int:
        sizes = dict(self._send("(print-size)")[0].sizes)
        return sum(v for k, v in sizes.items() if k in self.lang.ctors or k == "leaf")

    def _schedule(self, sets: list[str], limits: Limits) -> list[Any]:
        """Run ``sets`` (ruleset names) once, then the constness analysis to saturation."""
        if limits.match_limit is None:
            runs = " ".join(f"(run {r})" for r in sets)
            return self._send(f"(run-schedule {runs} (saturate (run analysis)))")
        runs = " ".join(f"(run-with bo {r})" for r in sets)  # a rule over the threshold is banned (back-off)
        return self._send(f"(run-schedule (let-scheduler bo (back-off :match-limit {limits.match_limit})) "
                          f"{runs} (saturate (run analysis)))")

    def _batched(self, multi: bool, limits: Limits, start: float) -> tuple[list[Any], str]:
        """One iteration batch by batch; returns its outputs and the cap that stopped or trimmed
        it ("" when every batch ran). The e-graph is saved (push) before each batch and restored
        (pop) when the batch leaves more than ``nodes x (1 + NODE_SLACK)`` e-nodes; the other
        batches still run, so the e-graph fills up to the cap with what fits."""
        out: list[Any] = []
        ceiling = limits.nodes * (1 + NODE_SLACK)
        cap = ""
        for kind in ("multi", "rw") if multi else ("rw",):
            for b in range(BATCHES):
                self._send("(push)")
                step = self._schedule([f"{kind}_{b}"], limits)
                enodes = self.size()
                if enodes > ceiling:
                    self._send("(pop)")  # this batch alone overshot: undo it, try the others
                    cap = "node limit"
                    continue
                out += step
                if enodes >= limits.nodes:
                    return out, "node limit"
                if time.perf_counter() - start > limits.seconds:
                    return out, "time limit"
        return out, cap

    def run(self, limits: Limits, on_iteration: Callable[[Iteration], None] | None = None) -> RunReport:
        """Run up to ``limits.iterations`` iterations; ``on_iteration`` hears about each one as it ends."""
        start = time.perf_counter()
        self._send("(run-schedule (saturate (run analysis)))")
        stop = "iteration limit"
        before = self.size()
        grew, last_s = 10.0, 0.0  # the first iteration's growth is a guess; it has no history
        for i in range(limits.iterations):
            t0 = time.perf_counter()
            multi = i < limits.k_multi
            sets = ["multi", "rw"] if multi else ["rw"]
            cap = ""
            if t0 - start + last_s * grew * grew > limits.seconds:  # may overrun the clock: step
                out, cap = self._batched(multi, limits, start)
            elif multi or before * grew * grew > limits.nodes:  # may overshoot the node cap
                self._send("(push)")
                out = self._schedule(sets, limits)
                if self.size() > limits.nodes * (1 + NODE_SLACK):
                    self._send("(pop)")  # it did: undo the pass and step up to the cap instead
                    out, cap = self._batched(multi, limits, start)
            else:
                out = self._schedule(sets, limits)
            matches: dict[str, int] = {}
            updated = False
            for o in out:
                report = getattr(o, "report", None)
                if report is None:
                    continue
                updated = updated or report.updated
                for name, count in report.num_matches_per_rule.items():
                    for member in self.groups.get(name, (name,)):  # a shared query's matches are each member's
                        matches[member] = matches.get(member, 0) + count
            enodes = self.size()
            last_s = time.perf_counter() - t0
            grew, before = growth(before, enodes), enodes
            self.report.iterations.append(Iteration(i, enodes, last_s, matches, multi))
            if on_iteration is not None:
                on_iteration(self.report.iterations[-1])
            if cap:
                stop = cap
                break
            if enodes > limits.nodes:
                stop = "node limit"
                break
            if time.perf_counter() - start > limits.seconds:
                stop = "time limit"
                break
            if not updated and not (i + 1 < limits.k_multi):
                stop = "saturated"
                break
        self.report.stop = stop
        return self.report
