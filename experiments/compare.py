"""``eqsat-lab compare``: TENSAT-style equality saturation vs TASO-style α-backtracking, in two tables.

By default the two searches do not read the same rules: the α search reads the full generated
sets (one α step applies one rule, and the rules minimization drops are its shortcuts) and the
e-graph the minimized ones (saturation re-derives the rest). So the job reports both: table
``own``, each search on its own default rules, and table ``same``, both searches on the same
rules (the e-graph's, or ``--rules``). A run that is the same in both tables (a search whose own
rules are the shared ones) is one cell, run once. Each (model, search, rules) is one cell
(:mod:`experiments.sweep`), so an interrupted run resumes from its output folder.

Each table gives, per model, the original cost, each search's best cost, speedup and seconds
(marked where the search stopped at its time limit), the ratio of search times (α search /
e-graph), and below it the geometric mean of that ratio and how many models the e-graph found a
better, equal or worse best graph for.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eqsat.rules.rulesets import default_rules
from experiments.output import pyplot, save_figure, write_table
from experiments.searches import ALPHA, EGRAPH, SEARCHES, alpha_preset, get_search
from experiments.sweep import Cell, RunOptions, run_cells

COMPARE_MODELS = ("resnet_block", "qkv", "lora", "bert", "nasrnn", "resnext50", "nasnet_a", "inception_v3",
                  "squeezenet", "vgg19")
QUICK_MODELS = ("qkv", "lora")
TENSAT_SUITE = ("bert", "resnext50", "nasnet_a", "nasrnn", "inception_v3", "squeezenet", "vgg19")
PAIR = (ALPHA, EGRAPH)  # time ratio = first's seconds / second's; best costs: second's against first's
TIME_LIMIT_MARK = "T"


@dataclass(frozen=True)
class Table:
    """One comparison: a file stem, a title, and the rule sets each search reads (None: its own)."""

    stem: str
    title: str
    rules: Mapping[str, tuple[str, ...] | None]


def tables(rules: Sequence[str] | None = None) -> tuple[Table, Table]:
    """Each search on its own rules; both on ``rules`` (default: the e-graph's own sets)."""
    shared = tuple(rules) if rules else get_search(EGRAPH).default_rule_sets
    same = {s: None if shared == get_search(s).default_rule_sets else shared for s in PAIR}
    return (Table("compare", "each search on its own default rules", {s: None for s in PAIR}),
            Table("compare_same_rules", "both searches on the same rules", same))


def rule_sets(table: Table, search: str) -> tuple[str, ...]:
    return table.rules[search] or get_search(search).default_rule_sets


def cell(model: str, search: str, rules: tuple[str, ...] | None, device: str, seed: int, quick: bool,
         preset: str | None = None) -> Cell:
    extra = {} if rules is None else {"rules": ",".join(rules)}  # a search on its own rules keeps its old key
    if preset is not None and search == ALPHA:  # the α search's named preset; the default keeps the old key
        extra["preset"] = preset
    return Cell.of("compare", "experiments.searches:run_search", model=model, search=search, device=device,
                   seed=seed, quick=quick, **extra)


def cells(models: Sequence[str], device: str, seed: int, quick: bool, table: Table,
          preset: str | None = None) -> list[Cell]:
    return [cell(m, s, table.rules[s], device, seed, quick, preset) for m in models for s in PAIR]


def versus(challenger_us: float, baseline_us: float) -> str:
    """``better``, ``equal`` or ``worse``: the challenger's best cost against the baseline's."""
    if math.isclose(challenger_us, baseline_us, rel_tol=1e-6, abs_tol=1e-6):
        return "equal"
    return "better" if challenger_us < baseline_us else "worse"


def row_from(model: str, runs: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    """One model's row of a table from its two runs (one per search of ``PAIR``)."""
    first, second = (runs[s] for s in PAIR)
    row: dict[str, Any] = {"model": model, "ops": first["ops"], "original_us": first["original_us"]}
    for s in PAIR:
        r = runs[s]
        row |= {f"{s}_us": r["best_us"], f"{s}_speedup_pct": r["speedup_pct"], f"{s}_s": r["search_s"],
                f"{s}_stop": r["stop"], f"{s}_time_limit": bool(r.get("time_bounded"))}
    row["time_ratio"] = first["search_s"] / max(second["search_s"], 1e-9)
    row[f"{PAIR[1]}_vs_{PAIR[0]}"] = versus(second["best_us"], first["best_us"])
    row["verified"] = bool(first["verified"] and second["verified"])
    return row


def check_models(models: Sequence[str]) -> list[str]:
    """The model names, or a ValueError naming the unknown ones (before any cell runs)."""
    from eqsat.models import MODELS

    unknown = [m for m in models if m not in MODELS]
    if unknown:
        raise ValueError(f"unknown model(s) {', '.join(unknown)}; choose from {', '.join(MODELS)}")
    return list(models)


def geomean(values: Sequence[float]) -> float:
    values = [v for v in values if v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def summary(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """A table's bottom line: the geometric-mean time ratio (all models, TENSAT's suite), the
    best-cost comparison, the cells that stopped at their time limit, and whether all verified."""
    verdicts = [r[f"{PAIR[1]}_vs_{PAIR[0]}"] for r in rows]
    return {"geomean_time_ratio": geomean([r["time_ratio"] for r in rows]),
            "geomean_time_ratio_tensat_suite": geomean([r["time_ratio"] for r in rows if r["model"] in TENSAT_SUITE]),
            "tensat_suite_models": sum(r["model"] in TENSAT_SUITE for r in rows),
            **{k: verdicts.count(k) for k in ("better", "equal", "worse")},
            "time_limit_cells": sum(r[f"{s}_time_limit"] for r in rows for s in PAIR),
            "all_verified": all(r["verified"] for r in rows)}


def header(table: Table, index: int, device: str, counts: Mapping[tuple[str, ...], int]) -> list[str]:
    """The title, and which rules each search read (with their counts)."""
    lines = [f"Table {index} of 2 ({table.stem}), device {device}: {table.title}"]
    for s in PAIR:
        sets = rule_sets(table, s)
        lines.append(f"  {SEARCHES[s].label} ({s}): {' '.join(sets)} ({counts[sets]:,} rules)")
    return lines


def format_table(table: Table, index: int, rows: Sequence[dict[str, Any]], device: str,
                 counts: Mapping[tuple[str, ...], int]) -> str:
    a, e = PAIR
    head = (f"{'model':13s} {'orig µs':>9s} | {a + ' µs':>9s} {'%':>6s} {'s':>9s} | "
            f"{e + ' µs':>9s} {'%':>6s} {'s':>9s} | {'time ratio':>10s} {'best':>6s}")
    lines = header(table, index, device, counts) + [head, "-" * len(head)]
    for r in rows:
        cols = [f"{r[f'{s}_us']:9.1f} {r[f'{s}_speedup_pct']:6.1f} {r[f'{s}_s']:7.2f} "
                f"{TIME_LIMIT_MARK if r[f'{s}_time_limit'] else ' '}" for s in PAIR]
        lines.append(f"{r['model']:13s} {r['original_us']:9.1f} | {cols[0]} | {cols[1]} | "
                     f"{r['time_ratio']:9.3g}x {r[f'{e}_vs_{a}']:>6s}")
    lines.append("-" * len(head))
    s = summary(rows)
    suite = (f" (TENSAT's {s['tensat_suite_models']} suite models: {s['geomean_time_ratio_tensat_suite']:.3g}x)"
             if 0 < s["tensat_suite_models"] < len(rows) else "")
    lines.append(f"geometric mean of the search-time ratio ({a} s / {e} s): {s['geomean_time_ratio']:.3g}x{suite}")
    lines.append(f"best cost, {e} against {a}: better on {s['better']}, equal on {s['equal']}, worse on "
                 f"{s['worse']} of {len(rows)} models; {TIME_LIMIT_MARK}: stopped at its time limit "
                 f"({s['time_limit_cells']} cells); all results verified: {s['all_verified']}")
    return "\n".join(lines)


def plot(rows: Sequence[dict[str, Any]], path: Path, title: str) -> None:
    """Paired bars: speedup % and search seconds (log) per model."""
    plt = pyplot()
    x = list(range(len(rows)))
    w = 0.4
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(max(6.0, 0.9 * len(rows) + 2), 6.5), sharex=True)
    for k, s in enumerate(PAIR):
        xs = [i + (k - 0.5) * w for i in x]
        ax1.bar(xs, [r[f"{s}_speedup_pct"] for r in rows], w, label=SEARCHES[s].label)
        bars = ax2.bar(xs, [r[f"{s}_s"] for r in rows], w)
        for bar, r in zip(bars, rows):
            if r[f"{s}_time_limit"]:
                bar.set_hatch("//")  # stopped at its time limit, as the tables' T
    ax1.set_ylabel("speedup over input (%)")
    ax1.legend(fontsize=8)
    ax1.set_title(title, fontsize=10)
    ax2.set_yscale("log")
    ax2.set_ylabel("search seconds (log; hatched: time limit)")
    ax2.set_xticks(x, [r["model"] for r in rows], rotation=30, ha="right")
    fig.tight_layout()
    save_figure(fig, path, dpi=120)
    plt.close(fig)


def run(
    models: Sequence[str] | None,
    device: str,
    out: Path,
    *,
    quick: bool = False,
    seed: int = 0,
    options: RunOptions = RunOptions(),
    command: str = "",
    rules: Sequence[str] | None = None,
    preset: str | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """Both tables: their rows by file stem; writes ``<stem>.csv``/``.json``/``.png`` for each
    (``preset``: the α search's, default its paper preset)."""
    models = check_models(models or (QUICK_MODELS if quick else COMPARE_MODELS))
    preset = alpha_preset(preset)
    both = tables(rules)
    counts = {sets: len(default_rules(sets)) for t in both for sets in (rule_sets(t, s) for s in PAIR)}
    todo = list(dict.fromkeys(c for t in both for c in cells(models, device, seed, quick, t, preset)))
    done = dict(zip(todo, run_cells(todo, out, options=options, desc="compare")))
    written: dict[str, list[dict[str, Any]]] = {}
    named = "quick" if quick else preset or get_search(ALPHA).default_preset
    print(f"{SEARCHES[ALPHA].label} ({ALPHA}): preset {named}")
    for index, t in enumerate(both, 1):
        runs = [done[c] for c in cells(models, device, seed, quick, t, preset)]
        by = {(r["model"], r["search"]): r for r in runs}
        rows = [row_from(m, {s: by[(m, s)] for s in PAIR}) for m in models]
        print(format_table(t, index, rows, device, counts) + "\n")
        extra = {"command": command, "device": device, "table": t.title,
                 "alpha_preset": named,
                 "rules": {s: list(rule_sets(t, s)) for s in PAIR}, **summary(rows), "runs": runs}
        write_table(out, t.stem, rows, extra)
        plot(rows, out / f"{t.stem}.png", f"{t.title} on {device}")
        written[t.stem] = rows
    print("wrote " + ", ".join(f"{out / t.stem}.csv/.json/.png" for t in both))
    return written
