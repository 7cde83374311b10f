"""``eqsat-lab experiment budget``: best cost found against search time, per model.

α search: one run per α with the largest budget. The search is deterministic and the budget only
stops it, so its trace (best cost at every improvement, with the expansions and seconds spent)
is the answer of every smaller budget. E-graph: one run per (k_multi, iteration limit, node
limit) cell, each with its own extraction, since the extracted graph depends on the limits.
"""
from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from experiments.command import Experiment, add_models, add_sweep_options, non_negative, split_list, sweep_kwargs
from experiments.compare import check_models
from experiments.output import pyplot, save_figure, write_table
from experiments.searches import ALPHA, EGRAPH, add_alpha_preset, alpha_preset, get_search
from experiments.sweep import Cell, RunOptions, run_cells

BUDGET_MODELS = ("resnet_block", "qkv", "lora")
ALPHAS = (1.0, 1.05, 1.3, 1.5)
K_MULTI = (0, 1, 2)
ITERATIONS = (1, 2, 3, 5, 15)
NODE_LIMITS = (2_000, 10_000)  # at 15 iterations; the iteration sweep runs at 50,000


def cells(models: Sequence[str], device: str, seed: int, budget: int, preset: str | None = None) -> list[Cell]:
    fn = "experiments.searches:run_search"
    named = {} if preset is None else {"preset": preset}  # the default preset's cells keep their old keys
    out = []
    for m in models:
        out += [Cell.of("budget", fn, model=m, search=ALPHA, device=device, seed=seed, alpha=a, budget=budget,
                        **named) for a in ALPHAS]
        for k in K_MULTI:
            out += [Cell.of("budget", fn, model=m, search=EGRAPH, device=device, seed=seed, k_multi=k,
                            iterations=i, nodes=50_000) for i in ITERATIONS]
            out += [Cell.of("budget", fn, model=m, search=EGRAPH, device=device, seed=seed, k_multi=k,
                            iterations=15, nodes=n) for n in NODE_LIMITS]
    return out


def curve_rows(results: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per point of a curve: α traces point by point, e-graph cells one point each."""
    rows: list[dict[str, Any]] = []
    for r in results:
        if r["search"] == ALPHA:
            for seconds, expanded, best in r["trace"]:
                rows.append({"model": r["model"], "search": ALPHA, "setting": f"alpha={r['alpha']}",
                             "alpha": r["alpha"], "k_multi": "", "iterations": "", "nodes": "", "expanded": expanded,
                             "seconds": round(seconds, 4), "best_us": round(best, 3), "original_us": r["original_us"],
                             "stop": ""})
        else:
            rows.append({"model": r["model"], "search": EGRAPH, "setting": f"k_multi={r['k_multi']}",
                         "alpha": "", "k_multi": r["k_multi"], "iterations": r["iteration_limit"],
                         "nodes": r["node_limit"], "expanded": "", "seconds": round(r["search_s"], 4),
                         "best_us": round(r["best_us"], 3), "original_us": r["original_us"], "stop": r["stop"]})
    return rows


def plot_model(rows: Sequence[dict[str, Any]], model: str, path: Path, device: str, preset: str = "") -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    mine = [r for r in rows if r["model"] == model]
    for setting in dict.fromkeys(r["setting"] for r in mine):
        pts = [r for r in mine if r["setting"] == setting]
        if pts[0]["search"] == ALPHA:
            xs = [max(p["seconds"], 1e-3) for p in pts]
            ax.step(xs, [p["best_us"] for p in pts], where="post", label=f"α search {setting} ({preset})"
                    if preset else f"α search {setting}")
            ax.plot(xs[-1:], [pts[-1]["best_us"]], "o", color=ax.lines[-1].get_color(), ms=4)
        else:
            pts = sorted(pts, key=lambda p: p["seconds"])
            ax.plot([p["seconds"] for p in pts], [p["best_us"] for p in pts], "s--", ms=4, label=f"e-graph {setting}")
    ax.axhline(mine[0]["original_us"], color="grey", lw=0.8, ls=":", label="input")
    ax.set_xscale("log")
    ax.set_xlabel("search seconds (log)")
    ax.set_ylabel("best cost found (µs)")
    ax.set_title(f"{model} on {device}: best cost vs search time")
    ax.legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, path, dpi=120)
    plt.close(fig)


def run(models: Sequence[str] | None, device: str, out: Path, *, seed: int = 0, budget: int = 1000,
        options: RunOptions = RunOptions(), command: str = "",
        preset: str | None = None) -> list[dict[str, Any]]:
    models = check_models(models or BUDGET_MODELS)
    results = run_cells(cells(models, device, seed, budget, alpha_preset(preset)), out, options=options, desc="budget")
    rows = curve_rows(results)
    named = preset or get_search(ALPHA).default_preset
    write_table(out, "budget", rows, {"command": command, "device": device, "alpha_preset": named})
    for m in models:
        plot_model(rows, m, out / f"budget_{m}.png", device, named)
        mine = [r for r in rows if r["model"] == m]
        finals: dict[str, dict[str, Any]] = {}
        for r in mine:
            key = r["setting"] + ("" if r["search"] == ALPHA else f" iters={r['iterations']} nodes={r['nodes']}")
            finals[key] = r
        print(f"{m} on {device} (input {mine[0]['original_us']:.1f} µs):")
        for key, r in finals.items():
            print(f"  {r['search']:5s} {key:34s} best {r['best_us']:8.1f} µs after {r['seconds']:7.2f} s")
    print(f"wrote {out / 'budget.csv'}, {out / 'budget.json'} and one budget_<model>.png per model")
    return rows


def _add_arguments(p: argparse.ArgumentParser) -> None:
    add_models(p, "the case studies")
    p.add_argument(
        "--budget", type=non_negative(int), default=1000,
        help="α search: largest budget (its trace gives the smaller ones)"
    )
    add_alpha_preset(p)
    add_sweep_options(p, "results/budget")


def _run(args: argparse.Namespace) -> int:
    run(
        split_list(args.models) or None,
        args.device,
        Path(args.out),
        seed=args.seed,
        budget=args.budget,
        preset=args.preset,
        **sweep_kwargs(args),
    )
    return 0


EXPERIMENTS = (
    Experiment(
        "budget", "best cost vs search time: α in {1, 1.05, 1.3, 1.5}, e-graph limits x k_multi", _add_arguments, _run,
        outputs=("budget.csv", "budget.json", "budget_<model>.png"),
        doc="README.md#search-budget",
    ),
)
