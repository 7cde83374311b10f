"""``eqsat-lab experiment walltime``: the wall time a user waits for ``eqsat-lab optimize MODEL
--search eqsat``.

Each run is a fresh ``eqsat-lab`` process, as a user starts it: interpreter, imports, the model,
the search, the check of the result and the exit. One warm-up run per model fills the disk caches
(parsed and compiled rules), so the timed runs are second runs. Models are timed round-robin so a
slow spell of the machine hits every model alike; the median and the spread of the runs are
reported with the phase report of the median run, against the targets in ``TARGETS_S``.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from experiments.command import split_list
from experiments.output import write_table
from experiments.runs.compare import check_models
from experiments.searches import EGRAPH

TARGETS_S = {"squeezenet": 2.0, "bert": 3.0}


def one_run(model: str, json_path: Path) -> tuple[float, dict[str, float]]:
    """Wall seconds of one optimize process, and its phase report."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "experiments.cli", "optimize", model, "--search", EGRAPH,
                           "--json", str(json_path)], capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"optimize {model} failed: {done.stderr.strip()}")
    return wall, json.loads(json_path.read_text())["phases"]


def run(models: Sequence[str], runs: int, out: Path) -> list[dict[str, Any]]:
    """The median wall time of ``runs`` optimize processes per model; writes ``bench_walltime.csv``/``.json``."""
    check_models(models)
    walls: dict[str, list[tuple[float, dict[str, float]]]] = {m: [] for m in models}
    with tempfile.TemporaryDirectory() as tmp:
        for m in models:
            one_run(m, Path(tmp) / "warm.json")  # fills the rule caches: the timed runs are second runs
        for _ in range(runs):
            for m in models:
                walls[m].append(one_run(m, Path(tmp) / f"{m}.json"))
    rows = []
    for m in models:
        ordered = sorted(walls[m], key=lambda r: r[0])
        median_s = statistics.median(w for w, _ in ordered)
        _, phases = ordered[len(ordered) // 2]
        target = TARGETS_S.get(m)
        rows.append({"model": m, "runs": len(ordered), "median_s": round(median_s, 3),
                     "min_s": round(ordered[0][0], 3), "max_s": round(ordered[-1][0], 3), "target_s": target,
                     "meets": None if target is None else median_s <= target,
                     **{f"{k}_s": round(v, 3) for k, v in phases.items()}})
        print(f"{m:12s} median {median_s:.2f} s (min {ordered[0][0]:.2f}, max {ordered[-1][0]:.2f}) "
              f"target {target if target is not None else '-'}: "
              + ", ".join(f"{k} {v:.2f}" for k, v in phases.items()), flush=True)
    write_table(out, "bench_walltime", rows,
                {"command": f"eqsat-lab optimize MODEL --search {EGRAPH}", "unit": "wall seconds"})
    return rows


def main(args: argparse.Namespace) -> int:
    run(split_list(args.models), args.runs, Path(args.out))
    return 0
