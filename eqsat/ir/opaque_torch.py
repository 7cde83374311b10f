"""Opaque ONNX nodes PyTorch computes itself, the way onnxruntime does: Gather, GatherElements and
the Resize modes ``torch.nn.functional.interpolate`` has.

An opaque node holds its ONNX node (see :func:`eqsat.ops._opaque_plan`: its op type, attributes
and input slots, ``int`` k for its k-th tensor input, an array for a constant stored in it, None for
an absent input). Each entry of :data:`TORCH_OPAQUE` says which such nodes it computes (a check on
the attributes and slots) and how, on torch tensors; any other node runs through the opaque runner
on the host (onnxruntime), correct but a host sync. The IR holds reals, so indices arrive as floats
and are cast to int64 here.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from eqsat.errors import UnsupportedError

Slot = Any  # int (the node's k-th tensor input), an array (a constant stored in the node), None (absent)


@dataclass(frozen=True)
class TorchOpaque:
    """One ONNX op type: ``accepts(attrs, slots, opset)`` whether PyTorch computes this node as
    onnxruntime does; ``run(t, attrs, values, slots, shape)`` it: ``values`` the node's inputs as
    tensors (a stored constant made a tensor on the inputs' device once, an absent input None),
    ``slots`` as in the plan (constants as arrays, read on the host without a sync), ``shape`` the
    output's."""

    accepts: Callable[[dict[str, Any], Sequence[Slot], int], bool]
    run: Callable[[Any, dict[str, Any], list[Any], Sequence[Slot], tuple[int, ...]], Any]


def _indices(t: Any, idx: Any, size: int) -> Any:
    """ONNX indices (floats in the IR) as int64, negative ones counted from the end of a ``size`` axis."""
    idx = idx.to(t.int64)
    return t.where(idx < 0, idx + size, idx)


def _gather(t: Any, attrs: dict[str, Any], xs: list[Any], slots: Sequence[Slot], shape: tuple[int, ...]) -> Any:
    data, idx = xs[:2]
    axis = attrs.get("axis", 0) % data.ndim
    picked = t.index_select(data, axis, _indices(t, idx, data.shape[axis]).reshape(-1))
    return picked.reshape(tuple(data.shape[:axis]) + tuple(idx.shape) + tuple(data.shape[axis + 1:]))


def _gather_elements(t: Any, attrs: dict[str, Any], xs: list[Any], slots: Sequence[Slot],
                     shape: tuple[int, ...]) -> Any:
    data, idx = xs[:2]
    axis = attrs.get("axis", 0) % data.ndim
    return t.gather(data, axis, _indices(t, idx, data.shape[axis]))


def _two_present(attrs: dict[str, Any], slots: Sequence[Slot], opset: int) -> bool:
    return len(slots) >= 2 and all(s is not None for s in slots[:2])


def _text(attrs: dict[str, Any], name: str, default: str) -> str:
    value = attrs.get(name, default)
    return value.decode() if isinstance(value, bytes) else str(value)


_LINEAR = {1: "linear", 2: "bilinear", 3: "trilinear"}


def _resize_mode(attrs: dict[str, Any]) -> tuple[str, bool | None] | None:
    """The ``interpolate`` mode and ``align_corners`` computing a Resize of these attributes as
    ONNX defines it (opset 11 on), or None: linear with half-pixel or align-corners coordinates and
    no antialias; nearest with asymmetric coordinates rounded down (``nearest``) or half-pixel ones
    rounded half up (``nearest-exact``)."""
    mode = _text(attrs, "mode", "nearest")
    coords = _text(attrs, "coordinate_transformation_mode", "half_pixel")
    if attrs.get("antialias", 0) or "axes" in attrs:
        return None
    if mode == "linear" and coords in ("half_pixel", "align_corners"):
        return "linear", coords == "align_corners"
    rounding = _text(attrs, "nearest_mode", "round_prefer_floor")
    if mode == "nearest" and (coords, rounding) == ("asymmetric", "floor"):
        return "nearest", None
    if mode == "nearest" and (coords, rounding) == ("half_pixel", "round_prefer_ceil"):
        return "nearest-exact", None
    return None


def _resize_accepts(attrs: dict[str, Any], slots: Sequence[Slot], opset: int) -> bool:
    """Opset 11 on, an input tensor of 3 to 5 dimensions, constant (or absent) roi, scales and
    sizes that leave batch and channels alone, and a mode :func:`_resize_mode` knows."""
    if opset < 11 or not slots or not isinstance(slots[0], int) or _resize_mode(attrs) is None:
        return False
    rest = list(slots[1:4]) + [None] * (4 - len(slots))
    if any(isinstance(s, int) for s in rest):  # scales or sizes computed at run time
        return False
    _, scales, sizes = rest[:3]
    if sizes is not None and sizes.size:
        return 3 <= sizes.size <= 5
    return scales is not None and 3 <= scales.size <= 5 and all(float(s) == 1.0 for s in scales.reshape(-1)[:2])


def _resize(t: Any, attrs: dict[str, Any], xs: list[Any], slots: Sequence[Slot], shape: tuple[int, ...]) -> Any:
    x = xs[0]
    if tuple(shape[:2]) != tuple(x.shape[:2]):
        raise UnsupportedError(f"Resize of batch or channels ({tuple(x.shape)} -> {shape}) is no interpolation "
                               f"PyTorch makes")
    mode, corners = _resize_mode(attrs)  # type: ignore[misc]  # accepted: a known mode
    mode = _LINEAR[x.ndim - 2] if mode == "linear" else mode
    scales, sizes = (list(slots[2:4]) + [None, None])[:2]
    if sizes is not None and sizes.size:
        return t.nn.functional.interpolate(x, size=tuple(shape[2:]), mode=mode, align_corners=corners)
    factors = tuple(float(s) for s in scales.reshape(-1)[2:])
    return t.nn.functional.interpolate(x, scale_factor=factors, mode=mode, align_corners=corners,
                                       recompute_scale_factor=False)


TORCH_OPAQUE: dict[str, TorchOpaque] = {
    "Gather": TorchOpaque(_two_present, _gather),
    "GatherElements": TorchOpaque(_two_present, _gather_elements),
    "Resize": TorchOpaque(_resize_accepts, _resize),
}
"""ONNX op type -> how PyTorch computes it (see the module doc)."""
