"""Writing an optimized ONNX model the way the CLI promises: checked in onnxruntime against the
input before it appears under its name, never over the input, nothing left behind on failure."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from eqsat.files import replace_atomic

TOLERANCE = 1e-3  # relative to the largest output magnitude; onnxruntime runs float32


def check_out_path(model: str, out: str | None) -> None:
    """Refuse a missing ``--out`` and one that names the input model itself."""
    if not out:
        raise ValueError("optimizing an .onnx file needs --out for the optimized model")
    if Path(out).resolve() == Path(model).resolve():
        raise ValueError(f"--out {out} is the input model; write the optimized model to another file")


def write_optimized(imported: Any, best: Any, model: str, out: str) -> dict[str, Any]:
    """Export ``best`` to ``out`` after checking it against ``model`` in onnxruntime; returns what
    was checked. A model that differs beyond tolerance, or any failure, writes nothing."""
    from eqsat import onnx as onnx_io

    checked: dict[str, float] = {}

    def write_and_check(tmp: str) -> None:
        onnx_io.save(imported, best, tmp, dtype=onnx_io.interface_dtype(imported))
        checked["diff"] = diff = onnx_io.max_difference(model, tmp)
        if not diff <= TOLERANCE:
            raise ValueError(f"{out}: the optimized model differs from {model} by {diff:.3g} (relative) in "
                             f"onnxruntime; nothing written")

    replace_atomic(out, write_and_check)
    print(f"wrote {out}; onnxruntime max relative difference to {model}: {checked['diff']:.2g} "
          f"(ops in: {', '.join(f'{k} {v}' for k, v in sorted(imported.ops.items()))})")
    print(f"opaque ops (kept exactly, not optimized): {', '.join(imported.opaque) or 'none'}")
    return {"out": str(out), "max_rel_difference": checked["diff"], "opaque": list(imported.opaque)}
