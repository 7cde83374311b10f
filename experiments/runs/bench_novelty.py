"""Benchmark: how far the incremental generator's e-graph step gets at a graph size (issue: k = 4).

    python -m experiments.runs.bench_novelty [--world matrix] [--max-ops 4] [--known matrix-min] [--full]
                                        [--step root|egraph] [--workers 2]

Enumerates the world, buckets it, puts every smaller term into one e-graph with the known rules,
runs them, and names the graphs of the largest size by op and argument e-classes
(:func:`taso_baseline.novelty.name_largest`); prints the counts, each stage's seconds and the peak
memory. ``--full`` goes on to the second step and the pairs left (:func:`novel_groups`): the known
rules at the roots in Python (``root``, the default) or the names back in egglog (``egraph``).
"""
from __future__ import annotations

import argparse
import resource
import time

from eqsat.rules.rulesets import default_rules
from taso_baseline.enumerate import enumerate_graphs
from taso_baseline.fingerprint import buckets
from taso_baseline.novelty import NoveltySettings, name_largest, novel_groups
from taso_baseline.world import get_world


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--world", default="matrix")
    ap.add_argument("--max-ops", type=int, default=4)
    ap.add_argument("--known", help="known rule set (default: WORLD-min)")
    ap.add_argument("--full", action="store_true", help="also run the second step")
    ap.add_argument("--step", choices=("root", "egraph"), default="root", help="the second step")
    ap.add_argument("--workers", type=int, default=1, help="processes of the root step")
    args = ap.parse_args(argv)
    world = get_world(args.world)
    known = default_rules([args.known or f"{args.world}-min"])
    t0 = time.perf_counter()
    en = enumerate_graphs(world, args.max_ops)
    groups = buckets(en)
    print(f"enumerate + fingerprint {time.perf_counter() - t0:.1f} s: graphs per size {en.counts()}, "
          f"{len(groups)} buckets", flush=True)
    if args.full:
        found = novel_groups(en, groups, known, args.max_ops, NoveltySettings(step=args.step, workers=args.workers))
        print(f"{found.buckets_in} buckets, {found.names} names, {found.enodes} e-nodes: {found.pairs_before} pairs "
              f"-> {found.pairs_after}; seconds {found.seconds}")
    else:
        naming = name_largest(en, groups, known, args.max_ops)
        kinds = len(set(naming.classes.values()))
        print(f"{len(naming.chosen)} buckets hold a {args.max_ops}-op graph; {len(naming.classes)} smaller terms in "
              f"{kinds} e-classes, {naming.runner.size()} e-nodes; {len(naming.name_of)} {args.max_ops}-op graphs, "
              f"{len(naming.named)} names; seconds {naming.seconds}")
    print(f"peak memory {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
