"""``eqsat-lab tune [run|landscape|curves]``: auto-tune a matmul, describe its space, draw tuner curves."""
from __future__ import annotations

import argparse

from experiments.command import Command, count_list, number_in, positive_int, seed_int

ACTIONS = {"run": ("run_tune", "tune one shape"), "landscape": ("run_landscape", "the shape of the config space"),
           "curves": ("run_curves", "%% of optimum vs trials over seeds")}


def add_arguments(p: argparse.ArgumentParser) -> None:
    from autotune.registry import MEASURERS, TUNERS

    p.add_argument("action", nargs="?", choices=list(ACTIONS), default="run",
                   help="; ".join(f"{k}: {text}" for k, (_, text) in ACTIONS.items()) + " (default run)")
    p.add_argument("--shape", default="square", help="named shape (square, decode, wgrad, ...) or MxNxK[+relu]; "
                   "with --measurer tvm-llvm also bmmB:MxNxK or conv3x3:NxHxCxF")
    p.add_argument("--tuner", default="random",
                   help=f"one of {', '.join(TUNERS)}, or the bound oracle (curves: comma-separated)")
    p.add_argument("--trials", type=count_list, default="256",
                   help="measurement budget (curves: comma-separated checkpoints)")
    p.add_argument("--seed", type=seed_int, default=0, help="tuner and measurement-noise seed")
    p.add_argument("--seeds", type=positive_int, default=5, help="curves: seeds 0..N-1")
    p.add_argument("--shapes", default="square,prefill,decode,wgrad,ffn_down", help="curves: comma-separated shapes")
    p.add_argument("--measurer", choices=list(MEASURERS), default="hypogpu",
                   help="simulated GPU, a Python tile loop on this CPU, or real kernels compiled by TVM for this CPU "
                        "(tvm-llvm: the '.[tvm]' extra)")
    p.add_argument("--records", help="JSON-lines record file: every measurement is appended; an existing file resumes")
    p.add_argument("--reselect", type=number_in(int, 0, 10_000), default=0, metavar="K",
                   help="re-measure the K fastest configs 5 times each and re-select by the mean (winner's curse)")
    p.add_argument("--json", dest="json_out", help="write the result as JSON here")


def run(args: argparse.Namespace) -> int:
    from experiments.runs import tune

    return getattr(tune, ACTIONS[args.action][0])(args)


COMMAND = Command("tune", "auto-tune a matmul on HypoGPU (or this CPU); landscape and tuner curves", add_arguments, run,
                  output_args=("records", "json_out"))
