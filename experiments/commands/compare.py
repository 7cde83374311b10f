"""``eqsat-lab compare``: the main job, both searches on the benchmark suite."""
from __future__ import annotations

import argparse
from pathlib import Path

from experiments.command import Command, add_models, add_sweep_options, split_list, sweep_kwargs
from experiments.searches import add_alpha_preset


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_models(p, "the case studies and TENSAT's suite")
    p.add_argument("--quick", action="store_true", help="smoke test: two small models, tiny budgets")
    p.add_argument("--rules", nargs="+", metavar="SET_OR_FILE",
                   help="shipped rule sets or rule files both searches read in the second table (default: the "
                        "e-graph's own, the minimized sets); the first table is always each search on its own")
    add_alpha_preset(p)
    add_sweep_options(p, "results/compare")


def run(args: argparse.Namespace) -> int:
    from experiments.compare import run as run_compare

    run_compare(split_list(args.models) or None, args.device, Path(args.out), quick=args.quick, seed=args.seed,
                rules=tuple(args.rules) if args.rules else None, preset=args.preset, **sweep_kwargs(args))
    return 0


COMMAND = Command("compare", "the main job: TENSAT-style e-graph vs TASO-style α search on the benchmark suite, "
                  "each on its own rules and both on the same rules",
                  add_arguments, run, folder_args=("out",))
