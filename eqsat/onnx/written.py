"""Writing an optimized ONNX model: checked in onnxruntime against the input before it appears
under its name, never over the input, nothing left behind on failure; then imported again and
priced, since the gain a user gets is the file's, not the graph's."""
from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eqsat.files import replace_atomic

TOLERANCE = 1e-3  # relative to the largest output magnitude; onnxruntime runs float32
AGREE = 0.01  # a written file "agrees" with the search's best within 1%


def export_best(imported: Any, best: Any, model: str | Path, out: str | Path, contrib: bool = False) -> bool:
    """Write ``best`` to ``out`` (standard ONNX; ``contrib``: onnxruntime's fused kernels, see
    :func:`eqsat.onnx.save`); when the search kept the input graph, the input file itself (a
    copy): re-exporting an unchanged graph only rewrites what the exporter wrote (the erf GELU,
    a Gather of a packed projection), which onnxruntime may run slower. True when copied."""
    from eqsat import onnx as onnx_io

    if best.outputs == imported.graph.outputs:  # structural: the same nodes computing the same outputs
        copy_model(model, out, imported.external_data)
        return True
    onnx_io.save(imported, best, out, dtype=onnx_io.interface_dtype(imported), contrib=contrib)
    return False


def copy_model(model: str | Path, out: str | Path, external: bool | None = None) -> None:
    """Copy the file ``model`` to ``out``; one whose weights live in external data files gets them
    inline: copied alone into another folder, it named data files that are not there (onnxruntime
    refused it after the whole search). ``external``: whether it does, when the caller read the
    file already (None: read here; parsing a 440 MB BERT again took 2-3 s)."""
    import onnx

    from eqsat.onnx.reader import uses_external_data

    if external is False:
        shutil.copyfile(model, out)
        return
    proto = onnx.load(str(model), load_external_data=False)
    if not uses_external_data(proto):
        shutil.copyfile(model, out)
        return
    onnx.load_external_data_for_model(proto, str(Path(model).parent))
    if proto.ByteSize() >= 2**31 - 1:
        raise ValueError(f"{model}: its weights in external data exceed the 2 GB an ONNX file holds inline; "
                         f"write --out into the model's own folder")
    onnx.save_model(proto, str(out))


@dataclass(frozen=True)
class Written:
    """A file :func:`write_optimized` wrote: where, onnxruntime's largest relative difference to
    the input, the ops the importer kept opaque, whether it is the input copied, which ONNX ops it
    may use (``standard`` or ``onnxruntime``), and the ops of the input file."""

    out: str
    max_rel_difference: float
    opaque: tuple[str, ...]
    input_copied: bool
    onnx_ops: str
    ops_in: tuple[tuple[str, int], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"out": self.out, "max_rel_difference": self.max_rel_difference, "opaque": list(self.opaque),
                "input_copied": self.input_copied, "onnx_ops": self.onnx_ops}


def write_optimized(imported: Any, best: Any, model: str | Path, out: str | Path, contrib: bool = False) -> Written:
    """Export ``best`` to ``out`` (:func:`export_best`) after checking it against ``model`` in
    onnxruntime. A model that differs beyond tolerance, or any failure, writes nothing."""
    from eqsat import onnx as onnx_io

    checked: dict[str, Any] = {}

    def write_and_check(tmp: str) -> None:
        checked["unchanged"] = export_best(imported, best, model, tmp, contrib)
        checked["diff"] = diff = onnx_io.max_difference(model, tmp)
        if not diff <= TOLERANCE:
            raise ValueError(f"{out}: the optimized model differs from {model} by {diff:.3g} (relative) in "
                             f"onnxruntime; nothing written")

    replace_atomic(out, write_and_check)
    return Written(str(out), checked["diff"], tuple(imported.opaque), checked["unchanged"],
                   "onnxruntime" if contrib else "standard", tuple(sorted(imported.ops.items())))


def written_cost(path: str | Path, best_us: float, device: Any, batch: int = 1,
                 dims: dict[str, int] | None = None, graph: Any = None) -> dict[str, Any]:
    """Import a written file again and price it as the search priced its best graph, as a runtime
    runs it: the gain a user gets is the file's, not the graph's (a fusion the export had to split
    shows here). A standard file writes a fused conv as Conv then its activation, which every
    runtime fuses again, so a roofline device prices the file after onnxruntime's own fusions
    (:func:`eqsat.onnx.runtime_baseline.runtime_baseline`); the measured device prices those
    fusions itself. ``device``: a name, or the cost model the search used (a calibrated one).
    ``graph``: the file's graph, when the caller holds it already (a file that is the input copied
    imports as the input did: importing a 440 MB BERT again held a second copy of its weights)."""
    from eqsat import onnx as onnx_io
    from eqsat.cost.registry import cost_model
    from eqsat.onnx.runtime_baseline import runtime_baseline

    model = cost_model(device)
    if graph is None:
        graph = onnx_io.load(path, batch=batch, dims=dims).graph
    latency_us = model.latency_us(graph)
    if latency_us is None:  # a model of kernels alone: the runtime's own fusions first
        written_us = runtime_baseline(graph, model)["runtime_us"]
    else:
        written_us = model.graph_time_us(graph)
    gap = (written_us - best_us) / best_us if best_us > 0 else 0.0
    return {"written_us": written_us, "written_vs_best": gap, "written_agrees": abs(gap) <= AGREE,
            "written_latency_us": latency_us}


FILE_CHECK_SECONDS = 2.0  # the written file against the input in onnxruntime: this long once each ran ...
# (half a second let T5's file, 0.966x in 40 runs, through at 0.990x)
FILE_CHECK_RUNS = 8  # ... this many times (over its sessions)
FILE_CHECK_MORE = 4  # times as many runs, when the check contradicts the search's predicted gain


def timed_in_onnxruntime(model: str | Path, out: str | Path, key: str, threads: int = 1,
                         runs: int = FILE_CHECK_RUNS) -> dict[str, float]:
    """The input file, the written file and the input again, timed end to end in onnxruntime on
    this CPU (``ORT_ENABLE_ALL``, interleaved, ``runs`` runs each at least, then until
    :data:`FILE_CHECK_SECONDS` have passed): what the user's file becomes. The input's two
    timings give the noise. The timings are recorded in the measurement database under ``key``
    (the two graphs' digests), as ort-cpu's are, so the same command decides alike when run
    again."""
    from eqsat.cost.measured.base import relative_gap
    from eqsat.cost.measured.database import Context, MeasurementDB, default_path
    from eqsat.cost.measured.timer import time_files
    from eqsat.onnx.writer import EXPORT_TAG

    def time_them() -> list[Any]:
        # the written file first: its inputs' sizes are fixed where the input's were symbolic, and
        # the inputs are drawn from the first file's
        return time_files([out, model, model], threads=threads, max_seconds=FILE_CHECK_SECONDS, min_runs=runs)
    db = MeasurementDB.shared(Context.here(threads), default_path())
    more = f"{FILE_CHECK_SECONDS:g}s:" + ("" if runs == FILE_CHECK_RUNS else f"{runs}:")
    keys = [f"file-check:{EXPORT_TAG}{more}{key}:{k}" for k in ("written", "input", "again")]
    after, before, again = db.measure_all(keys, time_them)
    return {"ort_input_us": before.median_us, "ort_written_us": after.median_us,
            "ort_noise": relative_gap(before.median_us, again.median_us)}
