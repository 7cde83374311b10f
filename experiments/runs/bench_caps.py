"""Benchmark: do the e-graph's node and time caps hold? (issue target: within 10%).

    python -m experiments.runs.bench_caps [--models a,b] [--nodes 1000,4000] [--seconds 1,5] [--k-multi 2] [--out DIR]

Runs equality saturation on each benchmark model once per node cap (time cap off) and once per
time cap (node cap off), with multi-pattern rules in ``--k-multi`` iterations so the e-graphs
grow fast, and reports the e-nodes and saturation seconds each run ended with, and how far
past its cap that is (``overshoot``: 0.05 is 5% over; a run that saturated under its cap has
no overshoot). Writes ``bench_caps.csv``/``.json`` into ``--out`` when given.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from eqsat.cost.select import cost_model
from eqsat.egraph import EGraphSearch
from eqsat.egraph.limits import Limits
from eqsat.models import build
from eqsat.rules.rulesets import default_rules
from experiments.output import write_table

MODELS = ("resnet_block", "qkv", "lora", "bert", "nasrnn", "resnext50", "nasnet_a", "inception_v3",
          "squeezenet", "vgg19")
UNCAPPED_NODES, UNCAPPED_SECONDS = 10**9, 3600.0


def run_one(model: str, nodes: int, seconds: float, k_multi: int) -> dict:
    search = EGraphSearch()
    limits = Limits(iterations=100, nodes=nodes, seconds=seconds, k_multi=k_multi, extract="greedy")
    result = search.run(build(model), default_rules(search.default_rule_sets), cost_model("h100"), limits)
    enodes, took = result.work.enodes, result.timings["saturate"]
    capped_nodes = nodes < UNCAPPED_NODES
    over = (enodes / nodes - 1) if capped_nodes else (took / seconds - 1)
    return {"model": model, "cap": "nodes" if capped_nodes else "seconds",
            "limit": nodes if capped_nodes else seconds, "enodes": enodes, "saturate_s": round(took, 3),
            "stop": result.stop, "overshoot": round(max(over, 0.0), 4)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--nodes", default="1000,4000", help="node caps to try (time cap off)")
    ap.add_argument("--seconds", default="1,5", help="time caps to try (node cap off)")
    ap.add_argument("--k-multi", type=int, default=2)
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    rows = []
    runs = [(n, UNCAPPED_SECONDS) for n in map(int, filter(None, args.nodes.split(",")))]
    runs += [(UNCAPPED_NODES, s) for s in map(float, filter(None, args.seconds.split(",")))]
    for model in args.models.split(","):
        for nodes, seconds in runs:
            row = run_one(model, nodes, seconds, args.k_multi)
            rows.append(row)
            print(f"{model:13s} {row['cap']:7s} {row['limit']:>8} -> {row['enodes']:7d} e-nodes "
                  f"{row['saturate_s']:7.2f} s  overshoot {row['overshoot']:6.1%}  {row['stop']}", flush=True)
    worst = max((r["overshoot"] for r in rows), default=0.0)
    print(f"worst overshoot: {worst:.1%} over {len(rows)} runs")
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        write_table(Path(args.out), "bench_caps", rows, {"k_multi": args.k_multi, "worst_overshoot": worst})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
