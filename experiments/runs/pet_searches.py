"""``eqsat-lab experiment pet-searches``: TASO, TENSAT, PET and TENSAT with PET on PET's models.

Each cell runs one search (``taso``, ``eqsat``, ``pet`` or ``eqsat+pet``, the e-graph with PET's
transformations as graph-level rewrites inside it; all from :data:`experiments.searches.SEARCHES`)
on one model for one device, verified like every search. One table per device: the best cost,
the search time, the PET transformations chosen and the share of the output their corrections
recompute, and for a search with PET inside the alternative priced nearest the conv it replaces.
PET's models: ResNet-18's last stage and CSRNet's back-end (the layers PET's paper transforms),
Inception-v3, BERT and ResNeXt-50.
"""
from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from eqsat.cost.devices import DEFAULT_DEVICE, HYPOGPU
from experiments.command import (
    Experiment,
    add_models,
    add_sweep_options,
    device_list,
    positive_seconds,
    split_list,
    sweep_kwargs,
)
from experiments.compare import check_models
from experiments.output import write_table
from experiments.searches import ALPHA, ALPHA_PET, EGRAPH, EGRAPH_PET, PET, SEARCHES
from experiments.sweep import Cell, RunOptions, run_cells

PET_SEARCHES = (ALPHA, EGRAPH, PET, EGRAPH_PET)
DEVICES = (DEFAULT_DEVICE, HYPOGPU.name)
QUICK_MODELS = ("resnet18_stage4",)


def pet_choices(row: dict[str, Any]) -> list[dict[str, Any]]:
    """The PET transformations a result row chose: PET's own, or a graph-level rewrite's (TENSAT or
    TASO with PET inside)."""
    return row.get("chosen", [])


def table_row(row: dict[str, Any], device: str) -> dict[str, Any]:
    chosen = pet_choices(row)
    return {"device": device, "model": row["model"], "search": row["search"], "input_us": round(row["original_us"], 2),
            "best_us": round(row["best_us"], 2), "speedup_pct": round(row["speedup_pct"], 1),
            "search_s": round(row["search_s"], 2), "stop": row["stop"],
            "kept": (row.get("kept") or {}).get("guard", ""),
            "pet_transformations": "; ".join(f"{c['where'] if 'where' in c else 'layer ' + str(c['layer'])}: "
                                             f"{c['transformation']}" for c in chosen),
            "corrected_share": round(sum(c["overhead"] for c in chosen) / len(chosen), 4) if chosen else 0.0,
            **closest_columns(row.get("closest_alternative"))}


def closest_columns(closest: dict[str, Any] | None) -> dict[str, Any]:
    """The PET alternative priced nearest the conv it replaces (alone: its own nodes against the
    conv): why none was taken, or by how much one paid."""
    if not closest:
        return {"closest_pet": "", "closest_pet_us": None, "closest_conv_us": None}
    return {"closest_pet": f"{closest['where']}: {closest['transformation']}",
            "closest_pet_us": round(closest["alternative_us"], 3), "closest_conv_us": round(closest["node_us"], 3)}


def format_tables(rows: Sequence[dict[str, Any]]) -> str:
    lines = []
    for device in dict.fromkeys(r["device"] for r in rows):
        lines.append(f"device {device}: best cost (µs), search seconds, PET transformations and corrected share")
        lines.append(f"  {'model':16s} {'search':10s} {'input':>10s} {'best':>10s} {'gain %':>7s} {'s':>7s}  PET")
        for r in (r for r in rows if r["device"] == device):
            pet = f"{r['pet_transformations']} ({r['corrected_share']:.1%} corrected)" if r["pet_transformations"] \
                else "-"
            if r["pet_transformations"] and r.get("kept"):
                pet += " then the input kept (see stop)"
            if r["closest_pet"]:
                pet += (f"; nearest: {r['closest_pet']} {r['closest_pet_us']:.2f} µs for a conv of "
                        f"{r['closest_conv_us']:.2f} µs")
            lines.append(f"  {r['model']:16s} {r['search']:10s} {r['input_us']:10.2f} {r['best_us']:10.2f} "
                         f"{r['speedup_pct']:7.1f} {r['search_s']:7.2f}  {pet}")
    return "\n".join(lines)


def run(models: Sequence[str] | None, out: Path, *, searches: Sequence[str] = PET_SEARCHES,
        devices: Sequence[str] = DEVICES, quick: bool = False, seed: int = 0, alpha_time_limit: float | None = None,
        options: RunOptions = RunOptions(), command: str = "") -> list[dict[str, Any]]:
    """Every search on every model for every device; ``alpha_time_limit`` caps each α search
    (``taso``, ``taso+pet``) at that many seconds instead of its preset's 120 s, so the whole table
    fits a shorter run (the cap is part of the cell, so a capped cell is never mistaken for a full one)."""
    from eqsat.cost.registry import check_device
    from eqsat.models import PET_MODELS
    from experiments.searches import get_search

    models = check_models(models or (QUICK_MODELS if quick else PET_MODELS))
    for s in searches:
        get_search(s)  # unknown names fail here, before any cell runs
    for d in devices:
        check_device(d)
    def capped(search: str) -> dict[str, float]:
        alpha = SEARCHES[search].target == SEARCHES[ALPHA].target
        return {"time_limit": alpha_time_limit} if alpha and alpha_time_limit is not None else {}

    cells = [Cell.of("pet-searches", "experiments.searches:run_search", model=m, search=s, device=d, seed=seed,
                     quick=quick, **capped(s)) for d in devices for m in models for s in searches]
    results = run_cells(cells, out, options=options, desc="pet-searches")
    rows = [table_row(r, c.kwargs["device"]) for r, c in zip(results, cells)]
    write_table(out, "pet_searches", rows, {"command": command, "quick": quick, "alpha_time_limit": alpha_time_limit})
    print(format_tables(rows))
    print(f"wrote {out / 'pet_searches.csv'} and {out / 'pet_searches.json'}")
    return rows


def _add_arguments(p: argparse.ArgumentParser) -> None:
    add_models(p, "PET's models: " + "resnet18_stage4, csrnet_backend, inception_v3, bert, resnext50")
    p.add_argument("--searches", default=",".join(PET_SEARCHES), help="comma-separated searches")
    p.add_argument("--devices", type=device_list, default=",".join(DEVICES),
                   help="comma-separated devices (a roofline, hypogpu[:...] tuned, ort-cpu measured)")
    p.add_argument("--quick", action="store_true", help="smoke presets on ResNet-18's last stage")
    p.add_argument("--alpha-time-limit", type=positive_seconds, default=None,
                   help=f"seconds each α search ({ALPHA}, {ALPHA_PET}) may run (default: its preset's cap, 120 s)")
    add_sweep_options(p, "results/pet_searches", device=False)


def _run(args: argparse.Namespace) -> int:
    run(split_list(args.models) or None, Path(args.out), searches=split_list(args.searches),
        devices=split_list(args.devices), quick=args.quick, seed=args.seed, alpha_time_limit=args.alpha_time_limit,
        **sweep_kwargs(args))
    return 0


EXPERIMENTS = (Experiment("pet-searches", "TASO, TENSAT, PET and TENSAT with PET on PET's models, one table per device",
                          _add_arguments, _run, outputs=("pet_searches.csv", "pet_searches.json"),
                          doc="pet_searches/README.md"),)
