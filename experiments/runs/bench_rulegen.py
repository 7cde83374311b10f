"""Benchmark: rule-generation time per world and graph size (issue target: matrix k<=3 under 15 s).

    python -m experiments.runs.bench_rulegen [--max-k 3] [--workers 2] [--worlds matrix,conv] [--out DIR]

Prints one row per (world, k) with the time of every stage and the counts, and
writes ``bench_rulegen.json`` into ``--out`` when given.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from taso_baseline.generate import generate
from taso_baseline.world import get_world


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--worlds", default="matrix,conv")
    ap.add_argument("--max-k", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    rows = []
    print(f"{'world':7s} {'k':>2s} {'graphs':>9s} {'pairs':>9s} {'rules':>7s} {'enum s':>7s} {'prune s':>8s} "
          f"{'verify s':>9s} {'total s':>8s}")
    for name in args.worlds.split(","):
        for k in range(1, args.max_k + 1):
            start = time.perf_counter()
            rules, stats = generate(get_world(name), k, seed=args.seed, workers=args.workers)
            total = time.perf_counter() - start
            sec = stats.seconds
            print(f"{name:7s} {k:2d} {stats.graphs_total:9d} {stats.candidate_pairs:9d} {len(rules):7d} "
                  f"{sec['enumerate']:7.2f} {sec['prune']:8.2f} {sec['verify']:9.2f} {total:8.2f}", flush=True)
            rows.append({**stats.to_dict(), "total_s": round(total, 3), "workers": args.workers})
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "bench_rulegen.json").write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
