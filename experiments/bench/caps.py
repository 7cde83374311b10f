"""``eqsat-lab experiment caps``: do the e-graph's node and time caps hold? (target: within 10%).

Runs equality saturation on each benchmark model once per node cap (time cap off) and once per
time cap (node cap off), with multi-pattern rules in ``--k-multi`` iterations so the e-graphs
grow fast, and reports the e-nodes and saturation seconds each run ended with, and how far
past its cap that is (``overshoot``: 0.05 is 5% over; a run that saturated under its cap has
no overshoot).
"""
from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from eqsat.cost.devices import DEFAULT_DEVICE
from eqsat.cost.registry import cost_model
from eqsat.egraph.limits import Limits
from eqsat.models import build
from eqsat.rules.rulesets import default_rules
from experiments.command import split_list
from experiments.compare import COMPARE_MODELS as MODELS
from experiments.compare import check_models
from experiments.output import write_table
from experiments.searches import EGRAPH, get_search

UNCAPPED_NODES, UNCAPPED_SECONDS = 10**9, 3600.0


def run_one(model: str, nodes: int, seconds: float, k_multi: int) -> dict[str, Any]:
    search = get_search(EGRAPH)
    limits = Limits(iterations=100, nodes=nodes, seconds=seconds, k_multi=k_multi, extract="greedy")
    result = search.run(build(model), default_rules(search.default_rule_sets), cost_model(DEFAULT_DEVICE), limits)
    enodes, took = result.work.enodes, result.timings["saturate"]
    capped_nodes = nodes < UNCAPPED_NODES
    over = (enodes / nodes - 1) if capped_nodes else (took / seconds - 1)
    return {"model": model, "cap": "nodes" if capped_nodes else "seconds",
            "limit": nodes if capped_nodes else seconds, "enodes": enodes, "saturate_s": round(took, 3),
            "stop": result.stop, "overshoot": round(max(over, 0.0), 4)}


def run(models: Sequence[str], nodes: Sequence[int], seconds: Sequence[float], k_multi: int,
        out: Path) -> list[dict[str, Any]]:
    """Every model once per node cap and once per time cap; writes ``bench_caps.csv``/``.json``."""
    runs = [(n, UNCAPPED_SECONDS) for n in nodes] + [(UNCAPPED_NODES, s) for s in seconds]
    rows = []
    for model in check_models(models):
        for n, s in runs:
            row = run_one(model, n, s, k_multi)
            rows.append(row)
            print(f"{model:13s} {row['cap']:7s} {row['limit']:>8} -> {row['enodes']:7d} e-nodes "
                  f"{row['saturate_s']:7.2f} s  overshoot {row['overshoot']:6.1%}  {row['stop']}", flush=True)
    worst = max((r["overshoot"] for r in rows), default=0.0)
    print(f"worst overshoot: {worst:.1%} over {len(rows)} runs")
    write_table(out, "bench_caps", rows, {"k_multi": k_multi, "worst_overshoot": worst})
    return rows


def main(args: argparse.Namespace) -> int:
    run(split_list(args.models) or MODELS, [int(n) for n in split_list(args.nodes)],
        [float(s) for s in split_list(args.seconds)], args.k_multi, Path(args.out))
    return 0
