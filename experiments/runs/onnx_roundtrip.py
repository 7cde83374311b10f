"""``eqsat-lab experiment onnx``: every benchmark model through ONNX and back.

Each cell takes one model and one search. A builder model's graph is written as an ONNX file with
random weights (:func:`eqsat.onnx.export_graph`); an exporter-shaped model (``pt_*``, see
:mod:`experiments.zoo.legacy`) is written the way PyTorch's exporters write it. The file is
read back with :func:`eqsat.onnx.load` (an import failure is a row, not a crash), optimized
with the papers' settings, written out again, and both files are run in onnxruntime on the same
random inputs. A row reports the builder graph's cost and the imported one's (fused activations
are written as onnxruntime's FusedConv/FusedGemm and read back as one node), the cost after the
search, the written file's own cost (imported again: a gain the
file does not have shows here), the time of each stage and the largest relative difference
between the two models' outputs; with ``--measure``, both files' onnxruntime latency on this
CPU (1 thread; all graph optimizations, and none) and the measured speedup next to the modeled
one, and how far the roofline's prediction is from this CPU. Each row also says what onnxruntime
would have done by itself (:mod:`eqsat.onnx.runtime_baseline`). The search runs through
:func:`eqsat.pipeline.optimize_model` on the imported graph. A difference beyond tolerance
fails the cell.
"""
from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from experiments.command import Experiment, add_models, add_sweep_options, split_list, sweep_kwargs
from experiments.compare import COMPARE_MODELS, check_models
from experiments.onnx_io import ORT_LEVELS, TOLERANCE, export_best, ort_latency_ms, written_cost
from experiments.output import write_table
from experiments.searches import EGRAPH, SEARCHES
from experiments.sweep import Cell, RunOptions, run_cells
from experiments.zoo.legacy import EXPORTER_MODELS


def round_trip(model: str, search: str, device: str, seed: int, out: str, quick: bool = False,
               measure: bool = False) -> dict[str, Any]:
    """One model through export, import, search, export and the onnxruntime check; the written
    file is priced again, and with ``measure`` both files are timed in onnxruntime on this CPU."""
    from eqsat import onnx as onnx_io
    from eqsat.cost.registry import cost_model
    from eqsat.models import build
    from eqsat.pipeline import optimize_model
    from experiments.searches import get_search, limits_for, prepare_rules

    folder = Path(out) / "models"
    folder.mkdir(parents=True, exist_ok=True)
    src, dst = folder / f"{model}.onnx", folder / f"{model}.{search}.onnx"
    start = t0 = time.perf_counter()
    exporter_shaped = model in EXPORTER_MODELS
    if exporter_shaped:
        EXPORTER_MODELS[model](src, seed=seed)
    else:
        graph = build(model)
        onnx_io.export_graph(graph, src, seed=seed)
    t1 = time.perf_counter()
    try:
        imported = onnx_io.load(src)
    except onnx_io.OnnxError as exc:
        return {"model": model, "search": search, "device": device, "import_ok": False, "error": str(exc)}
    if exporter_shaped:
        graph = imported.graph
    t2 = time.perf_counter()
    cost = cost_model(device)
    if not quick:
        prepare_rules(search)  # parsed and compiled once per process, so a search's time is its own
    # the imported graph in memory: the search, its check and its guards as optimize runs them; the
    # file is written here, with a float64 check where float32 overflows
    outcome = optimize_model(imported.graph, search=search, device=device, seed=seed,
                             limits=limits_for(get_search(search), model, quick))
    row, best, runtime = outcome.result.to_dict(), outcome.best, outcome.runtime
    t3 = time.perf_counter()
    copied = export_best(imported, best, src, dst)
    t4 = time.perf_counter()
    ort_dtype, scale = "float32", 1.0
    try:
        diff = onnx_io.max_difference(src, dst, seed=seed)
    except onnx_io.OnnxError:
        # float32 overflows: BERT without softmax or layer norm is a polynomial of degree 3^8 in
        # its input, finite only near one input scale; compare float64 exports there
        ort_dtype = "float64"
        src64, dst64 = folder / f"{model}.f64.onnx", folder / f"{model}.{search}.f64.onnx"
        onnx_io.export_graph(graph, src64, imported.weights, dtype="float64")
        onnx_io.save(imported, best, dst64, dtype="float64")
        scale = finite_input_scale(src64, seed)
        diff = onnx_io.max_difference(src64, dst64, seed=seed, input_scale=scale)
    t5 = time.perf_counter()
    if not diff <= TOLERANCE:
        raise AssertionError(f"{model} ({search}): optimized model differs by {diff:.3g} in onnxruntime")
    wall_s = time.perf_counter() - start  # export, import, search, write and check: what a user waits for
    modeled = row["original_us"] / row["best_us"] if row["best_us"] > 0 else float("inf")
    measured = {}
    if measure:
        for level in ORT_LEVELS:
            ms_in, ms_out = ort_latency_ms(str(src), str(dst), level, seed=seed)
            key = level.lower()
            measured |= {f"ort_{key}_ms_in": ms_in, f"ort_{key}_ms_out": ms_out, f"ort_{key}_speedup": ms_in / ms_out}
        measured["roofline_over_cpu"] = modeled / measured["ort_enable_all_speedup"]
    return measured | written_cost(dst, row["best_us"], device) | {
        "model": model,
        "search": search,
        "device": device,
        "import_ok": True,
        "input_copied": copied,
        "opaque_reasons": "; ".join(imported.opaque),
        "runtime_us": runtime["runtime_us"],
        "runtime_fusions": ", ".join(f"{k} x{v}" for k, v in sorted(runtime["runtime_fusions"].items())),
        "beyond_runtime": runtime["runtime_us"] / row["best_us"] if row["best_us"] > 0 else float("inf"),
        "wall_s": wall_s,
        "ops": imported.graph.op_count(),
        "onnx_nodes_in": sum(imported.ops.values()),
        "opaque": len(imported.opaque),
        "builder_us": cost.graph_time_us(graph),
        "imported_us": cost.graph_time_us(imported.graph),
        "original_us": row["original_us"],
        "best_us": row["best_us"],
        "speedup_pct": row["speedup_pct"],
        "modeled_speedup": modeled,
        "file_mb": round(src.stat().st_size / 2**20, 1),
        "export_s": t1 - t0,
        "import_s": t2 - t1,
        "search_s": row["search_s"],
        "wall_search_s": t3 - t2,
        "save_s": t4 - t3,
        "check_s": t5 - t4,
        "max_rel_diff": diff,
        "ort_dtype": ort_dtype,
        "input_scale": scale,
        "verified": outcome.result.verified.equal,
        "stop": row["stop"],
    }


def finite_input_scale(path: Path, seed: int, steps: int = 60) -> float:
    """An input scale at which ``path``'s outputs in onnxruntime are finite and not vanishing
    (bisection on the log of the scale; output magnitude grows with the input's)."""
    import numpy as np
    import onnxruntime as ort

    from eqsat.onnx import random_feeds

    session = ort.InferenceSession(str(path))
    lo, hi = -30.0, 5.0  # log2 of the scale
    for _ in range(steps):
        mid = (lo + hi) / 2
        with np.errstate(all="ignore"):
            outs = session.run(None, random_feeds(session, seed, 2.0**mid))
        peak = max(float(np.abs(o).max()) for o in outs)
        if not np.isfinite(peak) or peak > 1e30:
            hi = mid
        elif peak < 1e-30:
            lo = mid
        else:
            return 2.0**mid
    raise AssertionError(f"{path}: no input scale keeps the outputs finite")


def format_rows(rows: Sequence[dict[str, Any]]) -> str:
    head = (f"{'model':22s} {'search':6s} {'opaque':>6s} {'orig µs':>9s} {'best µs':>9s} {'file µs':>9s} "
            f"{'ORT-own':>8s} {'modeled':>8s} {'search s':>8s} {'wall s':>7s} {'max diff':>9s} {'ORT all':>8s} "
            f"{'ORT none':>8s}")
    lines = [head]
    for r in rows:
        if not r.get("import_ok", True):
            lines.append(f"{r['model']:22s} {r['search']:6s} import failed: {r['error']}")
            continue
        ort_all = f"{r['ort_enable_all_speedup']:.3f}x" if "ort_enable_all_speedup" in r else "-"
        ort_none = f"{r['ort_disable_all_speedup']:.3f}x" if "ort_disable_all_speedup" in r else "-"
        lines.append(f"{r['model']:22s} {r['search']:6s} {r['opaque']:6d} {r['original_us']:9.1f} {r['best_us']:9.1f} "
                     f"{r['written_us']:9.1f} {r['beyond_runtime']:7.3f}x {r['modeled_speedup']:7.3f}x "
                     f"{r['search_s']:8.2f} {r['wall_s']:7.1f} {r['max_rel_diff']:9.2g} {ort_all:>8s} {ort_none:>8s}")
    return "\n".join(lines)


def run(
    models: Sequence[str] | None,
    device: str,
    out: Path,
    *,
    searches: Sequence[str] = (EGRAPH,),
    seed: int = 0,
    quick: bool = False,
    measure: bool = False,
    options: RunOptions = RunOptions(),
    command: str = "",
) -> list[dict[str, Any]]:
    known = [m for m in models or () if m in EXPORTER_MODELS]
    models = check_models([m for m in models or COMPARE_MODELS if m not in known]) + known
    cells = [
        Cell.of(
            "onnx",
            "experiments.runs.onnx_roundtrip:round_trip",
            model=m,
            search=s,
            device=device,
            seed=seed,
            out=str(out),
            quick=quick,
            measure=measure,
        )
        for m in models
        for s in searches
    ]
    rows = run_cells(cells, out, options=options, desc="onnx")
    write_table(out, "onnx", rows, {"command": command, "device": device, "tolerance": TOLERANCE})
    print(format_rows(rows))
    print(f"wrote {out / 'onnx.csv'} and {out / 'onnx.json'}; ONNX files in {out / 'models'}")
    return rows


def _add_arguments(p: argparse.ArgumentParser) -> None:
    add_models(p, f"the compare suite; exporter-shaped: {', '.join(EXPORTER_MODELS)}")
    p.add_argument("--searches", default=EGRAPH, help=f"comma-separated, of {', '.join(SEARCHES)} (default {EGRAPH})")
    p.add_argument("--quick", action="store_true", help="smoke-test search limits")
    p.add_argument("--measure", action="store_true",
                   help="time both files in onnxruntime on this CPU (1 thread, both optimization levels)")
    add_sweep_options(p, "results/onnx")


def _run(args: argparse.Namespace) -> int:
    run(
        split_list(args.models) or None,
        args.device,
        Path(args.out),
        searches=split_list(args.searches),
        quick=args.quick,
        measure=args.measure,
        seed=args.seed,
        **sweep_kwargs(args),
    )
    return 0


EXPERIMENTS = (
    Experiment(
        "onnx",
        "every benchmark model exported to ONNX, imported, optimized, exported, checked in onnxruntime",
        _add_arguments,
        _run,
        outputs=("onnx.csv", "onnx.json", "models/<model>.onnx", "models/<model>.<search>.onnx"),
        doc="README.md#every-benchmark-model-through-onnx",
    ),
)
