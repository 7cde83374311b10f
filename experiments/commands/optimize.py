"""``eqsat-lab optimize``: one search on a benchmark graph or an ONNX model.

Limits start from the search's paper preset (``--preset`` picks another); each limit flag below
overrides one field of one search's limits, as listed in ``LIMIT_FLAGS``.
"""
from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from experiments.command import (
    Command,
    add_device,
    add_onnx_input,
    finite_float,
    load_model,
    non_negative,
    positive_int,
    process_age_s,
)
from experiments.output import write_json
from experiments.searches import SEARCHES

# flag, search, field of that search's limits, argparse type, help
LIMIT_FLAGS: tuple[tuple[str, str, str, Callable[[str], Any], str], ...] = (
    ("--alpha", "taso", "alpha", finite_float, "queue graphs cheaper than alpha x best (preset 1.05)"),
    (
        "--budget",
        "taso",
        "budget",
        non_negative(int),
        "graphs popped from the queue (preset: TASO's per model, else 300)",
    ),
    ("--time-limit", "taso", "time_limit", non_negative(float), "seconds (preset 120)"),
    ("--iters", "eqsat", "iterations", non_negative(int), "iteration limit (preset 15)"),
    ("--nodes", "eqsat", "nodes", non_negative(int), "e-node limit (preset 50,000)"),
    ("--seconds", "eqsat", "seconds", non_negative(float), "saturation time limit (preset 120)"),
    ("--k-multi", "eqsat", "k_multi", non_negative(int),
     "iterations that run multi-pattern rules, and no more (TENSAT's setting; preset: 1, then by need)"),
    ("--multi-by-need", "eqsat", "multi_by_need", non_negative(int),
     "merge rounds after saturation, each kept only if the exact optimum improves (preset 2; 0 with --k-multi)"),
    ("--extract", "eqsat", "extract", str, "ilp (exact) or greedy (preset ilp)"),
    ("--ilp-solver", "eqsat", "ilp_solver", str, "highs (default), scipy, scip or cpsat (scip, cpsat: '.[ilp]')"),
    ("--dump-egraph", "eqsat", "dump_egraph", str, "write the saturated e-graph (egraph-serialize JSON) here"),
    ("--beam", "pet", "beam_width", positive_int, "beam width (preset 4)"),
    ("--depth", "pet", "depth", positive_int, "conv layers transformed at most (preset: all)"),
    ("--candidates", "pet", "max_candidates", positive_int, "transformations tried per conv layer (preset 8)"),
)
SWITCHES: tuple[tuple[str, str, str, Any, str], ...] = (  # flag, search, field, value when given, help
    ("--no-multi", "taso", "multi", False, "do not apply the two-output rules (merges by pair moves only)"),
    ("--no-pair-move", "taso", "pair_move", False, "disable the pair move"),
)


def _dest(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="benchmark name (see `eqsat-lab models`) or an .onnx file")
    p.add_argument("--out", help="onnx: where to write the optimized model (checked with onnxruntime)")
    add_onnx_input(p)
    p.add_argument("--search", choices=list(SEARCHES), default="taso", help="the search (default taso)")
    p.add_argument("--preset", help="named limits of the search (default: its paper preset; also quick)")
    add_device(p)
    p.add_argument("--param", action="append", default=[], metavar="K=V", help="builder size parameter")
    p.add_argument(
        "--rules",
        nargs="+",
        metavar="SET_OR_FILE",
        help="shipped rule sets (names in eqsat/rules/rulesets.py) or rule files (default: the search's own; eqsat: "
        "matrix-min conv-min epilogue, taso: matrix conv epilogue)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the final numerical check")
    p.add_argument("--json", dest="json_out", help="write the result as JSON here")
    for flag, search, _, kind, text in LIMIT_FLAGS:
        p.add_argument(flag, type=kind, default=None, help=f"{search}: {text}")
    for flag, search, _, _, text in SWITCHES:
        p.add_argument(flag, action="store_true", help=f"{search}: {text}")


def limits_from(args: argparse.Namespace) -> Any:
    """The search's preset (``--preset``, default its paper preset, specialized to the model) with
    the limit flags given on the command line applied."""
    from experiments.searches import get_search, preset_limits

    engine = get_search(args.search)
    given = {
        f: (search, field, getattr(args, _dest(f)))
        for f, search, field, _, _ in LIMIT_FLAGS
        if getattr(args, _dest(f)) is not None
    }
    given |= {f: (search, field, value) for f, search, field, value, _ in SWITCHES if getattr(args, _dest(f))}
    stages = [s.name for s in getattr(engine, "stages", (engine,))]
    wrong = [f for f, (search, _, _) in given.items() if search not in stages]
    if wrong:
        raise ValueError(f"{', '.join(wrong)} applies to another search than --search {args.search}")
    if "--k-multi" in given and "--multi-by-need" not in given:  # a fixed k_multi, as TENSAT ran it
        given["--multi-by-need"] = ("eqsat", "multi_by_need", 0)
    base = preset_limits(engine, args.preset or engine.default_preset, Path(args.model).stem)
    per_stage = base if len(stages) > 1 else (base,)
    changed = tuple(replace(lim, **{field: value for search, field, value in given.values() if search == name})
                    for name, lim in zip(stages, per_stage))
    return changed if len(stages) > 1 else changed[0]


def run(args: argparse.Namespace) -> int:
    from eqsat.cost.select import cost_model
    from eqsat.rules.rulesets import default_rules
    from eqsat.search import run_verified
    from experiments.onnx_io import check_out_path, price_written, write_optimized
    from experiments.runs.runtime_baseline import describe, runtime_baseline
    from experiments.searches import get_search

    if args.model.endswith(".onnx"):
        check_out_path(args.model, args.out)
    get_search(args.search).warm()
    graph, imported = load_model(args)
    limits = limits_from(args)
    startup_s = process_age_s()
    parse_start = time.perf_counter()
    rules = default_rules(args.rules or get_search(args.search).default_rule_sets)
    parse_s = time.perf_counter() - parse_start
    model = cost_model(args.device)
    result = run_verified(get_search(args.search), graph, rules, model, limits, args.seed)
    print(result.summary())
    for line in result.work.detail_lines():
        print("  " + line)
    print(
        f"verified against the input ({result.verified.method}): max relative error {result.verified.max_rel_error:.2g}"
    )
    payload = result.to_dict()
    if getattr(model, "end_to_end_us", None) is None:  # a measured model already prices the runtime's fusions
        payload["runtime"] = runtime_baseline(graph, model)
        print(describe(payload["runtime"], result.best_us))
    payload["phases"] = {"startup": startup_s, "parse": parse_s, **result.timings}
    print("phases: " + ", ".join(f"{k} {v:.2f} s" for k, v in payload["phases"].items()))
    if imported is not None:
        payload["onnx"] = write_optimized(imported, result.best, args.model, args.out)
        payload["onnx"] |= price_written(args, result.best_us)
    if args.json_out:
        write_json(args.json_out, payload)
    return 0


COMMAND = Command(
    "optimize",
    "optimize a benchmark graph or ONNX model with one search (taso: α-backtracking; "
    "eqsat: equality saturation on egglog)",
    add_arguments,
    run,
)
