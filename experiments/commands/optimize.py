"""``eqsat-lab optimize``: one search on a benchmark graph or an ONNX model.

Limits start from the search's paper preset (``--preset`` picks another); each limit flag below
overrides one field of one search's limits, as listed in ``LIMIT_FLAGS``.
"""
from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from eqsat.cost.devices import DEFAULT_DEVICE, ORT_CPU
from eqsat.rules.rulesets import DEFAULT_RULE_SETS, FULL_RULE_SETS
from experiments.command import (
    Command,
    add_onnx_input,
    device_arg,
    device_help,
    load_model,
    non_negative,
    number_in,
    positive_int,
    process_age_s,
    seconds,
    seed_int,
)
from experiments.output import write_json
from experiments.searches import ALPHA, EGRAPH, PET, SEARCHES

# flag, search, field of that search's limits, argparse type, help
LIMIT_FLAGS: tuple[tuple[str, str, str, Callable[[str], Any], str], ...] = (
    ("--alpha", ALPHA, "alpha", number_in(float, 0, 1e6, above=True),
     "queue graphs cheaper than alpha x best (preset 1.05)"),
    (
        "--budget",
        ALPHA,
        "budget",
        non_negative(int),
        "graphs popped from the queue (preset: TASO's per model, else 300)",
    ),
    ("--work", ALPHA, "work", non_negative(int),
     "node visits (each applied rewrite counts its graph's nodes): work, not time, so a re-run gives the same "
     "file (preset 8,000,000; none for a benchmark graph with TASO's budget)"),
    ("--time-limit", ALPHA, "time_limit", seconds,
     "seconds, a safety net: the budget decides, a run this stops is marked time-bounded (preset 600)"),
    ("--iters", EGRAPH, "iterations", non_negative(int), "iteration limit (preset 15)"),
    ("--nodes", EGRAPH, "nodes", positive_int, "e-node limit (preset 50,000)"),
    ("--seconds", EGRAPH, "seconds", seconds,
     "saturation time limit, a safety net: iterations and e-nodes decide (preset 120)"),
    ("--k-multi", EGRAPH, "k_multi", non_negative(int),
     "iterations that run multi-pattern rules, and no more (TENSAT's setting; preset: 1, then by need)"),
    ("--multi-by-need", EGRAPH, "multi_by_need", non_negative(int),
     "merge rounds after saturation, each kept only if the exact optimum improves (preset 2; 0 with --k-multi)"),
    ("--extract", EGRAPH, "extract", str, "ilp (exact) or greedy (preset ilp)"),
    ("--ilp-nodes", EGRAPH, "ilp_nodes", non_negative(int),
     "branch-and-bound nodes of the exact extraction's whole-e-graph proof: work, not time, so a re-run gives the "
     "same file; 0: no proof, the cycle filter's optimum (preset 2,000)"),
    ("--ilp-seconds", EGRAPH, "ilp_seconds", seconds, "the exact extraction's time limit, a safety net (preset 60)"),
    ("--ilp-solver", EGRAPH, "ilp_solver", str, "highs (default), scipy, scip or cpsat (scip, cpsat: '.[ilp]')"),
    ("--dump-egraph", EGRAPH, "dump_egraph", str, "write the saturated e-graph (egraph-serialize JSON) here"),
    ("--memory-gb", EGRAPH, "memory_gb", number_in(float, 0, 1e6, above=True),
     "resident memory cap of the saturating process and of the extraction; each stops with the best graph so far "
     "(preset 4)"),
    ("--beam", PET, "beam_width", positive_int, "beam width (preset 4)"),
    ("--depth", PET, "depth", positive_int, "conv layers transformed at most (preset: all)"),
    ("--candidates", PET, "max_candidates", positive_int, "transformations tried per conv layer (preset 8)"),
)
SWITCHES: tuple[tuple[str, str, str, Any, str], ...] = (  # flag, search, field, value when given, help
    ("--no-multi", ALPHA, "multi", False, "do not apply the two-output rules (merges by pair moves only)"),
    ("--no-pair-move", ALPHA, "pair_move", False, "disable the pair move"),
)


ONNX_DEVICE = ORT_CPU.name  # an ONNX file runs on this machine: price it as measured here
BUILTIN_DEVICE = DEFAULT_DEVICE  # the benchmark graphs' papers priced them for a GPU
ONNX_OPS = ("standard", "onnxruntime")


def default_device(args: argparse.Namespace) -> tuple[str, str]:
    """The device to price on and why: ``--device``, else :data:`ONNX_DEVICE` for an ONNX file (a
    user optimizing a file runs it; a GPU profile would tune it for a device they may not have),
    else :data:`BUILTIN_DEVICE`."""
    if args.device:
        return args.device, "--device"
    if args.model.endswith(".onnx"):
        return ONNX_DEVICE, "the default for an ONNX file: measured in onnxruntime on this machine"
    return BUILTIN_DEVICE, "the default for a benchmark graph: its paper's device"


def writes_contrib(args: argparse.Namespace) -> bool:
    """onnxruntime's contrib kernels only where the user targets onnxruntime: ``--onnx-ops``, else
    when the file was priced on the measured onnxruntime device."""
    from eqsat.cost.roofline import measured_threads

    if args.onnx_ops:
        return args.onnx_ops == "onnxruntime"
    return measured_threads(args.device) is not None


def _dest(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="benchmark name (see `eqsat-lab models`) or an .onnx file")
    p.add_argument("--out", help="onnx: where to write the optimized model (checked with onnxruntime)")
    add_onnx_input(p)
    p.add_argument("--search", choices=list(SEARCHES), default=ALPHA, help=f"the search (default {ALPHA})")
    p.add_argument("--preset", help="named limits of the search (default: its paper preset; also quick)")
    p.add_argument("--device", type=device_arg, default=None,
                   help=device_help(f"{ONNX_DEVICE} for an .onnx file: this machine, measured; {BUILTIN_DEVICE} for a "
                                    f"benchmark graph, its paper's device"))
    p.add_argument("--onnx-ops", choices=ONNX_OPS, default=None,
                   help="onnx: write standard ONNX only, or onnxruntime's fused contrib kernels (FusedConv, FusedGemm) "
                        f"for a file that only onnxruntime runs (default: onnxruntime on {ONNX_DEVICE}, else standard)")
    p.add_argument("--param", action="append", default=[], metavar="K=V", help="builder size parameter")
    p.add_argument(
        "--rules",
        nargs="+",
        metavar="SET_OR_FILE",
        help="shipped rule sets (names in eqsat/rules/rulesets.py) or rule files (default: the search's own; "
        f"{EGRAPH}: {' '.join(DEFAULT_RULE_SETS)}, {ALPHA}: {' '.join(FULL_RULE_SETS)})",
    )
    p.add_argument("--seed", type=seed_int, default=0, help="seed of the final numerical check")
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
    own = getattr(engine, "search", engine).name  # eqsat+pet takes eqsat's flags
    wrong = [f for f, (search, _, _) in given.items() if search != own]
    if wrong:
        raise ValueError(f"{', '.join(wrong)} applies to another search than --search {args.search}")
    if "--k-multi" in given and "--multi-by-need" not in given:  # a fixed k_multi, as TENSAT ran it
        given["--multi-by-need"] = (EGRAPH, "multi_by_need", 0)
    # TASO's per-model budgets are for its benchmark graphs as built, not a file or a resized model
    taso_model = "" if args.model.endswith(".onnx") or getattr(args, "param", None) else args.model
    base = preset_limits(engine, args.preset or engine.default_preset, taso_model)
    return replace(base, **{field: value for _, field, value in given.values()})


def run(args: argparse.Namespace) -> int:
    from eqsat.cost.roofline import cost_model
    from eqsat.rules.rulesets import default_rules
    from eqsat.search import run_verified
    from experiments.onnx_io import check_out_path, price_written, write_optimized
    from experiments.runs.runtime_baseline import describe, input_instead, keep_runtime_gain, runtime_baseline
    from experiments.searches import get_search

    if args.model.endswith(".onnx"):
        check_out_path(args.model, args.out)
    args.device, device_why = default_device(args)
    get_search(args.search).warm()
    graph, imported = load_model(args)
    limits = limits_from(args)
    startup_s = process_age_s()
    parse_start = time.perf_counter()
    rules = default_rules(args.rules or get_search(args.search).default_rule_sets)
    parse_s = time.perf_counter() - parse_start
    model = cost_model(args.device)
    calibration = model.calibrate(graph)  # a measured model fits its prices to the input run end to end
    if calibration is not None:
        print(f"{model.name}: {calibration.summary()}")
    result = run_verified(get_search(args.search), graph, rules, model, limits, args.seed)
    runtime = runtime_baseline(graph, model) if model.latency_us(graph) is None else None
    best_runtime = runtime if runtime is None or result.best == graph else runtime_baseline(result.best, model)
    if imported is not None and runtime is not None:  # a file for onnxruntime: only a gain beyond its own fusions
        result = keep_runtime_gain(graph, result, model, runtime, best_runtime)
        best_runtime = runtime if result.best == graph else best_runtime
    print(result.summary())
    print(f"priced on {result.device} ({device_why})")
    for line in result.work.detail_lines():
        print("  " + line)
    print(
        f"verified against the input ({result.verified.method}): max relative error {result.verified.max_rel_error:.2g}"
    )
    payload = result.to_dict() | {"device_chosen_by": device_why}
    if calibration is not None:
        payload["calibration"] = calibration.to_dict()
    best_us = result.best_us  # the best as the runtime runs it: after its own fusions, for a model of kernels alone
    if runtime is not None:  # a model of the runtime itself already prices the runtime's fusions
        best_us = best_runtime["runtime_us"]
        payload["runtime"] = runtime
        print(describe(runtime, best_us))
    payload["phases"] = {"startup": startup_s, "parse": parse_s, **result.timings}
    print("phases: " + ", ".join(f"{k} {v:.2f} s" for k, v in payload["phases"].items()))
    if imported is not None:
        payload["onnx"] = write_optimized(imported, result.best, args.model, args.out, writes_contrib(args))
        payload["onnx"] |= price_written(args, best_us, model)
        instead = None
        if runtime is not None and not payload["onnx"]["input_copied"]:  # a roofline's file: priced, then run
            instead = input_instead(model, runtime, payload["onnx"], args.model, args.out)
        if instead is not None:
            print(instead["line"])
            result = result.input_kept(graph, instead["stop"])
            payload |= result.to_dict() | {"written_measured": instead["measured"]}
            payload["onnx"] = write_optimized(imported, graph, args.model, args.out, writes_contrib(args))
            payload["onnx"] |= price_written(args, runtime["runtime_us"], model)
    if args.json_out:
        write_json(args.json_out, payload)
    return 0


COMMAND = Command(
    "optimize",
    f"optimize a benchmark graph or ONNX model with one search ({ALPHA}: α-backtracking; "
    f"{EGRAPH}: equality saturation on egglog)",
    add_arguments,
    run,
    output_args=("out", "json_out", "dump_egraph"),
    input_args=("model", "rules"),
)
