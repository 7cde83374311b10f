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
    p.add_argument("--index", action="store_true",
                   help="print the Markdown index of docs/results/README.md, made from the experiment rows")
    add_subcommands(p, experiments(), "experiment", required=False)


def listing(rows: list[Experiment]) -> str:
    """One line per experiment: its name, its help, and the files it writes (from the row)."""
    width = max(len(r.name) for r in rows)
    return "\n".join(f"{r.name:{width}s}  {r.help}\n{'':{width}s}  writes: {', '.join(r.outputs)}" for r in rows)


INDEX_BEGIN = "<!-- index: made by `eqsat-lab experiment --index` from the experiment rows; do not edit -->"
INDEX_END = "<!-- end of the index -->"


def _link(doc: str) -> str:
    """A row's ``doc`` as a link from docs/results/README.md (an anchor of that page stays an anchor)."""
    return doc.removeprefix("README.md") if doc.startswith("README.md#") else doc


def index(rows: list[Experiment]) -> str:
    """The results index: per experiment row, its page, its command, what it shows and the files it
    writes, between the markers ``docs/results/README.md`` holds it in (a test compares the two), so a
    new row cannot be missing from the docs."""
    lines = [INDEX_BEGIN, "", "| experiment | command | what it shows | files it writes into `--out` |",
             "|---|---|---|---|"]
    for r in rows:
        name = f"[{r.name}]({_link(r.doc)})" if r.doc else r.name
        files = ", ".join(f"`{o}`" for o in r.outputs)
        lines.append(f"| {name} | `eqsat-lab experiment {r.name}` | {r.help.replace('|', '/')} | {files} |")
    return "\n".join([*lines, "", INDEX_END])


def run(args: argparse.Namespace) -> int:
    """``--list`` or ``--index``, or (with no experiment named) a user error saying how to name one."""
    if args.index:
        print(index(experiments()))
        return 0
    if not args.list:
        raise ValueError("experiment: name one (eqsat-lab experiment --list prints them)")
    print(listing(experiments()))
    return 0


COMMAND = Command("experiment", "experiments and benchmarks (--list: each with its output files): "
                  + ", ".join(e.name for e in experiments()), add_arguments, run)
