"""``eqsat-lab experiment rulegen``: rule-generation time per world and graph size (target:
matrix k<=3 under 15 s).

Prints and writes one row per (world, k) with the time of every stage and the counts.
"""
from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from experiments.command import split_list
from experiments.output import write_table
from rulegen.generate import generate
from rulegen.world import WORLDS, get_world


def run(worlds: Sequence[str], max_k: int, workers: int, seed: int, out: Path) -> list[dict[str, Any]]:
    """One row per (world, k); writes ``bench_rulegen.csv``/``.json``."""
    rows = []
    print(f"{'world':7s} {'k':>2s} {'graphs':>9s} {'pairs':>9s} {'rules':>7s} {'enum s':>7s} {'prune s':>8s} "
          f"{'verify s':>9s} {'total s':>8s}")
    for name in worlds:
        world = get_world(name)
        for k in range(1, max_k + 1):
            start = time.perf_counter()
            rules, stats = generate(world, k, seed=seed, workers=workers)
            total = time.perf_counter() - start
            sec = stats.seconds
            print(f"{name:7s} {k:2d} {stats.graphs_total:9d} {stats.candidate_pairs:9d} {len(rules):7d} "
                  f"{sec['enumerate']:7.2f} {sec['prune']:8.2f} {sec['verify']:9.2f} {total:8.2f}", flush=True)
            flat = {k: v for k, v in stats.to_dict().items() if k not in ("seconds", "rejected_examples")}
            rows.append({**flat, **{f"{k}_s": round(v, 3) for k, v in sec.items()}, "total_s": round(total, 3),
                         "workers": workers})
    write_table(out, "bench_rulegen", rows, {"seed": seed})
    return rows


def main(args: argparse.Namespace) -> int:
    run(split_list(args.worlds) or list(WORLDS), args.max_k, args.workers, args.seed, Path(args.out))
    return 0
