"""How a run's cost grows with a model's depth: a straight line fitted per model and search, the
cost of each added layer between consecutive depths, and the curve.

Linear growth means every added layer costs the same; the per-layer cost between the deepest
pair of depths against that between the shallowest pair says where it is not (a ratio near 1:
linear; well above 1: each layer costs more the deeper the model).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from eqsat.files import write_atomic
from experiments.output import pyplot, save_figure

MEASURES = (("wall_s", "wall s"), ("cpu_s", "CPU s"), ("peak_mb", "peak MB"))


@dataclass(frozen=True)
class Fit:
    """``value ~ intercept + slope * layers`` over the depths run, its R^2, and the per-layer cost
    between the deepest pair of depths over that between the shallowest (``curvature``)."""

    slope: float
    intercept: float
    r2: float
    curvature: float

    def describe(self, unit: str) -> str:
        if not np.isfinite(self.curvature):
            shape = "no growth between the two shallowest depths"
        elif self.curvature <= 1.5:
            shape = "linear"
        else:
            shape = (f"super-linear: a layer between the deepest two depths costs {self.curvature:.1f}x "
                     "one between the shallowest")
        return f"{self.intercept:.2f} + {self.slope:.3f} {unit}/layer (R^2 {self.r2:.3f}; {shape})"


def fit(layers: Sequence[int], values: Sequence[float]) -> Fit | None:
    """The least-squares line through (layers, values); None below three depths."""
    if len(set(layers)) < 3:
        return None
    x, y = np.asarray(layers, dtype=float), np.asarray(values, dtype=float)
    order = np.argsort(x)
    x, y = x[order], y[order]
    slope, intercept = np.polyfit(x, y, 1)
    residual = float(np.sum((y - (intercept + slope * x)) ** 2))
    total = float(np.sum((y - y.mean()) ** 2))
    first, last = (y[1] - y[0]) / (x[1] - x[0]), (y[-1] - y[-2]) / (x[-1] - x[-2])
    curvature = last / first if first > 0 else float("nan")
    return Fit(float(slope), float(intercept), 1.0 - residual / total if total > 0 else 1.0, float(curvature))


def series(rows: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str], list[Mapping[str, Any]]]:
    """The finished rows with a layer count, by (model, search), shallowest first."""
    out: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for r in rows:
        if r.get("layers") and "error" not in r:
            out.setdefault((r["model"], r["search"]), []).append(r)
    return {k: sorted(v, key=lambda r: r["layers"]) for k, v in out.items()}


def fits(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """One line per model, search and measure: the fitted line and whether growth is linear."""
    lines = []
    for (model, search), got in series(rows).items():
        for key, label in MEASURES:
            found = fit([r["layers"] for r in got], [r[key] for r in got])
            if found is not None:
                capped = sum(bool(r.get("time_bounded")) for r in got)
                note = f" [the search stopped at its time limit at {capped} of {len(got)} depths]" if capped else ""
                lines.append(f"{model}, {search}, {label}: {found.describe(label.split()[-1])}{note}")
    return lines


def write_markdown(path: Path, rows: Sequence[Mapping[str, Any]], command: str, notes: Sequence[str] = ()) -> None:
    """The table (with each phase's median seconds), the command that made it, ``notes`` and the
    fits, as Markdown."""
    cols = ["cell", "search", "runs", "wall_s", "cpu_s", "peak_mb", "load_min", "load_max", "speedup_pct", "best_us",
            "search_s", "tensat_s", "vs_tensat", "startup_s", "parse_s", "compile_s", "load_s", "saturate_s",
            "extract_s", "verify_s", "stop", "error"]
    cols = [c for c in cols if any(c in r for r in rows)]
    lines = [f"`{command}`", "", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        cells = [r.get(c, "") for c in cols]
        lines.append("| " + " | ".join(_cell(c, v) for c, v in zip(cols, cells)) + " |")
    lines += ["", *[f"- {line}" for line in [*notes, *fits(rows)]]]
    write_atomic(path, "\n".join(lines) + "\n")


def _cell(col: str, v: Any) -> str:
    """A phase's or a search's seconds to the hundredth (a small model's phases are tenths), else one decimal."""
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.2f}" if col.endswith("_s") or col == "vs_tensat" else f"{v:.1f}"
    return str(v)


def plot_growth(path: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    """Wall seconds, CPU seconds and peak MB against layers, one line per model and search."""
    plt = pyplot()
    fig, axes = plt.subplots(1, len(MEASURES), figsize=(5 * len(MEASURES), 4))
    for (model, search), got in series(rows).items():
        for ax, (key, label) in zip(axes, MEASURES):
            ax.plot([r["layers"] for r in got], [r[key] for r in got], marker="o", label=f"{model} {search}")
            ax.set_xlabel("layers")
            ax.set_ylabel(label)
    axes[0].legend()
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)
