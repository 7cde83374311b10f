"""``eqsat-lab experiment hardware``: the best graph per device, and what it costs elsewhere.

Each cell optimizes one model for one device with the e-graph and prices the graph it found on
every device. The penalty of running device A's best graph on device B is its cost on B over
B's own best: the reference case is the ResNet block, whose h100-best graph (the merged
1x1+3x3 conv) is slower on the weak device than the graph found for it (measured in
docs/results/README.md).
"""
from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from eqsat.cost.devices import DEVICES as ROOFLINE_DEVICES
from eqsat.cost.registry import check_device, cost_model
from eqsat.models import build
from experiments.command import (
    Experiment,
    add_models,
    add_sweep_options,
    device_help,
    device_list,
    non_negative,
    split_list,
    sweep_kwargs,
)
from experiments.compare import check_models
from experiments.output import pyplot, save_figure, write_table
from experiments.searches import EGRAPH, get_search, limits_for, search_graph
from experiments.sweep import Cell, RunOptions, run_cells

HARDWARE_MODELS = ("resnet_block", "qkv", "lora")
DEVICES = tuple(ROOFLINE_DEVICES)  # every roofline profile of the device table


def best_graph_costs(model: str, device: str, devices: tuple[str, ...], k_multi: int, seed: int) -> dict[str, Any]:
    """Optimize ``model`` for ``device``; return the best graph's cost on each of ``devices`` and the
    GEMMs it launches."""
    from autotune.tuned_cost import graph_gemms

    graph = build(model)
    limits = limits_for(get_search(EGRAPH), model, k_multi=k_multi)
    r, best = search_graph(graph, model, EGRAPH, device, seed, limits=limits)
    return {"model": model, "found_on": device, "best_us": r["best_us"], "search_s": r["search_s"],
            "best_ops": best.op_count(),
            "cost_on": {d: cost_model(d).graph_time_us(best) for d in devices},
            "input_on": {d: cost_model(d).graph_time_us(graph) for d in devices}, "gemms": graph_gemms(best)}


def penalty_rows(results: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    own = {(r["model"], r["found_on"]): r["cost_on"][r["found_on"]] for r in results}
    rows = []
    for r in results:
        for run_on, cost in r["cost_on"].items():
            best_there = own.get((r["model"], run_on))
            rows.append({"model": r["model"], "found_on": r["found_on"], "run_on": run_on,
                         "cost_us": round(cost, 3), "input_us": round(r["input_on"][run_on], 3),
                         "best_for_run_on_us": None if best_there is None else round(best_there, 3),
                         "penalty": None if best_there is None else round(cost / best_there, 4)})
    return rows


def format_matrix(rows: Sequence[dict[str, Any]], devices: Sequence[str]) -> str:
    lines = []
    for m in dict.fromkeys(r["model"] for r in rows):
        lines.append(f"{m}: penalty of running the graph found for <row> on <column> (1.00 = that device's best)")
        lines.append(f"  {'found on':>9s} " + " ".join(f"{d:>7s}" for d in devices))
        for found in devices:
            cells = {r["run_on"]: r for r in rows if r["model"] == m and r["found_on"] == found}
            lines.append(f"  {found:>9s} " + " ".join(f"{cells[d]['penalty']:7.3f}" for d in devices))
    return "\n".join(lines)


def plot(rows: Sequence[dict[str, Any]], devices: Sequence[str], path: Path) -> None:
    plt = pyplot()
    models = list(dict.fromkeys(r["model"] for r in rows))
    fig, axes = plt.subplots(1, len(models), figsize=(3.6 * len(models), 3.4), squeeze=False)
    for ax, m in zip(axes[0], models):
        grid = [[next(r["penalty"] for r in rows if r["model"] == m and r["found_on"] == f and r["run_on"] == d)
                 for d in devices] for f in devices]
        im = ax.imshow(grid, cmap="Reds", vmin=1.0, vmax=max(1.05, max(max(g) for g in grid)))
        ax.set_xticks(range(len(devices)), devices, rotation=45)
        ax.set_yticks(range(len(devices)), devices)
        ax.set_xlabel("run on")
        ax.set_ylabel("found on")
        ax.set_title(m)
        for i, row in enumerate(grid):
            for j, v in enumerate(row):
                ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=7)
        fig.colorbar(im, ax=ax, fraction=0.046)
    fig.tight_layout()
    save_figure(fig, path, dpi=120)
    plt.close(fig)


def run(models: Sequence[str] | None, out: Path, *, devices: Sequence[str] = DEVICES, k_multi: int = 2,
        seed: int = 0, options: RunOptions = RunOptions(),
        command: str = "") -> list[dict[str, Any]]:
    models = check_models(models or HARDWARE_MODELS)
    devices = tuple(devices)
    for d in devices:
        check_device(d)  # unknown names fail here, before any cell runs
    cells = [Cell.of("hardware", "experiments.runs.hardware:best_graph_costs", model=m, device=d, devices=devices,
                     k_multi=k_multi, seed=seed) for m in models for d in devices]
    results = run_cells(cells, out, options=options, desc="hardware")
    rows = penalty_rows(results)
    write_table(out, "hardware", rows, {"command": command, "k_multi": k_multi, "devices": list(devices)})
    plot(rows, devices, out / "hardware.png")
    print(format_matrix(rows, devices))
    print(f"wrote {out / 'hardware.csv'}, {out / 'hardware.json'} and {out / 'hardware.png'}")
    return rows


def _add_arguments(p: argparse.ArgumentParser) -> None:
    add_models(p, "the case studies")
    p.add_argument("--devices", type=device_list, default=",".join(DEVICES),
                   help="comma-separated; " + device_help(",".join(DEVICES)))
    p.add_argument("--k-multi", type=non_negative(int), default=2,
                   help="e-graph multi-pattern iterations (the case studies need 2)")
    add_sweep_options(p, "results/hardware", device=False)


def _run(args: argparse.Namespace) -> int:
    run(split_list(args.models) or None, Path(args.out), devices=split_list(args.devices), k_multi=args.k_multi,
        seed=args.seed, **sweep_kwargs(args))
    return 0


EXPERIMENTS = (Experiment("hardware", "best graph per device and the penalty of running it elsewhere",
                          _add_arguments, _run, outputs=("hardware.csv", "hardware.json", "hardware.png"),
                          doc="README.md#hardware"),)
