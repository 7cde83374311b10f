"""``eqsat-lab experiment tuning-budget``: every tuner at small budgets, held to the bound.

For each tuner, shape and budget: the median and the worst of ``seeds`` seeds (% of the true
optimum of the config each run picks as its best measured one), next to the perfect-model
oracle's median and worst on the same shape. Shapes: the named ones and ``random`` shapes
drawn from realistic ranges (:func:`autotune.workload.random_shapes`). A tuner "holds" on a
shape when its median is within :data:`MEDIAN_SLACK` points of the oracle's and its worst seed
reaches :data:`WORST_FLOOR` % of the optimum. Also reported: each tuner's median seconds per
batch (model fit plus search), measured on this machine.
"""
from __future__ import annotations

import argparse
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from experiments.command import (
    Experiment,
    add_sweep_options,
    count_list,
    non_negative,
    positive_int,
    seed_int,
    split_list,
    sweep_kwargs,
)
from experiments.output import write_table
from experiments.sweep import Cell, RunOptions, run_cells

TUNERS = ("random", "autotvm", "autotvm-b16", "ansor", "robust", "oracle")
SHAPES = ("square", "prefill", "decode", "wgrad", "ffn_down")
CHECKPOINTS = (32, 64, 128)
RANDOM_SHAPES, RANDOM_SEED = 8, 2026
MEDIAN_SLACK, WORST_FLOOR = 1.0, 95.0
BOUND = "oracle"


def budget_cell(tuner: str, shape: str, seed: int, checkpoints: Sequence[int]) -> dict[str, Any]:
    """One run to the largest checkpoint: % of optimum after each, and the seconds each
    ``next_batch`` took."""
    from autotune.evaluate import fraction_after
    from autotune.measure import SimulatedMeasurer
    from autotune.registry import make_tuner
    from autotune.tuners import TuneResult, drive
    from autotune.workload import get_workload

    workload = get_workload(shape)
    t = make_tuner(tuner)
    result, batches = TuneResult(t.name, workload), []
    drive(t.start(workload, seed), workload, max(checkpoints), SimulatedMeasurer(seed=seed), result, batches)
    return {"tuner": tuner, "shape": shape, "seed": seed, "batch_s": batches,
            "pct": {str(n): 100 * fraction_after(result, n) for n in checkpoints}}


def summarize(results: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per tuner, shape and budget: median and worst over seeds, and the bound's."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in results:
        groups.setdefault((r["tuner"], r["shape"]), []).append(r)
    rows = []
    for (tuner, shape), rs in groups.items():
        for n in rs[0]["pct"]:
            per = [r["pct"][n] for r in rs]
            bound = [r["pct"][n] for r in groups.get((BOUND, shape), [])]
            b_med = statistics.median(bound) if bound else float("nan")
            med = statistics.median(per)
            rows.append({"tuner": tuner, "shape": shape, "trials": int(n), "median_pct": round(med, 2),
                         "worst_pct": round(min(per), 2), "oracle_median_pct": round(b_med, 2),
                         "oracle_worst_pct": round(min(bound), 2) if bound else float("nan"),
                         "holds": bool(med >= b_med - MEDIAN_SLACK and min(per) >= WORST_FLOOR),
                         "per_seed_pct": " ".join(f"{p:.1f}" for p in per)})
    return rows


def run(out: Path, *, tuners: Sequence[str] = TUNERS, shapes: Sequence[str] = SHAPES,
        random_shapes: int = RANDOM_SHAPES, seeds: int = 5, first_seed: int = 0,
        checkpoints: Sequence[int] = CHECKPOINTS,
        options: RunOptions = RunOptions(), command: str = "") -> list[dict[str, Any]]:
    from autotune import workload as wl
    from autotune.registry import make_tuner

    for t in tuners:
        make_tuner(t)  # unknown names fail here, before any cell runs
    names = list(shapes) + [w.name for w in wl.random_shapes(random_shapes, RANDOM_SEED)]
    for s in names:
        wl.get_workload(s)
    cells = [Cell.of("tuning-budget", "experiments.runs.tuning_budget:budget_cell", tuner=t, shape=s, seed=k,
                     checkpoints=tuple(checkpoints)) for t in tuners for s in names
             for k in range(first_seed, first_seed + seeds)]
    results = run_cells(cells, out, options=options, desc="tuning budget")
    rows = summarize(results)
    overhead = {t: statistics.median([x for r in results if r["tuner"] == t for x in r["batch_s"][1:]] or [0.0])
                for t in tuners}
    write_table(out, "tuning_budget", rows, {"command": command, "seeds": seeds, "first_seed": first_seed,
                                             "random_seed": RANDOM_SEED,
                                             "median_slack_points": MEDIAN_SLACK, "worst_floor_pct": WORST_FLOOR,
                                             "seconds_per_batch": overhead})
    last = max(checkpoints)
    print(f"at {last} trials, median / worst of {seeds} seeds (% of optimum); oracle median / worst")
    for s in names:
        line = [f"{s:18s}"]
        for t in tuners:
            r = next(x for x in rows if x["tuner"] == t and x["shape"] == s and x["trials"] == last)
            line.append(f"{t} {r['median_pct']:.1f}/{r['worst_pct']:.1f}{'*' if r['holds'] and t != BOUND else ''}")
        print("  ".join(line))
    print(f"(* holds: median within {MEDIAN_SLACK} point(s) of the oracle's and worst seed >= {WORST_FLOOR}%)")
    for t in tuners:
        held = [r for r in rows if r["tuner"] == t and r["trials"] == last]
        print(f"{t:12s} holds on {sum(r['holds'] for r in held)}/{len(held)} shapes; "
              f"{overhead[t] * 1e3:.0f} ms per batch (median)")
    print(f"wrote {out / 'tuning_budget.csv'} and {out / 'tuning_budget.json'}")
    return rows


def _add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tuners", default=",".join(TUNERS), help="comma-separated tuner names (and the bound oracle)")
    p.add_argument("--shapes", default=",".join(SHAPES), help="comma-separated named shapes or MxNxK")
    p.add_argument("--random-shapes", type=non_negative(int), default=RANDOM_SHAPES,
                   help="how many random shapes to add")
    p.add_argument("--seeds", type=positive_int, default=5, help="how many seeds per tuner and shape")
    p.add_argument("--first-seed", type=seed_int, default=0,
                   help="seeds FIRST..FIRST+N-1 (e.g. 5 for a check on seeds the tuners were not tuned on)")
    p.add_argument("--trials", type=count_list, default=",".join(map(str, CHECKPOINTS)), help="comma-separated budgets")
    add_sweep_options(p, "results/tuning_budget", device=False, seed=False)


def _run(args: argparse.Namespace) -> int:
    run(Path(args.out), tuners=split_list(args.tuners), shapes=split_list(args.shapes),
        random_shapes=args.random_shapes, seeds=args.seeds, first_seed=args.first_seed,
        checkpoints=[int(x) for x in split_list(args.trials)], **sweep_kwargs(args))
    return 0


EXPERIMENTS = (
    Experiment("tuning-budget", "every tuner at small budgets on named and random shapes, median and worst seed "
               "next to the perfect-model bound", _add_arguments, _run,
               outputs=("tuning_budget.csv", "tuning_budget.json"), doc="README.md#small-budgets-held-to-the-bound"),
)
