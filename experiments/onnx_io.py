"""Writing an optimized ONNX model the way the CLI promises: checked in onnxruntime against the
input before it appears under its name, never over the input, nothing left behind on failure."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from eqsat.files import replace_atomic

TOLERANCE = 1e-3  # relative to the largest output magnitude; onnxruntime runs float32


def check_out_path(model: str, out: str | None) -> None:
    """Refuse a missing ``--out`` (that it is no input, no other output and writable the CLI checks
    for every command: :func:`experiments.command.check_paths`)."""
    if not out:
        raise ValueError("optimizing an .onnx file needs --out for the optimized model")


def export_best(imported: Any, best: Any, model: str | Path, out: str | Path, contrib: bool = False) -> bool:
    """Write ``best`` to ``out`` (standard ONNX; ``contrib``: onnxruntime's fused kernels, see
    :func:`eqsat.onnx.save`); when the search kept the input graph, the input file itself (a
    copy): re-exporting an unchanged graph only rewrites what the exporter wrote (the erf GELU,
    a Gather of a packed projection), which onnxruntime may run slower. True when copied."""
    import shutil

    from eqsat import onnx as onnx_io

    if best.outputs == imported.graph.outputs:  # structural: the same nodes computing the same outputs
        shutil.copyfile(model, out)
        return True
    onnx_io.save(imported, best, out, dtype=onnx_io.interface_dtype(imported), contrib=contrib)
    return False


def write_optimized(imported: Any, best: Any, model: str, out: str, contrib: bool = False) -> dict[str, Any]:
    """Export ``best`` to ``out`` (:func:`export_best`) after checking it against ``model`` in
    onnxruntime; returns what was checked. A model that differs beyond tolerance, or any failure,
    writes nothing."""
    from eqsat import onnx as onnx_io

    checked: dict[str, Any] = {}

    def write_and_check(tmp: str) -> None:
        checked["unchanged"] = export_best(imported, best, model, tmp, contrib)
        checked["diff"] = diff = onnx_io.max_difference(model, tmp)
        if not diff <= TOLERANCE:
            raise ValueError(f"{out}: the optimized model differs from {model} by {diff:.3g} (relative) in "
                             f"onnxruntime; nothing written")

    replace_atomic(out, write_and_check)
    kept = " (the search kept the input: the input file, copied)" if checked["unchanged"] else ""
    print(f"wrote {out}{kept}; onnxruntime max relative difference to {model}: {checked['diff']:.2g} "
          f"(ops in: {', '.join(f'{k} {v}' for k, v in sorted(imported.ops.items()))})")
    print(f"opaque ops (kept exactly, not optimized): {', '.join(imported.opaque) or 'none'}")
    return {"out": str(out), "max_rel_difference": checked["diff"], "opaque": list(imported.opaque),
            "input_copied": checked["unchanged"], "onnx_ops": "onnxruntime" if contrib else "standard"}


AGREE = 0.01  # a written file "agrees" with the search's best within 1%


def written_cost(path: str | Path, best_us: float, device: Any, batch: int = 1,
                 dims: dict[str, int] | None = None) -> dict[str, Any]:
    """Import a written file again and price it as the search priced its best graph, as a runtime
    runs it: the gain a user gets is the file's, not the graph's (a fusion the export had to split
    shows here). A standard file writes a fused conv as Conv then its activation, which every
    runtime fuses again, so a roofline device prices the file after onnxruntime's own fusions
    (:func:`experiments.runs.runtime_baseline.runtime_baseline`); the measured device prices those
    fusions itself. ``device``: a name, or the cost model the search used (a calibrated one)."""
    from eqsat import onnx as onnx_io
    from eqsat.cost.roofline import cost_model
    from experiments.runs.runtime_baseline import runtime_baseline

    model = cost_model(device)
    graph = onnx_io.load(path, batch=batch, dims=dims).graph
    latency_us = model.latency_us(graph)
    if latency_us is None:  # a model of kernels alone: the runtime's own fusions first
        written_us = runtime_baseline(graph, model)["runtime_us"]
    else:
        written_us = model.graph_time_us(graph)
    gap = (written_us - best_us) / best_us if best_us > 0 else 0.0
    return {"written_us": written_us, "written_vs_best": gap, "written_agrees": abs(gap) <= AGREE,
            "written_latency_us": latency_us}


def price_written(args: Any, best_us: float, model: Any = None) -> dict[str, Any]:
    """:func:`written_cost` of ``args.out`` on ``model`` (default ``args.device``), printed for the user."""
    from experiments.command import parse_dims

    row = written_cost(args.out, best_us, model if model is not None else args.device, args.batch,
                       parse_dims(args.dim))
    note = ("agrees" if row["written_agrees"] else
            f"differs by {row['written_vs_best']:+.1%}: part of the reported gain is not in the file")
    print(f"the written file, imported again, costs {row['written_us']:.2f} µs (search's best {best_us:.2f} µs): "
          f"{note}")
    return row


ORT_LEVELS = ("ENABLE_ALL", "DISABLE_ALL")


def ort_latency_ms(before: str, after: str, level: str, runs: int = 15, seed: int = 0) -> tuple[float, float]:
    """Median onnxruntime CPU latency (ms) of two models on the same inputs, 1 thread, run
    alternately (:func:`eqsat.cost.measured.timer.time_files`) with graph optimizations ``level``."""
    from eqsat.cost.measured.timer import time_files

    a, b = time_files([before, after], level, runs, seed)
    return a.median_us / 1e3, b.median_us / 1e3
