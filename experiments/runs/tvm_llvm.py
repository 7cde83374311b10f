"""``eqsat-lab experiment tvm-llvm``: our tuners against TVM's MetaSchedule on kernels compiled for this CPU.

Each cell runs one tuner of the table (:data:`TUNERS`: random search, AutoTVM, Ansor and
MetaSchedule, all rows of :data:`autotune.registry.TUNERS`) on one kernel through
:func:`autotune.tvm.budgets.checkpoints`: the best at each trial budget re-measured by the same runner,
the wall time to reach it and the load average around the cell. A reference cell times numpy's
OpenBLAS on the matmuls. The table (``tvm_llvm.md``/``.csv``/``.json``) has one row per kernel,
tuner and budget; ``tvm_llvm.png`` draws best GFLOP/s against trials. A tuner that cannot run here
(MetaSchedule without TVM or on a fake target) is a row saying why, not a failure.
"""
from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from eqsat.files import write_atomic
from experiments.command import Experiment, add_sweep_options, count_list, positive_int, split_list, sweep_kwargs
from experiments.output import pyplot, save_figure, write_table
from experiments.sweep import Cell, RunOptions, load_finished, run_cells

TUNERS = ("random", "autotvm", "ansor", "metaschedule")
SHAPES = ("512x512x512", "1024x1024x1024", "bmm8:256x256x256", "conv3x3:1x56x64x64")
BUDGETS = (64, 128, 256)
QUICK_SHAPES, QUICK_BUDGETS = ("128x128x128", "bmm2:64x64x64", "conv3x3:1x8x16x16"), (8, 16)
THEIRS = "metaschedule"


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def tune_cell(tuner: str, shape: str, budgets: Sequence[int], seed: int, threads: int, target: str,
              records: str) -> dict[str, Any]:
    """One tuner on one kernel, read at every budget (a tuner that cannot run here says why)."""
    from autotune.tvm.budgets import checkpoints
    from autotune.tvm.compiled import TARGETS, CompiledMeasurer
    from autotune.workload import get_workload

    workload, load = get_workload(shape), _load()
    measurer = CompiledMeasurer(TARGETS[target](threads), records or None, resume=False)
    try:
        points = [p.as_dict() for p in checkpoints(tuner, workload, budgets, measurer, seed)]
        skipped = ""
    except ValueError as exc:  # a tuner this target cannot run (MetaSchedule without TVM): a row, not a crash
        points, skipped = [], str(exc)
    finally:
        measurer.close()
    return {"tuner": tuner, "shape": shape, "flops": workload.flops, "checkpoints": points, "skipped": skipped,
            "loadavg_start": load, "loadavg_end": _load()}


def reference_cell(shape: str, target: str) -> dict[str, Any]:
    """numpy's OpenBLAS on the same problem (None where numpy runs no single BLAS call)."""
    from autotune.tvm.compiled import gflops
    from autotune.tvm.kernels import kernel
    from autotune.workload import get_workload

    workload, load = get_workload(shape), _load()
    us = None
    if target == "tvm-llvm" and kernel(workload).blas:
        from autotune.tvm.target import TvmLlvmTarget, openblas_us

        us = openblas_us(workload, threads=TvmLlvmTarget().threads)  # as many BLAS threads as the tuned kernels
    return {"shape": shape, "openblas_gflops": None if us is None else round(gflops(workload, us), 2),
            "loadavg": load}


def _rate(flops: int, us: float | None) -> float | None:
    return None if us is None else round(flops / (us * 1e3), 2)


def table_rows(results: Sequence[dict[str, Any]], refs: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per kernel, tuner and budget."""
    rows = []
    for r in results:
        blas = refs[r["shape"]]["openblas_gflops"]
        if r["skipped"]:
            rows.append({"shape": r["shape"], "tuner": r["tuner"], "skipped": r["skipped"]})
            continue
        for p in r["checkpoints"]:
            rows.append({"shape": r["shape"], "tuner": r["tuner"], "trials": p["trials"],
                         "trials_run": p["trials_run"], "best_gflops": _rate(r["flops"], p["remeasured_us"]),
                         "tuned_gflops": _rate(r["flops"], p["tuned_us"]), "wall_s": round(p["wall_s"], 1),
                         "errors": p["errors"], "best": p["best"], "remeasure_error": p["error"],
                         "contended": p.get("contended", False), "loadavg_remeasured": p.get("loadavg"),
                         "openblas_gflops": blas, "loadavg_start": r["loadavg_start"],
                         "loadavg_end": r["loadavg_end"], "skipped": ""})
    return rows


def verdicts(rows: Sequence[dict[str, Any]]) -> list[str]:
    """Per kernel and budget: our best tuner against MetaSchedule (GFLOP/s and wall time) and OpenBLAS."""
    lines = []
    keys = dict.fromkeys((r["shape"], r["trials"]) for r in rows if not r["skipped"])
    for shape, n in keys:
        ours = [r for r in rows if (r["shape"], r.get("trials")) == (shape, n) and r["tuner"] != THEIRS
                and r["best_gflops"] is not None]
        theirs = next((r for r in rows if (r["shape"], r.get("trials")) == (shape, n) and r["tuner"] == THEIRS), None)
        if not ours:
            continue
        best = max(ours, key=lambda r: r["best_gflops"])
        text = f"{shape} @{n}: ours {best['tuner']} {best['best_gflops']:.1f} GFLOP/s in {best['wall_s']:.0f} s"
        if theirs is not None and theirs["best_gflops"] is not None:
            at = "at/above" if best["best_gflops"] >= theirs["best_gflops"] else "BELOW"
            faster = "less" if best["wall_s"] < theirs["wall_s"] else "MORE"
            text += (f"; MetaSchedule {theirs['best_gflops']:.1f} in {theirs['wall_s']:.0f} s: {at} it, "
                     f"in {faster} wall time")
        if best["openblas_gflops"] is not None:
            text += (f"; OpenBLAS {best['openblas_gflops']:.1f}: "
                     f"{'at/above' if best['best_gflops'] >= best['openblas_gflops'] else 'BELOW'} it")
        lines.append(text)
    return lines


def markdown(rows: Sequence[dict[str, Any]], verdict: Sequence[str]) -> str:
    cols = ("shape", "tuner", "trials", "best_gflops", "tuned_gflops", "wall_s", "errors", "openblas_gflops",
            "loadavg_start", "loadavg_end", "loadavg_remeasured", "contended", "best")
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        if r["skipped"]:
            lines.append(f"| {r['shape']} | {r['tuner']} | skipped: {r['skipped']} |" + " |" * (len(cols) - 3))
        else:
            lines.append("| " + " | ".join("" if r[c] is None else str(r[c]) for c in cols) + " |")
    return "\n".join(lines) + "\n\n" + "\n".join(f"- {v}" for v in verdict) + "\n"


def _plot(rows: Sequence[dict[str, Any]], shapes: Sequence[str], path: Path) -> None:
    plt = pyplot()
    fig, axes = plt.subplots(1, len(shapes), figsize=(4 * len(shapes), 3.4), squeeze=False)
    for ax, shape in zip(axes[0], shapes):
        mine = [r for r in rows if r["shape"] == shape and not r["skipped"] and r["best_gflops"] is not None]
        for tuner in dict.fromkeys(r["tuner"] for r in mine):
            pts = sorted((r["trials"], r["best_gflops"]) for r in mine if r["tuner"] == tuner)
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=tuner)
        blas = next((r["openblas_gflops"] for r in mine if r["openblas_gflops"] is not None), None)
        if blas is not None:
            ax.axhline(blas, color="gray", linestyle="--", label="OpenBLAS")
        ax.set_title(shape, fontsize=9)
        ax.set_xlabel("trials")
        ax.set_xscale("log", base=2)
    axes[0][0].set_ylabel("best GFLOP/s (re-measured)")
    axes[0][-1].legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)


def _cell_budgets(tuner: str, budgets: tuple[int, ...]) -> list[tuple[int, ...]]:
    """A knob-space tuner runs once to the largest budget and is read at each; a tuner that plans
    by its budget (MetaSchedule: one ``tune_tir`` per budget) is one cell per budget, so a long
    run splits into invocations that each finish cells."""
    from autotune.registry import OWN_SPACE_TUNERS

    return [(n,) for n in budgets] if tuner in OWN_SPACE_TUNERS else [budgets]


def run(out: Path, *, tuners: Sequence[str] = TUNERS, shapes: Sequence[str] = SHAPES,
        budgets: Sequence[int] = BUDGETS, full_shapes: Sequence[str] | None = None, seed: int = 0,
        threads: int = 2, target: str = "tvm-llvm", options: RunOptions = RunOptions(), command: str = "",
        finished_only: bool = False) -> list[dict[str, Any]]:
    """Every tuner on every shape; shapes not in ``full_shapes`` (default: all) get the smallest budget only.
    ``finished_only``: tune nothing, write the table of the cells already finished under ``out`` (a run
    split over locked invocations), the others a row saying they have not run."""
    from autotune.registry import make_tuner
    from autotune.tvm.compiled import TARGETS
    from autotune.workload import get_workload

    if target not in TARGETS:
        raise ValueError(f"unknown target {target!r}; choose from {', '.join(TARGETS)}")
    for t in tuners:
        make_tuner(t)
    for s in list(shapes) + list(full_shapes or ()):
        get_workload(s)
    full = set(shapes if full_shapes is None else full_shapes)
    plan = {s: tuple(sorted(budgets)) if s in full else (min(budgets),) for s in shapes}
    refs = {r["shape"]: r for r in run_cells(
        [Cell.of("tvm-llvm", "experiments.runs.tvm_llvm:reference_cell", shape=s, target=target) for s in shapes],
        out, options=RunOptions(progress=options.progress), desc="openblas")}
    cells = [Cell.of("tvm-llvm", "experiments.runs.tvm_llvm:tune_cell", tuner=t, shape=s, budgets=b, seed=seed,
                     threads=threads, target=target,
                     records=str(out / "records" / f"{t}-{s.replace(':', '_')}.jsonl"))
             for s in shapes for t in tuners for b in _cell_budgets(t, plan[s])]
    done = [c for c in cells if not finished_only or load_finished(c, out) is not None]
    results = run_cells(done, out, options=options, desc="tvm-llvm")
    results += [{"tuner": c.kwargs["tuner"], "shape": c.kwargs["shape"], "skipped": "not run yet (budgets "
                 f"{', '.join(map(str, c.kwargs['budgets']))}; --finished-only)"} for c in cells if c not in done]
    rows = table_rows(results, refs)
    verdict = verdicts(rows)
    write_table(out, "tvm_llvm", rows, {"command": command, "threads": threads, "target": target, "seed": seed,
                                        "budgets": {s: list(b) for s, b in plan.items()}, "verdicts": verdict})
    write_atomic(out / "tvm_llvm.md", markdown(rows, verdict))
    _plot(rows, shapes, out / "tvm_llvm.png")
    for r in rows:
        if r["skipped"]:
            print(f"{r['shape']:20s} {r['tuner']:13s} skipped: {r['skipped']}")
    print("\n".join(verdict))
    print(f"wrote {out / 'tvm_llvm.md'}, .csv, .json and .png")
    return rows


def _add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tuners", default=",".join(TUNERS), help="comma-separated tuner names")
    p.add_argument("--shapes", default=",".join(SHAPES), help="comma-separated MxNxK, bmmB:MxNxK, conv3x3:NxHxCxF")
    p.add_argument("--trials", type=count_list, default=",".join(map(str, BUDGETS)), help="comma-separated budgets")
    p.add_argument("--full-shapes", default=None,
                   help="comma-separated shapes that get every budget; the others get the smallest (default: all)")
    p.add_argument("--threads", type=positive_int, default=2, help="threads of every kernel (TVM_NUM_THREADS)")
    p.add_argument("--target", default="tvm-llvm", help="the compiled target (tvm-llvm)")
    p.add_argument("--finished-only", action="store_true",
                   help="tune nothing: the table of the cells already finished in --out (a run split over invocations)")
    p.add_argument("--quick", action="store_true",
                   help=f"smoke test: {', '.join(QUICK_SHAPES)} at {QUICK_BUDGETS} trials")
    add_sweep_options(p, "results/tvm_llvm", device=False)


def _run(args: argparse.Namespace) -> int:
    shapes, budgets = split_list(args.shapes), [int(x) for x in split_list(args.trials)]
    if args.quick:
        shapes, budgets = list(QUICK_SHAPES), list(QUICK_BUDGETS)
    if not budgets or min(budgets) < 1:
        raise ValueError(f"--trials: expected comma-separated integers >= 1, got {args.trials!r}")
    run(Path(args.out), tuners=split_list(args.tuners), shapes=shapes, budgets=budgets,
        full_shapes=None if args.full_shapes is None else split_list(args.full_shapes), seed=args.seed,
        threads=args.threads, target=args.target, finished_only=args.finished_only, **sweep_kwargs(args))
    return 0


EXPERIMENTS = (
    Experiment("tvm-llvm", "random search, AutoTVM, Ansor and TVM's MetaSchedule on matmuls, a batched matmul and "
               "a conv compiled for this CPU at 64/128/256 trials, bests re-measured, vs OpenBLAS",
               _add_arguments, _run, outputs=("tvm_llvm.md", "tvm_llvm.csv", "tvm_llvm.json", "tvm_llvm.png"),
               doc="tvm_llvm/README.md"),
)
