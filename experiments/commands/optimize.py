"""``eqsat-lab optimize``: one search on a benchmark graph or an ONNX model.

Limits start from the search's paper preset (``--preset`` picks another); each limit flag below
overrides one field of one search's limits, as listed in ``LIMIT_FLAGS``.
"""
from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from eqsat import pipeline
from eqsat.rules.rulesets import DEFAULT_RULE_SETS, FULL_RULE_SETS
from experiments.command import (
    Command,
    add_onnx_input,
    device_arg,
    device_help,
    non_negative,
    number_in,
    parse_dims,
    parse_params,
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


ONNX_DEVICE, BUILTIN_DEVICE, ONNX_OPS = pipeline.ONNX_DEVICE, pipeline.BUILTIN_DEVICE, pipeline.ONNX_OPS


def _dest(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="benchmark name (see `eqsat-lab models`) or an .onnx file; its tensors may need at "
                              f"most {pipeline.CHECK_MAX_GIB} GiB in float64 (the numerical check's cap)")
    p.add_argument("--out", help="onnx: where to write the optimized model (checked with onnxruntime)")
    add_onnx_input(p)
    p.add_argument("--search", choices=list(SEARCHES), default=ALPHA, help=f"the search (default {ALPHA})")
    p.add_argument("--preset", help="named limits of the search (default: its paper preset; also quick; taso: "
                                    "case-study, single-output rules plus the pair move)")
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
    the limit flags given on the command line applied (:func:`eqsat.pipeline.search_limits`)."""
    from experiments.searches import get_search

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
    params = parse_params(getattr(args, "param", None) or [])
    return pipeline.search_limits(engine, args.model, args.preset, params,
                                  {field: value for _, field, value in given.values()})


def run(args: argparse.Namespace) -> int:
    from experiments.onnx_io import check_out_path

    if args.model.endswith(".onnx"):
        check_out_path(args.model, args.out)
    before_s = process_age_s()
    outcome = pipeline.optimize_model(
        args.model, search=args.search, device=args.device, rules=args.rules, limits=limits_from(args),
        out=args.out, seed=args.seed, batch=args.batch, dims=parse_dims(args.dim), params=parse_params(args.param),
        onnx_ops=args.onnx_ops)
    startup_s = before_s + outcome.load_s  # the interpreter, every import and the model's load
    total_s = process_age_s()  # the whole run's wall time: what the user waited
    for line in report_lines(outcome, args.model, startup_s, total_s):
        print(line)
    if args.json_out:
        payload = outcome.to_dict()
        payload["phases"] = all_phases(outcome, startup_s, total_s)
        payload["device_chosen_by"] = device_why(outcome)
        write_json(args.json_out, payload)
    return 0


def device_why(outcome: pipeline.Outcome) -> str:
    return "--device" if outcome.device_why == pipeline.GIVEN else outcome.device_why


def all_phases(outcome: pipeline.Outcome, startup_s: float, total_s: float | None = None) -> dict[str, float]:
    """Seconds per phase, start-up first; with ``total_s`` (the run's wall time) the rest of it as
    ``other`` and the ``total``, so the phases outside :data:`eqsat.pipeline.INSIDE` add up to it."""
    phases = {"startup": startup_s, **outcome.phases}
    if total_s is None:
        return phases
    listed = sum(v for k, v in phases.items() if k not in pipeline.INSIDE)
    return phases | {"other": max(total_s - listed, 0.0), "total": max(total_s, listed)}


def phases_line(phases: dict[str, float]) -> str:
    """The printed phases: those that add up to the total, then what was spent inside them."""
    shown = [f"{k} {v:.2f} s" for k, v in phases.items() if k not in pipeline.INSIDE and k != "total"]
    inside = [f"{k.replace('_', ' ')} {phases[k]:.2f} s" for k in pipeline.INSIDE if k in phases]
    line = "phases: " + ", ".join(shown)
    if "total" in phases:
        line += f"; total {phases['total']:.2f} s wall"
    return line + (f" (of which {', '.join(inside)})" if inside else "")


def report_lines(outcome: pipeline.Outcome, model: str, startup_s: float, total_s: float | None = None) -> list[str]:
    """What ``eqsat-lab optimize`` prints about ``outcome``, line by line, in the order the job ran."""
    from eqsat.onnx.runtime_baseline import describe

    lines = []
    if outcome.calibration is not None:
        lines.append(f"{outcome.result.device}: {outcome.calibration.summary()}")
    result = outcome.refused or outcome.result  # as the search and the guards before the written file left it
    lines.append(result.summary())
    lines.append(f"priced on {result.device} ({device_why(outcome)})")
    lines += ["  " + line for line in result.work.detail_lines()]
    lines.append(f"verified against the input ({result.verified.method}): max relative error "
                 f"{result.verified.max_rel_error:.2g}")
    if outcome.runtime is not None:
        lines.append(describe(dict(outcome.runtime), outcome.best_us))
    if outcome.layout is not None:
        lines.append(f"{result.device}: {outcome.layout.summary()} (how a PyTorch module built from it stores "
                     f"its tensors; an ONNX file holds no layout)")
    lines.append(phases_line(all_phases(outcome, startup_s, total_s)))
    for i, written in enumerate(outcome.writes):
        if i and outcome.kept.guard == "measured-file":  # the first file ran slower in onnxruntime here
            lines.append(f"{outcome.kept.why.removeprefix('input written: ')}: the input is written instead")
        elif i:  # the written-file guard refused the first file
            kept = outcome.kept
            lines.append(f"the written file is {kept.gain:.3f}x the input as onnxruntime runs it, not faster by "
                         f"the cost model's resolution ({kept.threshold:.0%}): the input is written instead")
        lines += written_lines(written, model)
    return lines


def written_lines(written: pipeline.WrittenFile, model: str) -> list[str]:
    """The lines of one written file: where, its onnxruntime check, its opaque ops and its price."""
    file, cost = written.file, written.cost
    copied = " (the search kept the input: the input file, copied)" if file.input_copied else ""
    note = ("agrees" if cost["written_agrees"] else
            f"differs by {cost['written_vs_best']:+.1%}: part of the reported gain is not in the file")
    return [f"wrote {file.out}{copied}; onnxruntime max relative difference to {model}: "
            f"{file.max_rel_difference:.2g} (ops in: {', '.join(f'{k} {v}' for k, v in file.ops_in)})",
            f"opaque ops (kept exactly, not optimized): {', '.join(file.opaque) or 'none'}",
            f"the written file, imported again, costs {cost['written_us']:.2f} µs (search's best "
            f"{written.best_us:.2f} µs): {note}"] + (
        [f"timed in onnxruntime on this CPU: the input {cost['ort_input_us'] / 1e3:.2f} ms, the written file "
         f"{cost['ort_written_us'] / 1e3:.2f} ms ({cost['ort_input_us'] / cost['ort_written_us']:.3f}x; noise "
         f"{cost['ort_noise']:.1%})"] if "ort_written_us" in cost else [])


COMMAND = Command(
    "optimize",
    f"optimize a benchmark graph or ONNX model with one search ({ALPHA}: α-backtracking; "
    f"{EGRAPH}: equality saturation on egglog)",
    add_arguments,
    run,
    output_args=("out", "json_out", "dump_egraph"),
    input_args=("model", "rules"),
)
