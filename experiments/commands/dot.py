"""``eqsat-lab dot``: a benchmark graph as Graphviz DOT."""
from __future__ import annotations

import argparse

from eqsat.files import write_atomic
from experiments.command import Command, parse_params


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="benchmark name (see `eqsat-lab models`)")
    p.add_argument("--param", action="append", default=[], metavar="K=V", help="builder size parameter")
    p.add_argument("--out", help="write the DOT text here instead of stdout")


def run(args: argparse.Namespace) -> int:
    from eqsat.models import build

    text = build(args.model, **parse_params(args.param)).to_dot()
    if args.out:
        write_atomic(args.out, text + "\n")
    else:
        print(text)
    return 0


COMMAND = Command("dot", "Graphviz DOT of a benchmark graph", add_arguments, run, output_args=("out",))
