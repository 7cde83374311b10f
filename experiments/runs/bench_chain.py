"""Benchmark: a world's rules from scratch to k ops, one size at a time (issue: k <= 4 in 15 minutes).

    python -m experiments.runs.bench_chain [--world matrix] [--max-k 4] [--workers 2] [--out DIR]

k = 2 is generated TASO's way (every pair of a bucket) and minimized; each larger size is generated
against the minimized rules of all sizes before it (``rules generate --known``: only what they
cannot prove) and minimized against them (``rules minimize --known``). Prints each stage's rules
and seconds and the total; with ``--out``, writes ``k2.rules``, ``k2.min.rules``, ... and
``chain.json`` there. Peak memory is the process's (``ru_maxrss``).
"""
from __future__ import annotations

import argparse
import json
import resource
import time
from pathlib import Path

from eqsat.rules.rulefile import Rule, format_rules
from taso_baseline.generate import generate
from taso_baseline.minimize import minimize
from taso_baseline.world import get_world


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--world", default="matrix")
    ap.add_argument("--max-k", type=int, default=4)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    world = get_world(args.world)
    out = Path(args.out) if args.out else None
    if out:
        out.mkdir(parents=True, exist_ok=True)
    kept: list[Rule] = []
    rows = []
    start = time.perf_counter()
    for k in range(2, args.max_k + 1):
        t0 = time.perf_counter()
        rules, stats = generate(world, k, seed=args.seed, workers=args.workers, known=kept if k > 2 else None)
        gen_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        report = minimize(rules, known=kept)
        min_s = time.perf_counter() - t0
        kept = kept + list(report.kept)
        row = {"k": k, "generated": len(rules), "kept": len(report.kept), "generate_s": round(gen_s, 1),
               "minimize_s": round(min_s, 1), "pairs": stats.candidate_pairs,
               "pairs_left": stats.novelty["pairs_after"] if stats.novelty else stats.candidate_pairs}
        rows.append(row)
        print(f"k={k}: {row['pairs']} pairs, {row['pairs_left']} left, {len(rules)} rules in {gen_s:.1f} s; "
              f"minimized to {len(report.kept)} in {min_s:.1f} s", flush=True)
        if out:
            (out / f"k{k}.rules").write_text(format_rules(rules))
            (out / f"k{k}.min.rules").write_text(format_rules(report.kept))
    total = time.perf_counter() - start
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{args.world} to k={args.max_k}: {len(kept)} rules kept in {total:.1f} s, peak {peak_mb:.0f} MB")
    if out:
        (out / "chain.json").write_text(json.dumps({"world": args.world, "max_k": args.max_k, "stages": rows,
                                                    "total_s": round(total, 1), "kept": len(kept),
                                                    "peak_mb": round(peak_mb)}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
