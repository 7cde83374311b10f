"""``eqsat-lab experiment tuned-pricing``: the best graph under roofline pricing and under tuned kernels.

HypoGPU is A100-like, so its roofline (``a100``: the same peak and bandwidth) and the ``hypogpu``
device (every GEMM priced by its tuned kernel, :mod:`autotune.tuned_cost`) describe one machine at two
levels of detail. Each cell optimizes one model for one of them with the e-graph (the
:mod:`experiments.runs.hardware` cell) and prices the graph it found on both. A rewrite's verdict
changed where the two best graphs run different GEMMs: the table lists the GEMMs only one of them
runs (a merge that pays only when the merged GEMM fills a wave, a split that pays on an odd shape).
"""
from __future__ import annotations

import argparse
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from eqsat.cost.devices import HYPOGPU, HYPOGPU_ROOFLINE
from experiments.command import (
    Experiment,
    add_models,
    add_sweep_options,
    device_arg,
    non_negative,
    split_list,
    sweep_kwargs,
)
from experiments.compare import TENSAT_SUITE, check_models
from experiments.output import write_table
from experiments.sweep import Cell, RunOptions, run_cells

CASE_STUDIES = ("qkv", "lora")
ROOFLINE, TUNED = HYPOGPU_ROOFLINE.name, HYPOGPU.name


def verdict_rows(results: Sequence[dict[str, Any]], roofline: str, tuned: str) -> list[dict[str, Any]]:
    """One row per model: each best graph priced both ways, and the GEMMs only one of them runs."""
    by = {(r["model"], r["found_on"]): r for r in results}
    rows = []
    for model in dict.fromkeys(r["model"] for r in results):
        a, b = by[(model, roofline)], by[(model, tuned)]
        only_a, only_b = Counter(a["gemms"]) - Counter(b["gemms"]), Counter(b["gemms"]) - Counter(a["gemms"])
        rows.append({
            "model": model,
            "input_roofline_us": round(a["input_on"][roofline], 2), "input_tuned_us": round(a["input_on"][tuned], 2),
            "roofline_best_us": round(a["cost_on"][roofline], 2),
            "roofline_best_tuned_us": round(a["cost_on"][tuned], 2),
            "tuned_best_us": round(b["cost_on"][tuned], 2), "tuned_best_roofline_us": round(b["cost_on"][roofline], 2),
            "tuned_gain_over_roofline_pick": round(a["cost_on"][tuned] / b["cost_on"][tuned], 4),
            "gemms_only_in_roofline_best": "; ".join(f"{k} x{v}" for k, v in sorted(only_a.items())),
            "gemms_only_in_tuned_best": "; ".join(f"{k} x{v}" for k, v in sorted(only_b.items())),
        })
    return rows


def format_rows(rows: Sequence[dict[str, Any]], roofline: str, tuned: str) -> str:
    lines = [f"best graph found with {roofline} (roofline) pricing vs with {tuned} (tuned kernels), µs on each",
             f"{'model':14s} {'input R':>9s} {'input T':>9s} | {'R-best R':>9s} {'R-best T':>9s} | "
             f"{'T-best T':>9s} {'T-best R':>9s} | {'T gain':>6s}"]
    for r in rows:
        lines.append(f"{r['model']:14s} {r['input_roofline_us']:9.2f} {r['input_tuned_us']:9.2f} | "
                     f"{r['roofline_best_us']:9.2f} {r['roofline_best_tuned_us']:9.2f} | {r['tuned_best_us']:9.2f} "
                     f"{r['tuned_best_roofline_us']:9.2f} | {r['tuned_gain_over_roofline_pick']:6.3f}")
        for side in ("roofline", "tuned"):
            if r[f"gemms_only_in_{side}_best"]:
                lines.append(f"    only in the {side} best: {r[f'gemms_only_in_{side}_best']}")
    return "\n".join(lines)


def run(models: Sequence[str] | None, out: Path, *, roofline: str = ROOFLINE, tuned: str = TUNED, k_multi: int = 2,
        seed: int = 0, options: RunOptions = RunOptions(),
        command: str = "") -> list[dict[str, Any]]:
    from eqsat.cost.registry import check_device

    models = check_models(models or CASE_STUDIES + TENSAT_SUITE)
    for d in (roofline, tuned):
        check_device(d)
    devices = (roofline, tuned)
    cells = [Cell.of("tuned-pricing", "experiments.runs.hardware:best_graph_costs", model=m, device=d, devices=devices,
                     k_multi=k_multi, seed=seed) for m in models for d in devices]
    results = run_cells(cells, out, options=options, desc="tuned-pricing")
    rows = verdict_rows(results, roofline, tuned)
    write_table(out, "tuned_pricing", rows, {"command": command, "roofline": roofline, "tuned": tuned,
                                             "k_multi": k_multi})
    print(format_rows(rows, roofline, tuned))
    print(f"wrote {out / 'tuned_pricing.csv'} and {out / 'tuned_pricing.json'}")
    return rows


def _add_arguments(p: argparse.ArgumentParser) -> None:
    add_models(p, "the case studies and TENSAT's seven models")
    p.add_argument("--roofline", type=device_arg, default=ROOFLINE,
                   help=f"the roofline device (default: {ROOFLINE}, HypoGPU's datasheet)")
    p.add_argument("--tuned", type=device_arg, default=TUNED, help="the tuned device: hypogpu[:oracle|:TUNER@TRIALS]")
    p.add_argument("--k-multi", type=non_negative(int), default=2, help="e-graph multi-pattern iterations")
    add_sweep_options(p, "results/tuned_pricing", device=False)


def _run(args: argparse.Namespace) -> int:
    run(split_list(args.models) or None, Path(args.out), roofline=args.roofline, tuned=args.tuned,
        k_multi=args.k_multi, seed=args.seed, **sweep_kwargs(args))
    return 0


EXPERIMENTS = (Experiment("tuned-pricing", "best graphs under roofline vs tuned-HypoGPU pricing, and the GEMMs "
                          "whose verdict changes", _add_arguments, _run,
                          outputs=("tuned_pricing.csv", "tuned_pricing.json"), doc="tuned_pricing/README.md"),)
