"""``eqsat-lab models``: the benchmark graphs and their size parameters."""
from __future__ import annotations

import argparse

from experiments.command import Command


def add_arguments(p: argparse.ArgumentParser) -> None:
    pass


def run(args: argparse.Namespace) -> int:
    from eqsat.models import MODELS, build, model_params

    for name in MODELS:
        g = build(name)
        params = ", ".join(f"{k}={v}" for k, v in model_params(name).items())
        print(f"{name:14s} {g.op_count():5d} ops  ({params})")
    return 0


COMMAND = Command("models", "list the benchmark graphs and their size parameters", add_arguments, run)
