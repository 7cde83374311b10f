"""``eqsat-lab extract FILE.json``: run our extractors on an egraph-serialize e-graph."""
from __future__ import annotations

import argparse

from eqsat.egraph.ilp import ACYCLIC
from eqsat.egraph.limits import Limits
from eqsat.egraph.solvers import DEFAULT_SOLVER, SOLVERS
from experiments.command import Command, non_negative, number_in
from experiments.output import write_json


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="an egraph-serialize JSON file (nodes with op, children, eclass, cost; root_eclasses)")
    p.add_argument("--extractor", choices=("ilp", "greedy"), default="ilp", help="exact ILP (default) or DAG greedy")
    p.add_argument("--seconds", type=non_negative(float), default=60.0,
                   help="time limit of the whole extraction, greedy pass included (default 60; reading the file "
                        "is not counted)")
    p.add_argument("--solver", choices=tuple(SOLVERS), default=DEFAULT_SOLVER,
                   help=f"ILP solver (default {DEFAULT_SOLVER}; scip and cpsat: pip install '.[ilp]')")
    p.add_argument("--acyclic", choices=ACYCLIC, default="exact",
                   help="exact: e-class levels inside cycles, exact on the whole e-graph (default); filter: TENSAT's "
                        "cycle filter, then optimal only on what it keeps; lazy: cycle cuts added between solves")
    p.add_argument("--no-prune", dest="prune", action="store_false",
                   help="keep e-nodes that no term cheaper than the start can pick (default: drop them first)")
    p.add_argument("--memory-gb", type=number_in(float, 0, 1e6, above=True), default=Limits.memory_gb,
                   help="resident memory cap: past it the ILP stops and the greedy answer is kept, with the reason "
                        f"(default {Limits.memory_gb:g}, as optimize's)")
    p.add_argument("--json", dest="json_out", help="write the result (cost, gap, chosen node per e-class) here")


def _gap(gap: float | None) -> str:
    return "n/a" if gap is None else f"{gap:.2g}"


def run(args: argparse.Namespace) -> int:
    from eqsat.egraph.extract import NoTermError, extract
    from eqsat.egraph.ilp import ILPSettings
    from eqsat.egraph.serialize import read_json
    from eqsat.egraph.solvers import get_solver
    from eqsat.egraph.view import selection_cost

    get_solver(args.solver)  # a missing package is named before the file is read
    view, costs, roots = read_json(args.file)
    try:
        result = extract(view, costs, roots, args.extractor, args.seconds,
                         ILPSettings(solver=args.solver, acyclic=args.acyclic, prune=args.prune,
                                     memory_gb=args.memory_gb))
    except NoTermError as exc:
        raise NoTermError(f"{args.file}: {exc}") from None
    cost = selection_cost(view, costs, result.choice, roots)
    bound = "n/a" if result.bound is None else f"{result.bound:.6g}"
    print(f"{args.file}: {len(view.nodes)} e-nodes, {len(view.classes)} e-classes; {result.method} cost {cost:.6g} "
          f"(greedy {result.greedy_cost:.6g}, bound {bound}, gap {_gap(result.gap)}, {result.status}) "
          f"in {result.seconds:.2f} s")
    if result.stats:
        s = result.stats
        print(f"reduced to {s['enodes_after']} e-nodes in {s['eclasses_after']} e-classes "
              f"(from {s['enodes_before']} in {s['eclasses_before']} reachable)")
    if args.json_out:
        ids = {c: i for i, c in enumerate(view.classes)}
        write_json(args.json_out, {"file": args.file, "extractor": result.method, "cost": cost,
                                   "greedy_cost": result.greedy_cost, "gap": result.gap, "status": result.status,
                                   "bound": result.bound, "solver": args.solver, "acyclic": args.acyclic,
                                   "prune": args.prune,
                                   "reduction": result.stats, "first_incumbent_s": result.first_incumbent_s,
                                   "seconds": result.seconds, "enodes": len(view.nodes), "eclasses": len(view.classes),
                                   "choice": {str(ids[c]): i for c, i in result.choice.items()}})
    return 0


COMMAND = Command("extract", "extract the cheapest term from an egraph-serialize JSON e-graph", add_arguments, run,
                  output_args=("json_out",), input_args=("file",))
