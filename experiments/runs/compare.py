"""``eqsat-lab compare``: TENSAT-style equality saturation vs TASO-style α-backtracking.

Each (model, search) pair is one cell (:mod:`experiments.sweep`), so an interrupted run resumes
from its output folder. The table gives the original cost, each search's best cost, speedup and
search seconds, the ratio of search times (α search / e-graph) and their geometric mean.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from experiments.output import pyplot, save_figure, write_table
from experiments.sweep import Cell, run_cells

COMPARE_MODELS = ("resnet_block", "qkv", "lora", "bert", "nasrnn", "resnext50", "nasnet_a", "inception_v3",
                  "squeezenet", "vgg19")
QUICK_MODELS = ("qkv", "lora")
TENSAT_SUITE = ("bert", "resnext50", "nasnet_a", "nasrnn", "inception_v3", "squeezenet", "vgg19")
SEARCHES = ("taso", "eqsat")


@dataclass(frozen=True)
class CompareRow:
    model: str
    ops: int
    original_us: float
    taso_us: float
    taso_speedup_pct: float
    taso_s: float
    taso_expanded: int
    taso_stop: str
    eqsat_us: float
    eqsat_speedup_pct: float
    eqsat_s: float
    eqsat_enodes: int
    eqsat_stop: str
    time_ratio: float  # α search seconds / e-graph seconds (> 1: the e-graph was faster)
    eqsat_not_worse: bool
    verified: bool


def cells(models: Sequence[str], device: str, seed: int, quick: bool,
          rules: Sequence[str] | None = None) -> list[Cell]:
    extra = {} if rules is None else {"rules": ",".join(rules)}  # the default cells keep their keys
    return [Cell.of("compare", "experiments.searches:run_search", model=m, search=s, device=device, seed=seed,
                    quick=quick, **extra) for m in models for s in SEARCHES]


def rows_from(results: Sequence[dict[str, Any]]) -> list[CompareRow]:
    by = {(r["model"], r["search"]): r for r in results}
    rows = []
    for model in dict.fromkeys(r["model"] for r in results):
        t, e = by[(model, "taso")], by[(model, "eqsat")]
        rows.append(CompareRow(
            model=model, ops=t["ops"], original_us=t["original_us"], taso_us=t["best_us"],
            taso_speedup_pct=t["speedup_pct"], taso_s=t["search_s"], taso_expanded=t["expanded"], taso_stop=t["stop"],
            eqsat_us=e["best_us"], eqsat_speedup_pct=e["speedup_pct"], eqsat_s=e["search_s"],
            eqsat_enodes=e["enodes"], eqsat_stop=e["stop"], time_ratio=t["search_s"] / max(e["search_s"], 1e-9),
            eqsat_not_worse=e["best_us"] <= t["best_us"] + 1e-6, verified=bool(t["verified"] and e["verified"])))
    return rows


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


def format_table(rows: Sequence[CompareRow], device: str) -> str:
    head = (f"{'model':13s} {'orig µs':>9s} | {'TASO µs':>9s} {'%':>6s} {'s':>7s} | "
            f"{'TENSAT µs':>9s} {'%':>6s} {'s':>7s} | {'time ratio':>10s}")
    lines = [f"device {device}: TASO α-backtracking vs TENSAT equality saturation (same rules and cost model)",
             head, "-" * len(head)]
    for r in rows:
        mark = ("" if r.eqsat_not_worse else "  (e-graph worse)") + (
            "  (α: time limit)" if r.taso_stop == "time limit" else ""
        )
        lines.append(
            f"{r.model:13s} {r.original_us:9.1f} | {r.taso_us:9.1f} {r.taso_speedup_pct:6.1f} {r.taso_s:7.2f} | "
            f"{r.eqsat_us:9.1f} {r.eqsat_speedup_pct:6.1f} {r.eqsat_s:7.2f} | {r.time_ratio:9.3g}x{mark}"
        )
    lines.append("-" * len(head))
    suite = [r.time_ratio for r in rows if r.model in TENSAT_SUITE]
    if suite and len(suite) < len(rows):
        lines.append(
            f"geometric mean of the search-time ratio over TENSAT's {len(suite)} suite models: {geomean(suite):.3g}x"
        )
    lines.append(
        f"geometric mean of the search-time ratio (TASO s / TENSAT s): {geomean([r.time_ratio for r in rows]):.3g}x; "
        f"e-graph best <= α search best on {sum(r.eqsat_not_worse for r in rows)}/{len(rows)} models; "
        f"all results verified: {all(r.verified for r in rows)}"
    )
    return "\n".join(lines)


def plot(rows: Sequence[CompareRow], path: Path, device: str) -> None:
    """Paired bars: speedup % and search seconds (log) per model."""
    plt = pyplot()
    names = [r.model for r in rows]
    x = list(range(len(rows)))
    w = 0.4
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(max(6.0, 0.9 * len(rows) + 2), 6.5), sharex=True)
    ax1.bar([i - w / 2 for i in x], [r.taso_speedup_pct for r in rows], w, label="TASO α-search (α=1.05)")
    ax1.bar([i + w / 2 for i in x], [r.eqsat_speedup_pct for r in rows], w, label="TENSAT e-graph (merges by need)")
    ax1.set_ylabel("speedup over input (%)")
    ax1.legend(fontsize=8)
    ax1.set_title(f"Best graph found and search time on {device}")
    ax2.bar([i - w / 2 for i in x], [r.taso_s for r in rows], w)
    ax2.bar([i + w / 2 for i in x], [r.eqsat_s for r in rows], w)
    ax2.set_yscale("log")
    ax2.set_ylabel("search seconds (log)")
    ax2.set_xticks(x, names, rotation=30, ha="right")
    fig.tight_layout()
    save_figure(fig, path, dpi=120)
    plt.close(fig)


def write_outputs(
    rows: Sequence[CompareRow], results: Sequence[dict[str, Any]], out: Path, device: str, command: str
) -> None:
    write_table(
        out,
        "compare",
        [asdict(r) for r in rows],
        {
            "command": command,
            "device": device,
            "geomean_time_ratio": geomean([r.time_ratio for r in rows]),
            "geomean_time_ratio_tensat_suite": geomean([r.time_ratio for r in rows if r.model in TENSAT_SUITE]),
            "runs": list(results),
        },
    )
    plot(rows, out / "compare.png", device)


def run(
    models: Sequence[str] | None,
    device: str,
    out: Path,
    *,
    quick: bool = False,
    seed: int = 0,
    workers: int = 1,
    executor: str = "local",
    progress: bool = True,
    command: str = "",
    rules: Sequence[str] | None = None,
) -> list[CompareRow]:
    models = check_models(models or (QUICK_MODELS if quick else COMPARE_MODELS))
    if rules is not None:
        from eqsat.rules.rulesets import default_rules

        default_rules(rules)  # an unknown set or unreadable file is one error before any cell runs
    results = run_cells(
        cells(models, device, seed, quick, rules), out, workers=workers, executor=executor, progress=progress,
        desc="compare",
    )
    rows = rows_from(results)
    print(format_table(rows, device))
    write_outputs(rows, results, out, device, command)
    print(f"wrote {out / 'compare.csv'}, {out / 'compare.json'} and {out / 'compare.png'}")
    return rows
