"""The model zoo a new user would try: twelve current architectures, exporter-shaped.

Each entry of :data:`ZOO` builds one ONNX file with ``onnx.helper`` (no PyTorch) the way
PyTorch's dynamo exporter writes the model at opset 18-20, with random weights from a seed and
batch 1 (:mod:`experiments.zoo.net` holds the exporter's habits). A builder takes its sizes as
keyword parameters, defaulting to the full model; ``small`` is a size that builds and runs in a
test's time. The older exporter-shaped models are in :mod:`experiments.zoo.legacy`.

The builders, by family:

- ``resnets`` — ResNet-50, DenseNet-121, RegNetY-400MF
- ``mobile`` — MobileNetV3-Small, EfficientNet-B0, ShuffleNetV2
- ``convnext`` — ConvNeXt-Tiny
- ``transformers`` — ViT and GPT-2
- ``llama`` — a LLaMA decoder block
- ``lora`` — a LoRA MLP, as PEFT's ``lora.Linear`` exports
- ``unet`` — a small UNet

``hf`` is no part of :data:`ZOO`: models built from ``transformers`` and ``timm`` configs (the ``hf``
extra) and exported by PyTorch itself.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from experiments.zoo.convnext import convnext_tiny
from experiments.zoo.llama import llama_block
from experiments.zoo.lora import lora_mlp
from experiments.zoo.mobile import efficientnet_b0, mobilenet_v3_small, shufflenet_v2
from experiments.zoo.resnets import densenet121, regnety_400mf, resnet50
from experiments.zoo.transformers import gpt2, vit
from experiments.zoo.unet import unet


@dataclass(frozen=True)
class ZooModel:
    """One architecture: its builder ``build(path, seed, **sizes)`` and a small size for tests."""

    name: str
    build: Callable[..., Path]
    small: Mapping[str, Any] = field(default_factory=dict)

    def write(self, path: str | Path, seed: int = 0, small: bool = False) -> Path:
        return self.build(path, seed, **(dict(self.small) if small else {}))


ZOO: dict[str, ZooModel] = {m.name: m for m in (
    ZooModel("resnet50", resnet50, {"size": 32, "width": 8, "layers": (1, 1, 1, 1), "classes": 10}),
    ZooModel("mobilenet_v3_small", mobilenet_v3_small, {"size": 32, "blocks": 5, "classes": 10}),
    ZooModel("efficientnet_b0", efficientnet_b0, {"size": 32, "stages": 3, "classes": 10}),
    ZooModel("shufflenet_v2", shufflenet_v2, {"size": 32, "repeats": (1, 2, 1),
                                              "channels": (8, 16, 32, 64, 64), "classes": 10}),
    ZooModel("densenet121", densenet121, {"size": 32, "blocks": (2, 3), "growth": 8, "init": 16, "bn_size": 2,
                                          "classes": 10}),
    ZooModel("convnext_tiny", convnext_tiny, {"size": 32, "depths": (1, 1), "dims": (16, 32), "classes": 10}),
    ZooModel("regnety_400mf", regnety_400mf, {"size": 32, "depths": (1, 2), "widths": (16, 32), "classes": 10}),
    ZooModel("vit", vit, {"size": 32, "patch": 8, "d": 32, "heads": 2, "layers": 1, "mlp": 64, "classes": 10}),
    ZooModel("gpt2", gpt2, {"seq": 16, "d": 32, "heads": 2, "layers": 2, "vocab": 100}),
    ZooModel("llama_block", llama_block, {"seq": 16, "d": 64, "heads": 4, "ffn": 128}),
    ZooModel("lora_mlp", lora_mlp, {"tokens": 16, "d": 64, "hidden": 128, "rank": 4}),
    ZooModel("unet", unet, {"size": 16, "width": 4, "levels": 2}),
)}
"""Name -> the architecture's builder, in the order of the results table."""


def write_zoo(folder: str | Path, names: Sequence[str] | None = None, seed: int = 0, small: bool = False) -> list[Path]:
    """Write ``names`` (default all of :data:`ZOO`) as ``folder/NAME.onnx``; the paths, in order."""
    unknown = [n for n in names or () if n not in ZOO]
    if unknown:
        raise ValueError(f"unknown zoo model {', '.join(unknown)}; the zoo has {', '.join(ZOO)}")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    return [ZOO[n].write(folder / f"{n}.onnx", seed, small) for n in (names or ZOO)]
