"""Models a user brings from ``transformers`` and ``timm``, built from their configs with random
weights (nothing is downloaded), and exported the way a PyTorch user exports them:
``torch.onnx.export(..., dynamo=True)``.

Both libraries are optional (the ``hf`` extra); :func:`available` says which models this machine
can build. Sizes are the libraries' own base configurations, except LLaMA (a 4-layer model of
LLaMA's shape: the 7B one does not fit a test machine) and a sequence of 128 tokens. Attention
runs in its eager form (``attn_implementation="eager"``): matmul, softmax, matmul, as the exporter
writes it, the graph a search can rewrite.
"""
from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eqsat.errors import UnsupportedError

SEQ = 128
IMAGE = 224


@dataclass(frozen=True)
class HfModel:
    """One model: the library it needs and a builder returning ``(module, example_inputs)``."""

    name: str
    library: str
    build: Callable[[], tuple[Any, tuple[Any, ...]]]


def _tokens(vocab: int) -> tuple[Any, ...]:
    import torch

    return (torch.randint(0, vocab, (1, SEQ), generator=torch.Generator().manual_seed(0)),)


def _image() -> tuple[Any, ...]:
    import torch

    return (torch.randn(1, 3, IMAGE, IMAGE, generator=torch.Generator().manual_seed(0)),)


def _text(model_class: str, config_class: str, **config: Any) -> Callable[[], tuple[Any, tuple[Any, ...]]]:
    def build() -> tuple[Any, tuple[Any, ...]]:
        import transformers

        cfg = getattr(transformers, config_class)(**config)
        cfg._attn_implementation = "eager"
        cfg.use_cache = False  # a KV cache in the outputs is no tensor the exporter can write
        model = getattr(transformers, model_class)(cfg)
        return model, _tokens(cfg.vocab_size)
    return build


def _vit() -> tuple[Any, tuple[Any, ...]]:
    import transformers

    cfg = transformers.ViTConfig()
    cfg._attn_implementation = "eager"
    return transformers.ViTModel(cfg), _image()


def _timm(arch: str) -> Callable[[], tuple[Any, tuple[Any, ...]]]:
    def build() -> tuple[Any, tuple[Any, ...]]:
        import timm

        return timm.create_model(arch, pretrained=False), _image()
    return build


HF: dict[str, HfModel] = {m.name: m for m in (
    HfModel("hf_bert", "transformers", _text("BertModel", "BertConfig")),
    HfModel("hf_distilbert", "transformers", _text("DistilBertModel", "DistilBertConfig")),
    HfModel("hf_gpt2", "transformers", _text("GPT2Model", "GPT2Config")),
    HfModel("hf_llama", "transformers", _text("LlamaModel", "LlamaConfig", hidden_size=768, intermediate_size=2048,
                                              num_hidden_layers=4, num_attention_heads=12, num_key_value_heads=12)),
    HfModel("hf_t5_encoder", "transformers", _text("T5EncoderModel", "T5Config")),
    HfModel("hf_vit", "transformers", _vit),
    HfModel("timm_resnet50", "timm", _timm("resnet50")),
    HfModel("timm_efficientnet_b0", "timm", _timm("efficientnet_b0")),
    HfModel("timm_regnetx_002", "timm", _timm("regnetx_002")),
    HfModel("timm_mobilevit_s", "timm", _timm("mobilevit_s")),
)}
"""Name -> the model, in the order of the results tables."""


def available() -> list[str]:
    """The models whose library (and ``onnxscript``, which the exporter needs) is installed."""
    if importlib.util.find_spec("torch") is None or importlib.util.find_spec("onnxscript") is None:
        return []
    return [m.name for m in HF.values() if importlib.util.find_spec(m.library) is not None]


def build_module(name: str, seed: int = 0) -> tuple[Any, tuple[Any, ...]]:
    """The model in eval mode with weights from ``seed``, and its example inputs."""
    import torch

    if name not in HF:
        raise ValueError(f"unknown model {name!r} (transformers/timm models: {', '.join(HF)})")
    if name not in available():
        raise ValueError(f"{name} needs the {HF[name].library} and onnxscript packages ('.[hf]')")
    torch.manual_seed(seed)
    module, inputs = HF[name].build()
    return module.eval(), inputs


def write_hf(name: str, path: str | Path, seed: int = 0) -> Path:
    """Export ``name`` to ``path`` with PyTorch's dynamo exporter (as a user would)."""
    import torch

    module, inputs = build_module(name, seed)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with torch.no_grad():
            program = torch.onnx.export(module, inputs, dynamo=True, verbose=False)
    except Exception as exc:  # noqa: BLE001 - the exporter's many error types become one sentence
        reason = next((line for line in str(exc).splitlines() if "Error" in line or "error" in line), str(exc))
        raise UnsupportedError(f"{name}: PyTorch's ONNX exporter failed: {reason.strip()[:200]}") from None
    program.save(str(path))
    return path
