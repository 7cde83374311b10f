"""``eqsat-lab experiment NAME``: every experiment is an ``Experiment`` row of its own module.

``EXPERIMENT_MODULES`` lists the modules; each has ``EXPERIMENTS``, a tuple of rows. Adding an
experiment is adding a row (see the README's "Add an experiment").
"""
from __future__ import annotations

import argparse
import importlib

from experiments.command import Command, Experiment, add_subcommands, dispatched_by_subcommand

EXPERIMENT_MODULES = [
    "experiments.runs.budget",
    "experiments.runs.alpha",
    "experiments.runs.hardware",
    "experiments.runs.tuned_pricing",
    "experiments.runs.pet_searches",
    "experiments.runs.onnx_roundtrip",
    "experiments.runs.real",
    "experiments.runs.tuning",
    "experiments.runs.tuning_budget",
]


def experiments() -> list[Experiment]:
    """Every experiment row, in the order of ``EXPERIMENT_MODULES``."""
    return [row for m in EXPERIMENT_MODULES for row in importlib.import_module(m).EXPERIMENTS]


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_subcommands(p, experiments(), "experiment")


COMMAND = Command("experiment", "resumable experiments: " + ", ".join(e.name for e in experiments()),
                  add_arguments, dispatched_by_subcommand)
