"""Benchmark graph builders, by name.

``MODELS`` maps a name to its builder; every builder takes keyword size
parameters whose defaults follow the papers. ``build(name, **params)`` is
what the CLI and the experiments call.

The builders: ``cnn`` (the convolutional benchmarks of TASO's examples and TENSAT's suite: ResNeXt,
NasNet-A, Inception-v3, SqueezeNet, VGG, ResNets, CSRNet), ``transformer`` (the attention and RNN
ones: BERT, NasRNN), ``case_studies`` (the reference's three case studies: a ResNet block, QKV,
LoRA); ``builder`` holds the helpers they are written with (fresh weight names, layer shorthands).
"""
from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from eqsat.ir.graph import Graph
from eqsat.models.case_studies import lora, qkv, resnet_block
from eqsat.models.cnn import (
    csrnet_backend,
    inception_v3,
    nasnet_a,
    resnet18_stage4,
    resnet50,
    resnext50,
    squeezenet,
    vgg19,
)
from eqsat.models.transformer import bert, nasrnn

MODELS: dict[str, Callable[..., Graph]] = {
    "resnet_block": resnet_block,
    "qkv": qkv,
    "lora": lora,
    "bert": bert,
    "nasrnn": nasrnn,
    "resnext50": resnext50,
    "nasnet_a": nasnet_a,
    "inception_v3": inception_v3,
    "squeezenet": squeezenet,
    "vgg19": vgg19,
    "resnet50": resnet50,
    "resnet18_stage4": resnet18_stage4,
    "csrnet_backend": csrnet_backend,
}
CASE_STUDIES = ("resnet_block", "qkv", "lora")
TENSAT_SUITE = ("bert", "nasrnn", "resnext50", "nasnet_a", "inception_v3", "squeezenet", "vgg19")
PET_MODELS = ("resnet18_stage4", "csrnet_backend", "inception_v3", "bert", "resnext50")  # PET's evaluation


def model_params(name: str) -> dict[str, Any]:
    """The size parameters of a builder with their defaults."""
    sig = inspect.signature(_builder(name))
    return {k: p.default for k, p in sig.parameters.items()}


def _builder(name: str) -> Callable[..., Graph]:
    try:
        return MODELS[name]
    except KeyError:
        raise KeyError(f"unknown model {name!r} (known: {', '.join(MODELS)})") from None


def build(name: str, **params: Any) -> Graph:
    """Build benchmark ``name``; unknown parameters are an error naming the known ones."""
    builder = _builder(name)
    known = model_params(name)
    unknown = set(params) - set(known)
    if unknown:
        raise ValueError(f"model {name!r} has no parameter(s) {', '.join(sorted(unknown))} "
                        f"(known: {', '.join(f'{k}={v}' for k, v in known.items())})")
    try:
        return builder(**params)
    except TypeError as exc:  # a size given as text (--param layers=abc)
        given = ", ".join(f"{k}={v!r}" for k, v in params.items())
        raise ValueError(f"model {name!r}: bad parameter value in {given} ({exc}); sizes are integers") from None


__all__ = ["MODELS", "CASE_STUDIES", "TENSAT_SUITE", "PET_MODELS", "build", "model_params"]
