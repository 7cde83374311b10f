"""``eqsat-lab experiment extraction FILE.json...``: extraction on large e-graphs (target: gap 0
within 60 s at 20k-60k e-nodes).

Each FILE is an egraph-serialize e-graph, as ``eqsat-lab optimize MODEL --search eqsat
--dump-egraph FILE`` writes it (e.g. ``bert --nodes 50000 --k-multi 2``). Per file, one row per
extractor: the tree-cost greedy pass (each e-class's cost counts its children's again, as
extraction-gym's bottom-up); the DAG greedy pass (shared e-classes once, the ILP's start); the
ILP as it was before the problem reduction and the warm start (``BASELINE``: scipy's HiGHS, cold,
greedy cost as a constraint, TENSAT's cycle filter); HiGHS warm-started behind the cycle filter
(``FILTERED``: optimal only on what the filter keeps); HiGHS with lazy cycle cuts; the exact ILP
without the bound pruning (``prune.py``); and the exact ILP (e-class levels, optimal on the whole
e-graph, pruned) on each solver asked for. A row gives the cost, the proved bound and gap,
the seconds, the seconds until the first feasible answer, and the e-nodes left after reduction.
"""
from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from eqsat.egraph.extract import greedy_dag
from eqsat.egraph.ilp import BASELINE, FILTERED, ILPSettings, ilp_extract
from eqsat.egraph.serialize import read_json
from eqsat.egraph.solvers import SOLVERS, available
from eqsat.egraph.view import selection_cost
from experiments.command import split_list
from experiments.output import write_table


def bench_file(path: str, seconds: float, solvers: list[str]) -> list[dict[str, Any]]:
    view, costs, roots = read_json(path)
    size = {"file": Path(path).name, "enodes": len(view.nodes), "eclasses": len(view.classes)}
    rows = []
    for name, deadline in (("greedy-tree", 0.0), ("greedy-dag", None)):
        began = time.perf_counter()
        greedy = greedy_dag(view, costs, roots, deadline)
        greedy_cost = selection_cost(view, costs, greedy, roots)
        greedy_s = time.perf_counter() - began
        rows.append(size | {"extractor": name, "cost": greedy_cost, "bound": None, "gap": None, "optimal": False,
                            "seconds": greedy_s, "first_incumbent_s": greedy_s, "enodes_after": None, "status": "-"})
    runs = [("ilp-baseline", BASELINE), ("ilp-filter-highs", FILTERED), ("ilp-lazy-highs", ILPSettings(acyclic="lazy")),
            ("ilp-exact-highs-unpruned", ILPSettings(prune=False))] + [
        (f"ilp-exact-{s}", ILPSettings(solver=s)) for s in solvers]
    for name, settings in runs:
        if not available(settings.solver):
            print(f"  {name}: skipped ({SOLVERS[settings.solver].package} is not installed)")
            continue
        began = time.perf_counter()
        res = ilp_extract(view, costs, roots, greedy, greedy_cost, settings, seconds)
        took = time.perf_counter() - began + greedy_s  # every ILP starts from the greedy pass
        if res is None:
            rows.append(size | {"extractor": name, "cost": None, "bound": None, "gap": None, "optimal": False,
                                "seconds": took, "first_incumbent_s": None, "enodes_after": None,
                                "status": "no solution"})
        else:
            first = None if res.first_incumbent_s is None else res.first_incumbent_s + greedy_s
            rows.append(size | {"extractor": name, "cost": res.cost, "bound": res.bound, "gap": res.gap,
                                "optimal": res.optimal, "seconds": took, "first_incumbent_s": first,
                                "enodes_after": res.stats["enodes_after"], "status": res.status})
    for r in rows:
        gap = "-" if r["gap"] is None else f"{r['gap']:.2%}"
        cost = "-" if r["cost"] is None else f"{r['cost']:.4f}"
        first = "-" if r["first_incumbent_s"] is None else f"{r['first_incumbent_s']:.2f}"
        print(f"  {r['extractor']:13s} cost {cost:>11s}  gap {gap:>7s}  {r['seconds']:7.2f} s  "
              f"first {first:>6s} s  {r['status']}", flush=True)
    return rows


def run(files: Sequence[str], seconds: float, solvers: Sequence[str], out: Path) -> list[dict[str, Any]]:
    """Every extractor on every file; writes ``bench_extraction.csv``/``.json``."""
    unknown = [s for s in solvers if s not in SOLVERS]
    if unknown:
        raise ValueError(f"--solvers: unknown solver(s) {', '.join(unknown)}; choose from {', '.join(SOLVERS)}")
    rows = []
    for path in files:
        print(path, flush=True)
        rows += bench_file(path, seconds, list(solvers))
    write_table(out, "bench_extraction", rows, {"seconds": seconds})
    return rows


def main(args: argparse.Namespace) -> int:
    run(args.files, args.seconds, split_list(args.solvers) or list(SOLVERS), Path(args.out))
    return 0
