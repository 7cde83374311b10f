"""``eqsat-lab experiment walltime``: the wall time, CPU time and peak memory a user's ``eqsat-lab
optimize MODEL --search S`` costs, and how they grow with the model's depth.

Each run is a fresh ``eqsat-lab`` process, as a user starts it: interpreter, imports, the model,
the search, the check of the result and the exit; its CPU seconds and peak resident memory come
from the operating system (``wait4``), next to the load average when it started. One warm-up run
per cell and search fills the disk caches (parsed and compiled rules, a graph's compiled rules
and the rules its worker loads ahead), so the timed runs are second runs; a line warns when
Python may not write bytecode and the package's is missing or stale.
Cells are timed round-robin so a slow spell of the machine hits every cell alike.

A model is a benchmark graph or a zoo architecture (written as ONNX into a temporary folder and
optimized from the file), with builder sizes: ``bert:layers=4/8/16`` is three cells. Over the cells
of one model and search that differ only in ``layers``, time and memory are fitted as a line in
the layer count (:mod:`experiments.bench.growth`), and the table says where growth is not linear.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import eqsat
from experiments.bench.growth import plot_growth, write_markdown
from experiments.command import parse_params, split_list
from experiments.compare import check_models
from experiments.output import write_table
from experiments.searches import ALPHA, EGRAPH, SEARCHES, get_search, preset_limits

TARGETS_S = {("squeezenet", EGRAPH): 2.0, ("bert", EGRAPH): 3.0, ("bert:layers=32", EGRAPH): 6.0}
# TENSAT's published optimization seconds (its Table 2, k_multi = 1) for its seven benchmark models
TENSAT_PUBLISHED_S = {"bert": 1.4, "resnext50": 0.7, "nasnet_a": 10.6, "nasrnn": 0.5, "inception_v3": 5.1,
                      "squeezenet": 0.3, "vgg19": 0.4}


@dataclass(frozen=True)
class SizedModel:
    """One model at one size: ``label`` as written (``bert:layers=8``), the name and its sizes. Not a
    :class:`experiments.sweep.Cell`: each is timed as processes of its own, one at a time."""

    label: str
    model: str
    params: tuple[tuple[str, Any], ...]

    @property
    def zoo(self) -> bool:
        from experiments.zoo import ZOO

        return self.model in ZOO

    def layers(self) -> int | None:
        return dict(self.params).get("layers")


def parse_cells(text: str) -> list[SizedModel]:
    """``bert:layers=4/8,squeezenet`` -> one cell per model and size (a ``/`` lists sizes)."""
    from eqsat.models import MODELS
    from experiments.zoo import ZOO

    cells = []
    for item in split_list(text):
        name, *pairs = item.split(":")
        if name not in MODELS and name not in ZOO:
            raise ValueError(f"--models: unknown model {name!r}; choose from {', '.join([*MODELS, *ZOO])}")
        expanded: list[list[str]] = [[]]
        for pair in pairs:
            key, _, values = pair.partition("=")
            if not key or not values:
                raise ValueError(f"--models {item!r}: expected NAME:KEY=VALUE[/VALUE...], got {pair!r}")
            expanded = [done + [f"{key}={v}"] for done in expanded for v in values.split("/")]
        for kv in expanded:
            cells.append(SizedModel(":".join([name, *kv]), name, tuple(parse_params(kv).items())))
    if not cells:
        raise ValueError("--models: no model given")
    check_models([c.model for c in cells if not c.zoo])
    return cells


def _command(cell: SizedModel, search: str, device: str, work: Path, preset: str | None = None) -> list[str]:
    """The ``eqsat-lab optimize`` command line of one run (a zoo model's ONNX file is written once)."""
    cmd = [sys.executable, "-m", "experiments.cli", "optimize"]
    if cell.zoo:
        path = work / f"{cell.label.replace(':', '.').replace('=', '')}.onnx"
        if not path.exists():  # in a child: Linux passes a parent's peak memory on to every later child it starts
            build = (f"from experiments.zoo import ZOO; "
                     f"ZOO[{cell.model!r}].build({str(path)!r}, 0, **{dict(cell.params)!r})")
            subprocess.run([sys.executable, "-c", build], check=True)
        cmd += [str(path), "--out", str(work / f"{search}.opt.onnx")]
    else:
        cmd += [cell.model, *(f"--param={k}={v}" for k, v in cell.params)]
    cmd += ["--search", search, "--device", device, "--json", str(work / "run.json")]
    return cmd + (["--preset", preset] if preset else [])


def one_run(cmd: list[str], json_path: Path, timeout_s: float) -> dict[str, Any]:
    """Wall and CPU seconds, peak resident MB, the load average at the start and the phase report
    of one process (a failure or a timeout is a row with its reason)."""
    load = os.getloadavg()[0]
    start = time.perf_counter()
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        timer = threading.Timer(timeout_s, proc.kill)
        timer.start()
        _, status, usage = os.wait4(proc.pid, 0)
        timer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - start
        log.seek(0)
        tail = log.read().decode(errors="replace").strip().splitlines()[-1:]
    row = {"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime, "peak_mb": usage.ru_maxrss / 1024,
           "load": load}
    if proc.returncode != 0:
        why = f"killed after {timeout_s:.0f} s" if not timer.is_alive() and wall >= timeout_s else " ".join(tail)
        return row | {"error": f"exit {proc.returncode}: {why}"}
    payload = json.loads(json_path.read_text())
    return row | {"phases": payload["phases"], "stop": payload.get("stop", ""), "search_s": payload["search_s"],
                  "best_us": payload.get("best_us"),
                  "speedup_pct": payload.get("speedup_pct"), "time_bounded": bool(payload.get("time_bounded"))}


def summarize(cell: SizedModel, search: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The median run of a cell (by wall time) with the spread of the others."""
    ok = sorted((r for r in runs if "error" not in r), key=lambda r: r["wall_s"])
    base = {"model": cell.model, "cell": cell.label, "layers": cell.layers(), "search": search,
            "runs": len(runs), "load_min": round(min(r["load"] for r in runs), 1),
            "load_max": round(max(r["load"] for r in runs), 1)}
    if not ok:
        return base | {"error": runs[-1]["error"]}
    mid = ok[len(ok) // 2]
    target = TARGETS_S.get((cell.label, search))
    wall = statistics.median(r["wall_s"] for r in ok)
    search_s = statistics.median(r["search_s"] for r in ok)
    tensat = TENSAT_PUBLISHED_S.get(cell.label) if search == EGRAPH else None  # the builder's own sizes only
    phases = dict.fromkeys(k for r in ok for k in r["phases"])  # each phase's own median over the runs
    return base | {
        "wall_s": round(wall, 2), "wall_min_s": round(ok[0]["wall_s"], 2), "wall_max_s": round(ok[-1]["wall_s"], 2),
        "cpu_s": round(statistics.median(r["cpu_s"] for r in ok), 2),
        "peak_mb": round(statistics.median(r["peak_mb"] for r in ok)),
        "target_s": target, "meets": None if target is None else wall <= target,
        "speedup_pct": mid["speedup_pct"], "best_us": mid.get("best_us"), "search_s": round(search_s, 3),
        "tensat_s": tensat, "vs_tensat": None if tensat is None else round(search_s / tensat, 3),
        "stop": mid["stop"], "time_bounded": mid.get("time_bounded", False),
        **{f"{k}_s": round(statistics.median(r["phases"].get(k, 0.0) for r in ok), 3) for k in phases}}


def reference_line(seconds: Sequence[float]) -> str:
    """The machine's speed during the runs (see :func:`machine_reference`)."""
    return (f"machine reference (a fixed pure-Python workload, walltime.machine_reference; larger is slower): "
            f"median {statistics.median(seconds):.3f} s, {min(seconds):.3f}-{max(seconds):.3f} s over {len(seconds)} "
            f"takes, before the runs and after each round")


def geomean(values: Sequence[float]) -> float | None:
    """The geometric mean of positive ``values`` (None for none)."""
    import math

    values = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def bottom_lines(rows: Sequence[dict[str, Any]]) -> list[str]:
    """The geometric mean of the e-graph's ``search_s`` over TENSAT's published seconds (over the
    models run that TENSAT published), and the α/e-graph search-time ratio per model run by both."""
    lines = []
    ours = [r for r in rows if r.get("vs_tensat")]
    if ours:
        lines.append(f"geometric mean of search_s / TENSAT's published seconds over {len(ours)} of TENSAT's seven "
                     f"models: {geomean([r['vs_tensat'] for r in ours]):.3g}x")
    by = {(r["cell"], r["search"]): r for r in rows if "error" not in r}
    ratios = {c: by[c, ALPHA]["search_s"] / by[c, EGRAPH]["search_s"]
              for c, s in by if s == EGRAPH and (c, ALPHA) in by and by[c, EGRAPH]["search_s"] > 0}
    if ratios:
        lines.append("α/e-graph search_s ratio: " + ", ".join(f"{c} {v:.3g}x" for c, v in ratios.items())
                     + f"; geometric mean {geomean(list(ratios.values())):.3g}x")
    return lines


def machine_reference(repeats: int = 3) -> float:
    """Seconds of a fixed CPU workload, the median of ``repeats``: a seeded shuffle, sort, dict and
    heap pass over 200,000 integers (the interpreter work the search's Python does). The timed runs
    depend on the machine's speed at the hour: the same commit (148f03d) measured 0.27x of TENSAT's
    seconds one afternoon and 0.37x-0.39x that evening on the shared development machine, so a
    table carries this number, taken before the runs and after each round of them, and tables
    compare only where it matches."""
    import heapq
    import random

    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        rng = random.Random(0)
        items = list(range(200_000))
        rng.shuffle(items)
        index = {v: k for k, v in enumerate(sorted(items))}
        heap = [(index[v], v) for v in items]
        heapq.heapify(heap)
        while heap:
            heapq.heappop(heap)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


TIMED_PACKAGES = (eqsat.__name__, __name__.partition(".")[0])  # what a timed process imports


def bytecode_lines(packages: Sequence[str] = ()) -> list[str]:
    """A warning when the timed processes compile modules from source: Python writes no bytecode
    under ``PYTHONDONTWRITEBYTECODE``, and a module imported during the search (the extractor's,
    the worker's) then compiles inside ``search_s`` in every run (measured: the same commit without
    ``__pycache__`` took 5% longer over TENSAT's seven, NasRNN 0.11-0.14 s, VGG-19 nothing)."""
    import importlib.util

    if not sys.flags.dont_write_bytecode and not os.environ.get("PYTHONDONTWRITEBYTECODE"):
        return []
    packages = packages or TIMED_PACKAGES
    stale = total = 0
    for name in packages:
        spec = importlib.util.find_spec(name)
        for root in (spec.submodule_search_locations or []) if spec else []:
            for source in Path(root).rglob("*.py"):
                total += 1
                cached = Path(importlib.util.cache_from_source(str(source)))
                stale += not cached.exists() or cached.stat().st_mtime < source.stat().st_mtime
    if not stale:
        return []
    return [f"note: {stale} of {total} modules have no current bytecode and PYTHONDONTWRITEBYTECODE is set: every "
            f"timed process compiled them (run `python -m compileall` on {', '.join(packages)} first)"]


def run(cells: Sequence[SizedModel], searches: Sequence[str], device: str, runs: int, out: Path,
        timeout_s: float = 300.0, preset: str | None = None) -> list[dict[str, Any]]:
    """``runs`` timed processes per cell and search (``preset``: every search's named preset, default
    each one's own); writes ``bench_walltime.csv``/``.json``/``.md`` and, over depths,
    ``bench_walltime.png``."""
    got: dict[tuple[str, str], list[dict[str, Any]]] = {(c.label, s): [] for c in cells for s in searches}
    speed = [machine_reference()]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for c in cells:  # fills the disk caches (rules, each graph's compiled rules): timed runs are second runs
            for s in searches:
                one_run(_command(c, s, device, work, preset), work / "run.json", timeout_s)
        for _ in range(runs):
            for c in cells:
                for s in searches:
                    got[c.label, s].append(one_run(_command(c, s, device, work, preset), work / "run.json",
                                                   timeout_s))
                    r = got[c.label, s][-1]
                    print(f"{c.label:24s} {s:6s} wall {r['wall_s']:6.1f} s  cpu {r['cpu_s']:6.1f} s  "
                          f"peak {r['peak_mb']:6.0f} MB  load {r['load']:.1f}  {r.get('error', '')}", flush=True)
            speed.append(machine_reference())
    rows = [summarize(c, s, got[c.label, s]) | {"preset": preset or get_search(s).default_preset}
            for c in cells for s in searches]
    command = ("eqsat-lab experiment walltime --models " + ",".join(c.label for c in cells)
               + f" --searches {','.join(searches)} --device {device} --runs {runs}"
               + (f" --preset {preset}" if preset else ""))
    lines = bottom_lines(rows) + [reference_line(speed)] + bytecode_lines()
    write_table(out, "bench_walltime", rows, {"command": command, "unit": "seconds, MB (peak resident)",
                                              "bottom_lines": lines})
    write_markdown(out / "bench_walltime.md", rows, command, lines)
    for line in lines:
        print(line)
    if any(r.get("layers") for r in rows):
        plot_growth(out / "bench_walltime.png", rows)
    return rows


def main(args: argparse.Namespace) -> int:
    if args.runs < 1:
        raise ValueError(f"--runs {args.runs}: need at least one timed run")
    searches = split_list(args.searches)
    unknown = [s for s in searches if s not in SEARCHES]
    if unknown or not searches:
        raise ValueError(f"--searches: unknown {', '.join(unknown) or '(none given)'}; "
                         f"choose from {', '.join(SEARCHES)}")
    for s in searches if args.preset else ():  # a preset a search lacks fails here, not in every run
        preset_limits(get_search(s), args.preset)
    run(parse_cells(args.models), searches, args.device, args.runs, Path(args.out), args.timeout, args.preset)
    return 0
