"""``eqsat-lab extract FILE.json``: run our extractors on an egraph-serialize e-graph."""
from __future__ import annotations

import argparse

from ..command import Command, non_negative
from ..output import write_json


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="an egraph-serialize JSON file (nodes with op, children, eclass, cost; root_eclasses)")
    p.add_argument("--extractor", choices=("ilp", "greedy"), default="ilp", help="exact ILP (default) or DAG greedy")
    p.add_argument("--seconds", type=non_negative(float), default=60.0, help="ILP time limit (default 60)")
    p.add_argument("--json", dest="json_out", help="write the result (cost, gap, chosen node per e-class) here")


def run(args: argparse.Namespace) -> int:
    from eqsat.egraph.extract import extract, selection_cost
    from eqsat.egraph.serialize import read_json

    view, costs, roots = read_json(args.file)
    result = extract(view, costs, roots, args.extractor, args.seconds)
    cost = selection_cost(view, costs, result.choice, roots)
    print(f"{args.file}: {len(view.nodes)} e-nodes, {len(view.classes)} e-classes; {result.method} cost {cost:.6g} "
          f"(greedy {result.greedy_cost:.6g}, gap {result.gap:.2g}, {result.status}) in {result.seconds:.2f} s")
    if args.json_out:
        ids = {c: i for i, c in enumerate(view.classes)}
        write_json(args.json_out, {"file": args.file, "extractor": result.method, "cost": cost,
                                   "greedy_cost": result.greedy_cost, "gap": result.gap, "status": result.status,
                                   "seconds": result.seconds, "enodes": len(view.nodes), "eclasses": len(view.classes),
                                   "choice": {str(ids[c]): i for c, i in result.choice.items()}})
    return 0


COMMAND = Command("extract", "extract the cheapest term from an egraph-serialize JSON e-graph", add_arguments, run)
