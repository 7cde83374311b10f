"""``eqsat-lab table``: the roofline cost of every benchmark graph on several devices."""
from __future__ import annotations

import argparse
from pathlib import Path

from eqsat.cost.devices import REFERENCE_DEVICES
from experiments.command import Command, device_help, device_list, progress, split_list


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--devices", type=device_list, default=",".join(REFERENCE_DEVICES),
                   help="comma-separated; " + device_help(",".join(REFERENCE_DEVICES)))
    p.add_argument("--models", default="", help="comma-separated model names (default: all)")
    p.add_argument("--out", help="folder for cost_table.csv / .json")


def run(args: argparse.Namespace) -> int:
    from experiments.cost_table import run as run_table

    run_table(split_list(args.models) or None, split_list(args.devices), Path(args.out) if args.out else None,
              progress=progress())
    return 0


COMMAND = Command("table", "cost table of the benchmark graphs on several devices", add_arguments, run,
                  folder_args=("out",))
