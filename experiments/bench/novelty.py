"""``eqsat-lab experiment novelty``: how far the incremental generator's e-graph step gets at a
graph size (target: k = 4).

Enumerates the world, buckets it, puts every smaller term into one e-graph with the known rules,
runs them, and names the graphs of the largest size by op and argument e-classes
(:func:`rulegen.novelty.name_largest`); reports the counts, each stage's seconds and the peak
memory. ``--full`` goes on to the second step and the pairs left (:func:`novel_groups`): the known
rules at the roots in Python (``root``, the default) or the names back in egglog (``egraph``).
"""
from __future__ import annotations

import argparse
import resource
import time
from pathlib import Path
from typing import Any

from eqsat.rules.rulesets import default_rules
from experiments.output import write_json
from rulegen.enumerate import enumerate_graphs
from rulegen.fingerprint import buckets
from rulegen.novelty import NoveltySettings, name_largest, novel_groups
from rulegen.world import get_world


def run(world_name: str, max_ops: int, known_set: str | None, full: bool, step: str, workers: int,
        out: Path) -> dict[str, Any]:
    """The counts and seconds of one run; writes ``novelty.json``."""
    world = get_world(world_name)
    known = default_rules([known_set or f"{world_name}-min"])
    t0 = time.perf_counter()
    en = enumerate_graphs(world, max_ops)
    groups = buckets(en)
    report: dict[str, Any] = {"world": world_name, "max_ops": max_ops, "known": known_set or f"{world_name}-min",
                              "graphs_per_size": list(en.counts()), "buckets": len(groups),
                              "enumerate_s": round(time.perf_counter() - t0, 3)}
    print(f"enumerate + fingerprint {report['enumerate_s']:.1f} s: graphs per size {en.counts()}, "
          f"{len(groups)} buckets", flush=True)
    if full:
        found = novel_groups(en, groups, known, max_ops, NoveltySettings(step=step, workers=workers))
        report |= {"step": step, "buckets_in": found.buckets_in, "names": found.names, "enodes": found.enodes,
                   "pairs_before": found.pairs_before, "pairs_after": found.pairs_after, "seconds": found.seconds}
        print(f"{found.buckets_in} buckets, {found.names} names, {found.enodes} e-nodes: {found.pairs_before} pairs "
              f"-> {found.pairs_after}; seconds {found.seconds}")
    else:
        naming = name_largest(en, groups, known, max_ops)
        report |= {"chosen_buckets": len(naming.chosen), "smaller_terms": len(naming.classes),
                   "eclasses": len(set(naming.classes.values())), "enodes": naming.runner.size(),
                   "largest_graphs": len(naming.name_of), "names": len(naming.named), "seconds": naming.seconds}
        print(f"{report['chosen_buckets']} buckets hold a {max_ops}-op graph; {report['smaller_terms']} smaller terms "
              f"in {report['eclasses']} e-classes, {report['enodes']} e-nodes; {report['largest_graphs']} "
              f"{max_ops}-op graphs, {report['names']} names; seconds {naming.seconds}")
    report["peak_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    print(f"peak memory {report['peak_mb']} MB")
    write_json(out / "novelty.json", report)
    return report


def main(args: argparse.Namespace) -> int:
    run(args.world, args.max_ops, args.known, args.full, args.step, args.workers, Path(args.out))
    return 0
