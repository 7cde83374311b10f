"""``eqsat-lab experiment chain``: a world's rules from scratch to k ops, one size at a time
(target: k <= 4 in 15 minutes).

k = 2 is generated TASO's way (every pair of a bucket) and minimized; each larger size is generated
against the minimized rules of all sizes before it (``rules generate --known``: only what they
cannot prove) and minimized against them (``rules minimize --known``). Prints each stage's rules
and seconds and the total, and writes each stage's rules and the table. Peak memory is the
process's (``ru_maxrss``).
"""
from __future__ import annotations

import argparse
import resource
import time
from pathlib import Path
from typing import Any

from eqsat.files import write_atomic
from eqsat.rules.rulefile import Rule, format_rules
from experiments.output import write_table
from rulegen.generate import generate
from rulegen.minimize import minimize
from rulegen.world import get_world


def run(world_name: str, max_k: int, workers: int, seed: int, out: Path) -> list[dict[str, Any]]:
    """Each size's stage; writes ``k<K>.rules``, ``k<K>.min.rules`` and ``chain.csv``/``.json``."""
    world = get_world(world_name)
    kept: list[Rule] = []
    rows = []
    start = time.perf_counter()
    for k in range(2, max_k + 1):
        t0 = time.perf_counter()
        rules, stats = generate(world, k, seed=seed, workers=workers, known=kept if k > 2 else None)
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
        write_atomic(out / f"k{k}.rules", format_rules(rules))
        write_atomic(out / f"k{k}.min.rules", format_rules(report.kept))
    total = time.perf_counter() - start
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{world_name} to k={max_k}: {len(kept)} rules kept in {total:.1f} s, peak {peak_mb:.0f} MB")
    write_table(out, "chain", rows, {"world": world_name, "max_k": max_k, "total_s": round(total, 1),
                                     "kept": len(kept), "peak_mb": round(peak_mb)})
    return rows


def main(args: argparse.Namespace) -> int:
    run(args.world, args.max_k, args.workers, args.seed, Path(args.out))
    return 0
