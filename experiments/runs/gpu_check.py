"""``eqsat-lab experiment gpu-check``: the searching half of the GPU check.

Every model (the ten benchmark graphs and the twelve zoo models by default) is optimized by the
e-graph on the ``h100`` roofline, verified against its input, priced on the ``h100`` and ``h200``
rooflines, and written without weights (:mod:`eqsat.ir.graphfile`) into ``--out`` with a
manifest; the search's graph is also listed run ``channels_last`` for a model with 4-D weights or
inputs (PyTorch leaves the layout to its caller). The measuring half,
:mod:`eqsat.pytorch.gpu_check`, needs only numpy and PyTorch: copy the folder to a CUDA machine
and run ``python -m eqsat.pytorch.gpu_check FOLDER OUT`` there. ``--measure`` runs it here too (on
this machine's GPU if it has one, else as a CPU dry run).
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from eqsat.cost.devices import DEFAULT_DEVICE, GPU_CHECK_PROFILES
from eqsat.errors import EqsatError
from eqsat.searches import EGRAPH
from experiments.command import Experiment, add_models, positive_int, seed_int, split_list

BENCHMARKS = ("resnet_block", "qkv", "lora", "bert", "nasrnn", "resnext50", "nasnet_a", "inception_v3",
              "squeezenet", "vgg19")
PRICED_ON = GPU_CHECK_PROFILES
SEARCH, DEVICE = EGRAPH, DEFAULT_DEVICE
LAID_OUT = f"{SEARCH}+channels_last"  # the variant that runs the search's graph in channels_last
FIXED_LIMIT = 4096  # fixed weights (biases, masks, tables) above this many elements travel as a seed, not values


def model_graph(model: str, seed: int, quick: bool) -> Any:
    """A benchmark graph as built, or a zoo or transformers/timm model as its ONNX file imports."""
    from eqsat.models import MODELS, build

    if model in MODELS:
        from experiments.runs.real import QUICK_MODELS

        return build(model, **(QUICK_MODELS.get(model, {}) if quick else {}))
    from eqsat import onnx as onnx_io
    from experiments.zoo import ZOO
    from experiments.zoo.hf import HF, write_hf

    if model not in ZOO and model not in HF:
        raise ValueError(f"--models: unknown model {model!r} (benchmarks: {', '.join(BENCHMARKS)}; zoo: "
                         f"{', '.join(ZOO)}; transformers/timm: {', '.join(HF)})")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{model}.onnx"
        path = ZOO[model].write(path, seed, small=quick) if model in ZOO else write_hf(model, path, seed)
        return onnx_io.load(path).graph


def search_model(model: str, out: Path, seed: int, quick: bool) -> dict[str, Any]:
    """One model's manifest entry: its graphs written, the search's record, predicted times."""
    from eqsat.cost.costmodel import has_layout
    from eqsat.cost.registry import cost_model
    from eqsat.ir.graphfile import write_graph
    from experiments.searches import search_result

    graph = model_graph(model, seed, quick)
    start = time.perf_counter()
    row, result = search_result(graph, model, SEARCH, DEVICE, seed, quick)
    variants = {"original": graph, SEARCH: result.best}
    paths = {}
    for name, g in variants.items():
        paths[name] = f"graphs/{model}.{name}.json"
        write_graph(g, out / paths[name], FIXED_LIMIT)
    layouts = {}
    if has_layout(result.best):  # the optimized graph again, its 4-D tensors channels_last (same file)
        variants[LAID_OUT] = result.best
        paths[LAID_OUT], layouts[LAID_OUT] = paths[SEARCH], "channels_last"
    predicted = {dev: {name: cost_model(dev).graph_time_us(g) for name, g in variants.items()} for dev in PRICED_ON}
    print(f"{model}: {SEARCH} on {DEVICE} in {time.perf_counter() - start:.1f} s, predicted "
          + ", ".join(f"{dev} {p['original']:.1f} -> {p[SEARCH]:.1f} µs" for dev, p in predicted.items()), flush=True)
    return {"model": model, "graphs": paths, "layouts": layouts, "predicted": predicted, "search": {
        "search": SEARCH, "device": DEVICE, "search_s": row["search_s"], "stop": row["stop"],
        "verified": row["verified"], "changed": result.best != graph}}


def run(models: list[str], out: Path, seed: int = 0, quick: bool = False) -> Path:
    """Write the folder the measuring half reads: ``manifest.json`` and ``graphs/``."""
    from eqsat.files import write_atomic
    from eqsat.pytorch.gpu_check import MANIFEST

    entries = []
    for model in models:
        try:
            entries.append(search_model(model, out, seed, quick))
        except Exception as exc:  # noqa: BLE001 - one model's failure is the manifest's record, not the run's end
            kind = "" if isinstance(exc, EqsatError) else f"{type(exc).__name__}: "
            print(f"{model}: skipped ({kind}{exc})", flush=True)
            entries.append({"model": model, "error": f"{kind}{exc}"})
    manifest = {"seed": seed, "quick": quick, "priced_on": list(PRICED_ON), "models": entries,
                "measure": "python -m eqsat.pytorch.gpu_check FOLDER OUT"}
    write_atomic(out / MANIFEST, json.dumps(manifest, indent=1))
    print(f"wrote {out / MANIFEST} and {2 * sum('graphs' in e for e in entries)} graph files; measure them on a "
          f"CUDA machine with 'python -m eqsat.pytorch.gpu_check {out} OUT'")
    return out / MANIFEST


def default_models() -> list[str]:
    """The ten benchmark graphs, the zoo, and the transformers/timm models this machine can build."""
    from experiments.zoo import ZOO
    from experiments.zoo.hf import available

    return list(BENCHMARKS) + list(ZOO) + available()


def _add_arguments(p: argparse.ArgumentParser) -> None:
    from experiments.zoo import ZOO

    add_models(p, f"the ten benchmark graphs ({', '.join(BENCHMARKS)}), the zoo ({', '.join(ZOO)}) and the "
                  "transformers/timm models that are installed (experiments/zoo/hf.py)")
    p.add_argument("--out", default="results/gpu_check", help="the folder to write (default results/gpu_check)")
    p.add_argument("--seed", type=seed_int, default=0, help="seed of the check's weights and inputs")
    p.add_argument("--quick", action="store_true", help="small sizes and quick search limits (a smoke run)")
    p.add_argument("--measure", action="store_true",
                   help="also run the measuring half here, into OUT/measured (a CPU dry run without a GPU)")
    p.add_argument("--runs", type=positive_int, default=60, help="--measure: timed runs per variant and mode")


def _run(args: argparse.Namespace) -> int:
    models = split_list(args.models) or default_models()
    out = Path(args.out)
    run(models, out, args.seed, args.quick)
    if args.measure:
        from eqsat.pytorch import gpu_check

        return gpu_check.run(out, out / "measured", runs=args.runs)
    return 0


EXPERIMENTS = (
    Experiment("gpu-check", "the GPU check's searching half: each model optimized on the h100 roofline and written "
               "with its predicted times, for 'python -m eqsat.pytorch.gpu_check' on a CUDA machine",
               _add_arguments, _run, outputs=("manifest.json", "graphs/<model>.<variant>.json"),
               doc="gpu_check/README.md"),
)
