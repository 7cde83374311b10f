"""``optimize(graph, rules, device, limits)``: TENSAT-style equality saturation on egglog."""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any, Sequence

import multiprocessing

from ..cost import RooflineCost
from ..devices import Device, get_device
from ..evaluate import Comparison, compare_graphs
from ..graph import Graph
from ..rules import Rule
from .extract import EGraphView, filter_cycles, greedy_dag, ilp_extract, node_costs, read_egraph, selection_cost, to_graph
from .relevance import relevant_rules
from .rewrites import Compiled, compile_rules
from .runner import EGraphRunner, Limits, RunReport


@dataclass
class Result:
    model: str
    device: str
    original_us: float
    best_us: float
    best: Graph
    greedy_us: float
    extract: str
    gap: float
    ilp_status: str
    search_s: float
    saturate_s: float
    extract_s: float
    compile_s: float
    report: RunReport
    verified: Comparison | None = None
    eclasses: int = 0

    @property
    def speedup_pct(self) -> float:
        return 100.0 * (self.original_us / self.best_us - 1.0)

    def to_dict(self) -> dict[str, Any]:
        rep = self.report
        return {
            "search": "eqsat", "model": self.model, "device": self.device, "original_us": self.original_us,
            "best_us": self.best_us, "speedup_pct": self.speedup_pct, "search_s": self.search_s,
            "greedy_us": self.greedy_us, "extract": self.extract, "gap": self.gap, "ilp_status": self.ilp_status,
            "compile_s": self.compile_s, "saturate_s": self.saturate_s, "extract_s": self.extract_s,
            "load_s": rep.load_s, "stop": rep.stop,
            "enodes": rep.enodes, "eclasses": self.eclasses, "rules_compiled": rep.rules_compiled,
            "multi_compiled": rep.multi_compiled, "egglog_rules": rep.egglog_rules, "rules_skipped": rep.rules_skipped,
            "iterations": [asdict(it) | {"matches": dict(sorted(it.matches.items(), key=lambda kv: -kv[1])[:15])}
                           for it in rep.iterations],
            "best_ops": self.best.op_count(),
            "verified": None if self.verified is None else asdict(self.verified),
        }


def _saturate(rules: Compiled, graph: Graph, limits: Limits,
              on_iteration: Any = None) -> tuple[EGraphView, list[str], RunReport, float]:
    runner = EGraphRunner(rules)
    roots = runner.insert(graph)
    t0 = time.perf_counter()
    report = runner.run(limits, on_iteration)
    return read_egraph(runner.egraph, runner.lang), roots, report, time.perf_counter() - t0


def _child(conn: Any, rules: Compiled, graph: Graph, limits: Limits) -> None:
    try:
        conn.send(("done", _saturate(rules, graph, limits, lambda it: conn.send(("iteration", it)))))
    except BaseException as exc:  # report, never hang the parent
        conn.send(("error", f"{type(exc).__name__}: {exc}"))


def saturate_isolated(rules: Compiled, graph: Graph, limits: Limits,
                      grace_s: float = 90.0) -> tuple[EGraphView, list[str], RunReport, float]:
    """Saturate in a child process that is killed if it overruns ``limits.seconds + grace_s``
    (the grace covers starting the process and loading the rules).

    egglog cannot interrupt an iteration, so one exploding iteration could run (and grow) without
    bound. On a kill the run is replayed here with only the iterations the child finished in time,
    which is deterministic (none finished: the input graph alone), and the report says so.
    """
    ctx = multiprocessing.get_context("spawn")  # fork would copy egglog's worker threads' locks
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(child, rules, graph, limits), daemon=True)
    proc.start()
    child.close()
    finished: list[Any] = []
    deadline = time.perf_counter() + limits.seconds + grace_s
    try:
        while True:
            left = deadline - time.perf_counter()
            if left <= 0 or not parent.poll(left):
                break
            kind, payload = parent.recv()
            if kind == "iteration":
                finished.append(payload)
            elif kind == "done":
                proc.join()
                return payload
            else:
                raise RuntimeError(f"saturation failed in the child process: {payload}")
    except EOFError:
        pass
    proc.kill()
    proc.join()
    replay = Limits(len(finished), limits.nodes, limits.seconds, limits.k_multi, limits.match_limit)
    view, roots, report, seconds = _saturate(rules, graph, replay)
    report.stop = f"hard time limit (iteration {len(finished)} overran; replayed {replay.iterations})"
    return view, roots, report, seconds


def optimize(graph: Graph, rules: Sequence[Rule], device: str | Device = "h100", limits: Limits = Limits(),
             extract: str = "ilp", ilp_seconds: float = 60.0, verify: bool = True, isolate: bool = True,
             hard_grace_s: float = 90.0, seed: int = 0, rewrite_constants: bool = False) -> Result:
    """Saturate ``graph`` with ``rules`` under ``limits``, extract the cheapest graph, verify it.

    With ``isolate`` the saturation runs in a child process with a hard timeout (see
    :func:`saturate_isolated`); ``seed`` picks the random inputs of the numerical check;
    ``rewrite_constants`` also rewrites weight-only subgraphs (off, as in the α search)."""
    device = get_device(device)
    model = RooflineCost(device)
    original = model.graph_time_us(graph)
    start = time.perf_counter()
    chosen = relevant_rules(rules, graph, rewrite_constants)
    compiled = compile_rules(chosen, multi=limits.k_multi > 0, rewrite_constants=rewrite_constants)
    compile_s = time.perf_counter() - start
    if isolate:
        view, roots_let, report, saturate_s = saturate_isolated(compiled, graph, limits, hard_grace_s)
    else:
        view, roots_let, report, saturate_s = _saturate(compiled, graph, limits)
    leaves = {n.attr("name"): n for n in graph.leaves()}
    t1 = time.perf_counter()
    roots = [view.lets[r] for r in roots_let]
    costs = node_costs(view, device, graph.dtype, leaves)
    choice = greedy_dag(view, costs, roots)
    greedy_us = selection_cost(view, costs, choice, roots)
    method, gap, status = "greedy", 0.0, "not run"
    removed: set[int] = set()
    if extract == "ilp":
        removed = filter_cycles(view, choice, roots, costs)
        ilp = ilp_extract(view, costs, roots, choice, upper=greedy_us, time_limit=ilp_seconds, removed=removed)
        if ilp is not None and ilp.cost <= greedy_us + 1e-9:
            choice, method, gap, status = ilp.choice, "ilp", ilp.gap, ilp.status
        else:
            status = "no better solution within the time limit" if ilp is None else "worse than greedy"
    best = to_graph(view, choice, roots, leaves, graph)
    best_us = model.graph_time_us(best)
    if best_us > original:
        best, best_us, method = graph, original, method + " (input kept: extraction was not better)"
    extract_s = time.perf_counter() - t1
    result = Result(graph.name, device.name, original, best_us, best, greedy_us, method, gap, status,
                    time.perf_counter() - start, saturate_s, extract_s, compile_s, report, eclasses=len(view.classes))
    if verify:
        result.verified = compare_graphs(graph, best, trials=1, seed=seed)
        if not result.verified.equal:
            raise AssertionError(f"e-graph optimization changed the graph's values: {result.verified.detail}")
    return result
