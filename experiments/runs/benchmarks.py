"""The benchmarks as experiment rows: ``eqsat-lab experiment caps|chain|extraction|fuzz|novelty|
rulegen|soundness|walltime``.

Each row's code is its own module of :mod:`experiments.bench`; the row names it with :func:`lazy`, because the
CLI reads every row to build its parser and those modules import the rule generator, the
verifier and the ILP solvers, which would slow the start of every ``eqsat-lab`` command. The
options and the output files are here, as data.
"""
from __future__ import annotations

import argparse

from eqsat.cost.devices import DEFAULT_DEVICE
from experiments.command import (
    MAX_COUNT,
    MAX_SECONDS,
    Experiment,
    device_arg,
    lazy,
    list_of,
    non_negative,
    number_in,
    positive_int,
    positive_seconds,
    seconds,
    seed_int,
)
from experiments.searches import EGRAPH


def _out(p: argparse.ArgumentParser, name: str) -> None:
    p.add_argument("--out", default=f"results/{name}", help=f"output folder (default results/{name})")


def _caps(p: argparse.ArgumentParser) -> None:
    p.add_argument("--models", default="", help="comma-separated models (default: the compare suite)")
    p.add_argument("--nodes", type=list_of(positive_int), default="1000,4000",
                   help="node caps to try, time cap off (default 1000,4000)")
    p.add_argument("--seconds", type=list_of(positive_seconds), default="1,5",
                   help="time caps to try, node cap off (default 1,5)")
    p.add_argument("--k-multi", type=non_negative(int), default=2,
                   help="multi-pattern rules every K iterations (default 2)")
    _out(p, "caps")


def _chain(p: argparse.ArgumentParser) -> None:
    p.add_argument("--world", default="matrix", help="a world of rulegen.world (default matrix)")
    p.add_argument("--max-k", type=number_in(int, 2, MAX_COUNT), default=4, help="largest graph size, >= 2 (default 4)")
    p.add_argument("--workers", type=positive_int, default=2, help="generator processes (default 2)")
    p.add_argument("--seed", type=seed_int, default=0)
    _out(p, "chain")


def _extraction(p: argparse.ArgumentParser) -> None:
    p.add_argument("files", nargs="+", help="egraph-serialize JSON files (optimize --dump-egraph)")
    p.add_argument("--seconds", type=seconds, default=60.0, help="time limit of each ILP run (default 60)")
    p.add_argument("--solvers", default="", help="comma-separated rows of eqsat.egraph.solvers (default: all)")
    _out(p, "extraction")


def _fuzz(p: argparse.ArgumentParser) -> None:
    p.add_argument("--minutes", type=number_in(float, 0, MAX_SECONDS / 60, above=True), default=10.0,
                   help="time budget (default 10)")
    p.add_argument("--rounds", type=non_negative(int), default=0,
                   help="stop after this many rounds (default 0: no limit)")
    p.add_argument("--scale", type=positive_int, default=20, help="times the CI's examples per test (default 20)")
    p.add_argument("--first-seed", type=seed_int, default=1, help="hypothesis seed of the first round (default 1)")
    p.add_argument("--select", default="", help="pytest -k expression: only these fuzz tests (default all)")
    _out(p, "fuzz")


def _novelty(p: argparse.ArgumentParser) -> None:
    p.add_argument("--world", default="matrix", help="a world of rulegen.world (default matrix)")
    p.add_argument("--max-ops", type=positive_int, default=4, help="graph size (default 4)")
    p.add_argument("--known", help="known rule set (default: WORLD-min)")
    p.add_argument("--full", action="store_true", help="also run the second step")
    p.add_argument("--step", choices=("root", "egraph"), default="root", help="the second step")
    p.add_argument("--workers", type=positive_int, default=1, help="processes of the root step")
    _out(p, "novelty")


def _rulegen(p: argparse.ArgumentParser) -> None:
    p.add_argument("--worlds", default="", help="comma-separated worlds of rulegen.world (default: all)")
    p.add_argument("--max-k", type=positive_int, default=3, help="largest graph size (default 3)")
    p.add_argument("--workers", type=positive_int, default=2, help="generator processes (default 2)")
    p.add_argument("--seed", type=seed_int, default=0)
    _out(p, "rulegen")


def _soundness(p: argparse.ArgumentParser) -> None:
    p.add_argument("--sets", default="", help="comma-separated shipped rule sets (default: the default sets)")
    p.add_argument("--per-rule", type=non_negative(int), default=6,
                   help="corruptions tried per rule (0: all; default 6)")
    p.add_argument("--seed", type=seed_int, default=0)
    _out(p, "soundness")


def _walltime(p: argparse.ArgumentParser) -> None:
    p.add_argument("--models", default="squeezenet,bert",
                   help="comma-separated models, benchmark or zoo, with sizes: NAME[:KEY=V[/V...]] "
                        "(bert:layers=4/8/16/32 is four cells; default squeezenet,bert)")
    p.add_argument("--searches", default=EGRAPH, help=f"comma-separated searches (default {EGRAPH})")
    p.add_argument("--device", type=device_arg, default=DEFAULT_DEVICE, help=f"device (default {DEFAULT_DEVICE})")
    p.add_argument("--runs", type=positive_int, default=5, help="timed runs per cell (default 5)")
    p.add_argument("--timeout", type=positive_seconds, default=300.0,
                   help="seconds before a run is killed (default 300)")
    p.add_argument("--preset", default=None, metavar="NAME",
                   help="every search's named preset (e-graph: default, tensat-paper; α: taso-paper, case-study; "
                        "default each search's own)")
    _out(p, "walltime")


EXPERIMENTS = (
    Experiment("caps", "how far the e-graph's node and time caps overshoot", _caps,
               lazy("experiments.bench.caps:main"), ("bench_caps.csv", "bench_caps.json"), doc="README.md#caps"),
    Experiment("chain", "a world's rules from scratch to k ops, generated and minimized one size at a time", _chain,
               lazy("experiments.bench.chain:main"), ("chain.csv", "chain.json", "k<k>.rules", "k<k>.min.rules"),
               doc="README.md#rule-generation"),
    Experiment("extraction", "greedy vs ILP extraction on dumped e-graphs: cost, bound, gap, seconds", _extraction,
               lazy("experiments.bench.extraction:main"), ("bench_extraction.csv", "bench_extraction.json"),
               input_args=("files",), doc="extraction/README.md"),
    Experiment("fuzz", "the fuzz tests at scale with new seeds for a time budget (exit 1 on a failure)", _fuzz,
               lazy("experiments.bench.fuzz:main"), ("fuzz.csv", "fuzz.json"), doc="README.md#fuzzing"),
    Experiment("novelty", "how far the incremental generator's e-graph step gets at a graph size", _novelty,
               lazy("experiments.bench.novelty:main"), ("novelty.json",), doc="README.md#rule-generation"),
    Experiment("rulegen", "rule-generation time per world and graph size, per stage", _rulegen,
               lazy("experiments.bench.rulegen:main"), ("bench_rulegen.csv", "bench_rulegen.json"),
               doc="README.md#rule-generation"),
    Experiment("soundness", "corrupt every shipped rule: does rules verify reject the wrong ones?", _soundness,
               lazy("experiments.bench.soundness:main"), ("bench_soundness.csv", "bench_soundness.json"),
               doc="README.md#verifier-soundness"),
    Experiment("walltime", "wall time, CPU time and peak memory of eqsat-lab optimize in fresh processes, and "
               "their growth with depth", _walltime, lazy("experiments.bench.walltime:main"),
               ("bench_walltime.csv", "bench_walltime.json", "bench_walltime.md", "bench_walltime.png"),
               doc="README.md#wall-time-of-one-e-graph-run"),
)
