"""``eqsat-lab pet demo|verify|optimize``: partially-equivalent transformations."""
from __future__ import annotations

import argparse

from experiments.command import (
    Command,
    add_device,
    add_subcommands,
    dispatched_by_subcommand,
    number_in,
    positive_int,
    seed_int,
)

SIZE = number_in(int, 1, 4096)  # a conv dimension: the demo builds dense tensors of it


def _add_problem(p: argparse.ArgumentParser) -> None:
    for dim, default in (("N", 2), ("C", 3), ("O", 4), ("H", 6), ("W", 8)):
        p.add_argument(f"--{dim}", type=SIZE, default=default, help=f"conv size {dim} (default {default})")
    p.add_argument("--stride", type=SIZE, default=1)
    p.add_argument("--pad", type=number_in(int, 0, 4096), default=1)
    p.add_argument("--dilation", type=SIZE, default=1)
    p.add_argument("--axis", choices=("H", "W"), default="W", help="the split axis")
    p.add_argument("--parts", type=number_in(int, 2, 4096), default=2, help="parts of the split")
    p.add_argument("--seed", type=seed_int, default=0)
    p.add_argument("--json", dest="json_out", help="write the result as JSON here")


def _add_demo(p: argparse.ArgumentParser) -> None:
    _add_problem(p)
    p.add_argument("--tests", type=number_in(int, 1, 1000), default=3, help="random tests per checked position (t)")
    p.add_argument("--prime", type=number_in(int, 2, 2**62), default=2**31 - 1)


def _add_verify(p: argparse.ArgumentParser) -> None:
    _add_problem(p)
    p.add_argument("--trials", type=positive_int, default=3000)


def _add_optimize(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", choices=("resnet18_last", "csrnet_backend"))
    add_device(p)
    p.add_argument("--batch", type=SIZE, default=16)
    p.add_argument("--beam", type=positive_int, default=4, help="beam width")
    p.add_argument("--depth", type=positive_int, help="layers transformed at most (default: all)")
    p.add_argument("--candidates", type=positive_int, default=8, help="transformations tried per layer")
    p.add_argument("--json", dest="json_out", help="write the result as JSON here")
    p.add_argument("--measure", action="store_true",
                   help="also time every option end to end in onnxruntime on this CPU")


def _lazy(name: str):
    def go(args: argparse.Namespace) -> int:
        from experiments.runs import pet_demo

        return getattr(pet_demo, name)(args)
    return go


ACTIONS = (
    Command("demo", "the split-to-batch example as a region table, with the correction", _add_demo, _lazy("run_demo"),
            output_args=("json_out",)),
    Command("verify", "false-pass rates of random tests with small primes against n/p", _add_verify,
            _lazy("run_verify"), output_args=("json_out",)),
    Command("optimize", "beam search over which convs to transform, on a roofline or measured cost", _add_optimize,
            _lazy("run_optimize"), output_args=("json_out",)),
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_subcommands(p, ACTIONS, "pet_cmd")


COMMAND = Command("pet", "partially-equivalent transformations: region table, verification, correction, optimizer",
                  add_arguments, dispatched_by_subcommand)
