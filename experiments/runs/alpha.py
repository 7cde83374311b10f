"""``eqsat-lab experiment alpha``: graphs expanded and final cost against α on the case studies.

α trades search effort for the ability to climb: a rewrite that makes the graph up to α times
worse stays in the queue. The case studies need 1.31× (ResNet), 1.11× (QKV) and 1.27× (LoRA)
on h100, so each final cost drops at its own α while the expansions grow.
"""
from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from experiments.command import (
    Experiment,
    add_models,
    add_sweep_options,
    list_of,
    non_negative,
    number_in,
    split_list,
    sweep_kwargs,
)
from experiments.compare import check_models
from experiments.output import pyplot, save_figure, write_table
from experiments.searches import ALPHA, add_alpha_preset, alpha_preset, get_search
from experiments.sweep import Cell, RunOptions, run_cells

ALPHA_MODELS = ("resnet_block", "qkv", "lora")
ALPHAS = (1.0, 1.02, 1.05, 1.1, 1.2, 1.3, 1.4, 1.5, 1.75, 2.0)


def cells(models: Sequence[str], device: str, seed: int, budget: int, alphas: Sequence[float],
          preset: str | None = None) -> list[Cell]:
    named = {} if preset is None else {"preset": preset}  # the default preset's cells keep their old keys
    return [Cell.of("alpha", "experiments.searches:run_search", model=m, search=ALPHA, device=device, seed=seed,
                    alpha=a, budget=budget, **named) for m in models for a in alphas]


def plot(rows: Sequence[dict[str, Any]], path: Path, device: str, preset: str = "") -> None:
    plt = pyplot()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    for m in dict.fromkeys(r["model"] for r in rows):
        mine = [r for r in rows if r["model"] == m]
        ax1.plot([r["alpha"] for r in mine], [r["expanded"] for r in mine], "o-", label=m)
        ax2.plot([r["alpha"] for r in mine], [r["best_us"] / r["original_us"] for r in mine], "o-", label=m)
    ax1.set_yscale("log")
    ax1.set_xlabel("α")
    ax1.set_ylabel("graphs expanded (log)")
    ax2.set_xlabel("α")
    ax2.set_ylabel("final cost / input cost")
    ax1.legend(fontsize=8)
    fig.suptitle(f"α-backtracking on {device}" + (f", preset {preset}" if preset else ""))
    fig.tight_layout()
    save_figure(fig, path, dpi=120)
    plt.close(fig)


def run(models: Sequence[str] | None, device: str, out: Path, *, seed: int = 0, budget: int = 1000,
        alphas: Sequence[float] = ALPHAS, options: RunOptions = RunOptions(),
        command: str = "", preset: str | None = None) -> list[dict[str, Any]]:
    models = check_models(models or ALPHA_MODELS)
    results = run_cells(cells(models, device, seed, budget, alphas, alpha_preset(preset)), out, options=options,
                        desc="alpha")
    named = preset or get_search(ALPHA).default_preset
    rows = [{"model": r["model"], "preset": named, "alpha": r["alpha"], "budget": r["budget"],
             "expanded": r["expanded"],
             "generated": r["generated"], "original_us": r["original_us"], "best_us": round(r["best_us"], 3),
             "speedup_pct": round(r["speedup_pct"], 2), "search_s": round(r["search_s"], 4), "stop": r["stop"]}
            for r in results]
    write_table(out, "alpha", rows, {"command": command, "device": device, "preset": named})
    plot(rows, out / "alpha.png", device, named)
    print(f"{'model':13s} {'α':>5s} {'expanded':>9s} {'best µs':>9s} {'s':>7s}  stop")
    for r in rows:
        print(
            f"{r['model']:13s} {r['alpha']:5.2f} {r['expanded']:9d} {r['best_us']:9.1f} {r['search_s']:7.2f}  "
            f"{r['stop']}"
        )
    print(f"wrote {out / 'alpha.csv'}, {out / 'alpha.json'} and {out / 'alpha.png'}")
    return rows


def _add_arguments(p: argparse.ArgumentParser) -> None:
    add_models(p, "the case studies")
    p.add_argument("--budget", type=non_negative(int), default=1000, help="α search budget")
    p.add_argument("--alphas", type=list_of(number_in(float, 0, 1e6, above=True), empty=True), default="",
                   help="comma-separated α values (default 1.0 ... 2.0)")
    add_alpha_preset(p)
    add_sweep_options(p, "results/alpha")


def _run(args: argparse.Namespace) -> int:
    alphas = tuple(float(a) for a in split_list(args.alphas)) or ALPHAS
    run(
        split_list(args.models) or None,
        args.device,
        Path(args.out),
        seed=args.seed,
        budget=args.budget,
        alphas=alphas,
        preset=args.preset,
        **sweep_kwargs(args),
    )
    return 0


EXPERIMENTS = (Experiment("alpha", "graphs expanded and final cost against α", _add_arguments, _run,
                          outputs=("alpha.csv", "alpha.json", "alpha.png"), doc="README.md#α"),)
