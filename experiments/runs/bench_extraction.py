"""Benchmark: extraction on large e-graphs (issue targets: gap 0 within 60 s at 20k-60k e-nodes).

    python -m experiments.runs.bench_extraction FILE.json... [--seconds 60] [--solvers highs,scip,cpsat] [--out DIR]

Each FILE is an egraph-serialize e-graph, as ``eqsat-lab optimize MODEL --search eqsat
--dump-egraph FILE`` writes it (e.g. ``bert --nodes 50000 --k-multi 2``). Per file, one row per
extractor: the tree-cost greedy pass (each e-class's cost counts its children's again, as
extraction-gym's bottom-up); the DAG greedy pass (shared e-classes once, the ILP's start); the
ILP as it was before the problem reduction and the warm start (``BASELINE``: scipy's HiGHS, cold,
greedy cost as a constraint, TENSAT's cycle filter); HiGHS warm-started behind the cycle filter
(``FILTERED``: optimal only on what the filter keeps); and the exact ILP (e-class levels, optimal
on the whole e-graph) on each solver asked for. A row gives the cost, the proved bound and gap,
the seconds, the seconds until the first feasible answer, and the e-nodes left after reduction.
Writes ``bench_extraction.json`` and ``.csv`` into ``--out`` when given.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

from eqsat.egraph.extract import greedy_dag
from eqsat.egraph.ilp import BASELINE, FILTERED, ILPSettings, ilp_extract
from eqsat.egraph.serialize import read_json
from eqsat.egraph.solvers import SOLVERS, available
from eqsat.egraph.view import selection_cost
from experiments.output import write_table


def bench_file(path: str, seconds: float, solvers: list[str]) -> list[dict]:
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
    runs = [("ilp-baseline", BASELINE), ("ilp-filter-highs", FILTERED)] + [
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+", help="egraph-serialize JSON files")
    ap.add_argument("--seconds", type=float, default=60.0, help="time limit of each ILP run")
    ap.add_argument("--solvers", default="highs,scip,cpsat", help=f"comma-separated, of {', '.join(SOLVERS)}")
    ap.add_argument("--out", help="write bench_extraction.json/.csv here")
    args = ap.parse_args(argv)
    rows = []
    for path in args.files:
        print(path, flush=True)
        rows += bench_file(path, args.seconds, [s for s in args.solvers.split(",") if s])
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        write_table(Path(args.out), "bench_extraction", rows, {"seconds": args.seconds})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
