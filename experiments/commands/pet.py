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


PET_NETWORKS = ("resnet18_last", "csrnet_backend")


def _add_optimize(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help=f"PET's layer lists ({', '.join(PET_NETWORKS)}), a benchmark graph (see "
                                 "`eqsat-lab models`) or an .onnx file; the last two run as `optimize --search pet`")
    add_device(p)
    p.add_argument("--batch", type=SIZE, default=16, help="batch of PET's layer lists")
    p.add_argument("--beam", type=positive_int, default=4, help="beam width")
    p.add_argument("--depth", type=positive_int, help="layers transformed at most (default: all)")
    p.add_argument("--candidates", type=positive_int, default=8, help="transformations tried per layer")
    p.add_argument("--out", help="onnx: where to write the optimized model (checked with onnxruntime)")
    p.add_argument("--seed", type=seed_int, default=0, help="seed of the final numerical check")
    p.add_argument("--json", dest="json_out", help="write the result as JSON here")
    p.add_argument("--measure", action="store_true",
                   help="PET's layer lists: also time every option end to end in onnxruntime on this CPU")


def _optimize(args: argparse.Namespace) -> int:
    """PET's layer lists on PET's own report; any other model through ``optimize --search pet``."""
    if args.model in PET_NETWORKS:
        return _lazy("run_optimize")(args)
    from experiments.commands import optimize
    from experiments.searches import PET

    parser = argparse.ArgumentParser(prog="eqsat-lab pet optimize")
    optimize.add_arguments(parser)
    argv = [args.model, "--search", PET, "--device", args.device, "--beam", str(args.beam),
            "--candidates", str(args.candidates), "--seed", str(args.seed)]
    argv += ["--depth", str(args.depth)] * (args.depth is not None) + ["--out", args.out] * bool(args.out)
    argv += ["--json", args.json_out] * bool(args.json_out)
    return optimize.run(parser.parse_args(argv))


def _lazy(name: str):
    def go(args: argparse.Namespace) -> int:
        from experiments import pet_demo

        return getattr(pet_demo, name)(args)
    return go


ACTIONS = (
    Command("demo", "the split-to-batch example as a region table, with the correction", _add_demo, _lazy("run_demo"),
            output_args=("json_out",)),
    Command("verify", "false-pass rates of random tests with small primes against n/p", _add_verify,
            _lazy("run_verify"), output_args=("json_out",)),
    Command("optimize", "beam search over which convs to transform (PET's layer lists, any benchmark graph or "
            "ONNX file), on a roofline, tuned or measured cost", _add_optimize, _optimize,
            output_args=("json_out", "out"), input_args=("model",)),
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_subcommands(p, ACTIONS, "pet_cmd")


COMMAND = Command("pet", "partially-equivalent transformations: region table, verification, correction, optimizer",
                  add_arguments, dispatched_by_subcommand)
