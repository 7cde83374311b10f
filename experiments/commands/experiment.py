"""``eqsat-lab experiment NAME``: every experiment is an ``Experiment`` row of its own module.

``EXPERIMENT_MODULES`` lists the modules; each has ``EXPERIMENTS``, a tuple of rows. Adding an
experiment is adding a row (see the README's "Add an experiment").
"""
from __future__ import annotations

import argparse
import importlib

from experiments.command import Command, Experiment, add_subcommands

EXPERIMENT_MODULES = [
    "experiments.runs.budget",
    "experiments.runs.alpha",
    "experiments.runs.case_studies",
    "experiments.runs.hardware",
    "experiments.runs.tuned_pricing",
    "experiments.runs.pet_searches",
    "experiments.runs.onnx_roundtrip",
    "experiments.runs.onnx_suite",
    "experiments.runs.real",
    "experiments.runs.tuning",
    "experiments.runs.tuning_budget",
    "experiments.runs.tvm_llvm",
    "experiments.runs.benchmarks",
    "experiments.runs.zoo",
    "experiments.runs.zoo_runtime",
    "experiments.runs.ort_fusions",
    "experiments.runs.attention_ceiling",
    "experiments.runs.gpu_check",
    "experiments.runs.pytorch",
    "experiments.runs.peers",
]


def experiments() -> list[Experiment]:
    """Every experiment row, in the order of ``EXPERIMENT_MODULES``."""
    return [row for m in EXPERIMENT_MODULES for row in importlib.import_module(m).EXPERIMENTS]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--list", action="store_true", help="print every experiment and the files it writes into --out")
    add_subcommands(p, experiments(), "experiment", required=False)


def listing(rows: list[Experiment]) -> str:
    """One line per experiment: its name, its help, and the files it writes (from the row)."""
    width = max(len(r.name) for r in rows)
    return "\n".join(f"{r.name:{width}s}  {r.help}\n{'':{width}s}  writes: {', '.join(r.outputs)}" for r in rows)


def run(args: argparse.Namespace) -> int:
    """``--list``, or (with no experiment named) a user error saying how to name one."""
    if not args.list:
        raise ValueError("experiment: name one (eqsat-lab experiment --list prints them)")
    print(listing(experiments()))
    return 0


COMMAND = Command("experiment", "experiments and benchmarks (--list: each with its output files): "
                  + ", ".join(e.name for e in experiments()), add_arguments, run)
