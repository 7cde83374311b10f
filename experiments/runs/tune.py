"""``eqsat-lab tune``: tune one matmul, describe the landscape, or draw tuner curves."""
from __future__ import annotations

import argparse
import statistics
from dataclasses import asdict
from typing import Any

from autotune.evaluate import curves, evaluate, true_us
from autotune.landscape import (
    best_stages,
    cross_shape,
    dynamic_m,
    off_diagonal,
    slide_configs_on,
    stages_vs_block_k,
    summary,
)
from autotune.registry import COMPILED_MEASURERS, make_measurer, make_tuner
from autotune.tuners import reselect
from autotune.workload import SHAPES, get_workload
from experiments.output import write_json


def _tuner(name: str) -> Any:
    return make_tuner(name)


def _run_compiled(args: argparse.Namespace, workload: Any, trials: int) -> int:
    """A tuner row (MetaSchedule too) on a real kernel: its best after ``trials`` re-measured, as
    ``eqsat-lab experiment tvm-llvm`` reads it, against OpenBLAS."""
    from autotune.tvm.budgets import checkpoints
    from autotune.tvm.compiled import gflops
    from autotune.tvm.target import TvmLlvmTarget, openblas_us

    make_tuner(args.tuner)  # an unknown name fails before TVM starts
    if args.reselect:
        raise ValueError("--reselect: on --measurer tvm-llvm the best is re-measured already (and its top 3 when the "
                         "load moved)")
    measurer = make_measurer(args.measurer, args.seed, args.records)
    try:
        point = checkpoints(args.tuner, workload, [trials], measurer, seed=args.seed)[0]
    finally:
        measurer.close()
    if not point.remeasured_us < float("inf"):
        raise ValueError(f"no config of {workload.key} measured without error ({point.error or 'none ran'})")
    blas = openblas_us(workload, threads=TvmLlvmTarget().threads)  # None: numpy runs no single BLAS call (a conv)
    payload = point.as_dict() | {"tuner": args.tuner, "shape": workload.key, "measurer": measurer.name,
                                 "seed": args.seed, "measured": measurer.measured,
                                 "best_gflops": gflops(workload, point.remeasured_us),
                                 "openblas_gflops": None if blas is None else gflops(workload, blas)}
    blas_text = "" if blas is None else f" (OpenBLAS {payload['openblas_gflops']:.1f})"
    busy = " (contended: top 3 re-measured)" if point.contended else ""
    print(f"{args.tuner} on {workload.key} ({measurer.name}): {point.trials_run} trials ({point.errors} errors, "
          f"{measurer.measured} measured now), best {point.best} re-measured {point.remeasured_us:.2f} µs = "
          f"{payload['best_gflops']:.1f} GFLOP/s{blas_text} in {point.wall_s:.1f} s, load {point.loadavg}{busy}")
    if args.json_out:
        write_json(args.json_out, payload)
    return 0


def run_tune(args: argparse.Namespace) -> int:
    workload = get_workload(args.shape)
    compiled = args.measurer in COMPILED_MEASURERS
    if workload.kind != "matmul" and not compiled:
        raise ValueError(f"--shape {args.shape}: a {workload.kind} compiles only on --measurer "
                         f"{' or '.join(COMPILED_MEASURERS)} ({args.measurer} times matmuls)")
    trials = int(args.trials)
    if compiled:
        return _run_compiled(args, workload, trials)
    tuner = _tuner(args.tuner)
    measurer = make_measurer(args.measurer, args.seed, args.records)
    result = tuner.tune(workload, trials, measurer, seed=args.seed)
    payload = result.to_dict() | {"measurer": measurer.name, "seed": args.seed, "measured": measurer.measured}
    best = result.best
    if best is None:
        raise ValueError(f"no config of {workload.key} measured without error")
    line = (f"{tuner.name} on {workload.key} ({measurer.name}): {len(result.history)} trials "
            f"({payload['errors']} errors, {measurer.measured} measured now), best {best.config} "
            f"measured {best.time_us:.2f} µs, clock {result.clock_s:.1f} s")
    if args.measurer == "hypogpu":
        payload |= evaluate(result)
        line += (f"; true {payload['best_true_us']:.2f} µs vs optimum {payload['optimum_us']:.2f} µs "
                 f"= {100 * payload['fraction_of_optimum']:.1f}% of optimum")
    print(line)
    if args.reselect:
        chosen = reselect(result, measurer, top_k=args.reselect, repeats=5)
        payload["reselected_config"] = chosen.as_dict()
        text = f"re-measured the top {args.reselect} five times each: chose {chosen}"
        if args.measurer == "hypogpu":
            payload["reselected_true_us"] = true_us(workload, chosen)
            text += f", true {payload['reselected_true_us']:.2f} µs"
        print(text)
    if args.json_out:
        write_json(args.json_out, payload)
    return 0


def run_landscape(args: argparse.Namespace) -> int:
    w = get_workload(args.shape)
    s = summary(w)
    table = stages_vs_block_k(w)
    shapes = [SHAPES[n] for n in ("square", "prefill", "decode", "wgrad", "ffn_down")]
    slides = slide_configs_on(shapes)
    cross = cross_shape(shapes)
    off = off_diagonal(cross)
    dyn = dynamic_m()
    print(f"{s.workload}: {s.legal:,} of {s.configs:,} configs legal; optimum {s.optimum_us:.1f} µs ({s.best}); "
          f"median legal config {s.median_slowdown:.2f}x slower (reference: 5x); {s.within_5pct} within 5% "
          f"(reference: 24)")
    print("slowdown vs optimum, BLOCK_K x num_stages (others at their best):")
    for bk, row in table.items():
        print(f"  BK={bk:3d} " + " ".join("    x" if v == float("inf") else f"{v:5.2f}" for v in row.values()))
    print(f"best num_stages per BLOCK_K: {best_stages(table)} (reference: 16->3, 32->2, 64->2, 128->1)")
    print("the slides' 24 autotune configs:")
    for r in slides:
        print(
            f"  {r.workload:9s} {r.illegal} illegal, best {r.best_slide_us:8.1f} µs vs optimum {r.optimum_us:8.1f} µs "
            f"= {r.slowdown:.2f}x ({r.optimum})"
        )
    print(
        f"best configs moved across shapes: {min(off):.2f}x-{max(off):.2f}x slower, median "
        f"{statistics.median(off):.2f}x (reference: 1.06x-6.66x, median 2.35x)"
    )
    print(
        "dynamic M (decode N, K): best BLOCK_M "
        + ", ".join(f"M={d.m}:{d.best_block_m}" for d in dyn)
        + f"; M=16's config at M=256 is {dyn[-1].with_m16_config_us / dyn[-1].optimum_us:.2f}x slower "
        + "(reference: 3.05x)"
    )
    if args.json_out:
        write_json(
            args.json_out,
            {
                "summary": asdict(s),
                "stages_vs_block_k": table,
                "best_stages": best_stages(table),
                "slide_configs": [asdict(r) for r in slides],
                "cross_shape": cross,
                "dynamic_m": [asdict(d) for d in dyn],
            },
        )
    return 0


def run_curves(args: argparse.Namespace) -> int:
    checkpoints = [int(t) for t in args.trials.split(",")]
    shapes = [get_workload(s) for s in args.shapes.split(",") if s]
    points = []
    for name in args.tuner.split(","):
        _tuner(name)
        points += curves(lambda name=name: _tuner(name), name, shapes, checkpoints, range(args.seeds))
    print(f"median % of optimum over {args.seeds} seeds")
    print(f"{'tuner':7s} {'shape':12s} " + " ".join(f"{n:>7d}" for n in checkpoints))
    for name in args.tuner.split(","):
        for w in shapes:
            row = [p for p in points if p.tuner == name and p.workload == w.name]
            print(f"{name:7s} {w.name:12s} " + " ".join(f"{p.median_pct:7.1f}" for p in row))
    if args.json_out:
        write_json(args.json_out, [asdict(p) for p in points])
    return 0
