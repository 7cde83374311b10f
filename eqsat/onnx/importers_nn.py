"""Importers of the convolutional family: Conv (and onnxruntime's FusedConv), pools, BatchNormalization,
Clip as an activation.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from eqsat.ir.graph import Node, node
from eqsat.ir.ops import conv_pads
from eqsat.onnx.common import Decline, fused_activation
from eqsat.onnx.importers_base import _Importer, _inputs, _new_weight


def _pads(imp: _Importer, n: Any, a: dict[str, Any]) -> tuple[int, int, int, int]:
    """ONNX's 2-D pads: (top, left, bottom, right)."""
    pads = tuple(int(p) for p in a.get("pads", [0, 0, 0, 0]))
    if a.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
        raise Decline("auto_pad")
    if len(pads) != 4:
        raise Decline(f"non-2-D pads {list(pads)}")
    return pads  # type: ignore[return-value]


def _canonical_pad(pads: tuple[int, int, int, int], x: tuple[int, ...], kernel: tuple[int, ...],
                   stride: tuple[int, ...], dilation: tuple[int, ...]) -> Any:
    """``"same"`` when the pads are exactly SAME padding (the rule files' form; with a stride it
    may put one more row or column after than before), the symmetric pads, or a Decline."""
    same = all(conv_pads("same", size, k, st, d)[:2] == (before, after)
               for before, after, size, k, st, d in zip(pads[:2], pads[2:], x[2:], kernel, stride, dilation))
    if same:
        return "same"
    if pads[:2] != pads[2:]:
        raise Decline(f"asymmetric pads {list(pads)} that are not SAME padding")
    return pads[:2]


def _conv(imp: _Importer, n: Any, a: dict[str, Any]) -> list[Node]:
    if len(imp.value(n, n.input[0]).shape) != 4:
        raise Decline("only 2-D convolutions are mapped")
    x, w = imp.value(n, n.input[0]), imp.value(n, n.input[1])
    bias = [imp.value(n, n.input[2])] if len(_inputs(n)) > 2 else []
    stride, dilation = tuple(a.get("strides", [1, 1])), tuple(a.get("dilations", [1, 1]))
    pad = _canonical_pad(_pads(imp, n, a), x.shape, w.shape[2:], stride, dilation)
    act = fused_activation(a)  # FusedConv: onnxruntime's conv with a fused activation
    if act is None:
        raise Decline(f"FusedConv activation {a.get('activation')!r} {list(a.get('activation_params', []))}")
    return [node("conv2d", x, w, *bias, stride=stride, pad=pad, dilation=dilation, groups=int(a.get("group", 1)),
                 act=act)]


def _batchnorm(imp: _Importer, n: Any, a: dict[str, Any]) -> list[Node]:
    """Inference BatchNormalization as one ``affine`` node: scale = gamma / sqrt(var + eps) and
    shift = beta - mean * scale become weights (the op's two-parameter form). Folding into a
    preceding conv is left to the rules. Training mode (batch statistics) is never mapped."""
    if a.get("training_mode", 0) or len(n.output) > 1:
        raise Decline("training mode")
    x = imp.value(n, n.input[0])
    try:
        gamma, beta, mean, var = (imp.consts[i].astype(np.float64) for i in n.input[1:5])
    except KeyError:
        raise Decline("statistics are not initializers") from None
    scale = gamma / np.sqrt(var + float(a.get("epsilon", 1e-5)))
    shift = beta - mean * scale
    base = n.name or n.output[0]
    leaves = [_new_weight(imp, f"{base}.bn_{suffix}", data) for suffix, data in (("scale", scale), ("shift", shift))]
    return [node("affine", x, *leaves, axis=1)]


def _ceil_pads(pads: tuple[int, int, int, int], x: tuple[int, ...], kernel: tuple[int, ...],
               stride: tuple[int, ...]) -> tuple[int, int, int, int]:
    """ceil_mode's output size as explicit pads: the rows and columns the last, partial window
    reaches past the end are padding after (a window starting in the padding is dropped, as
    ONNX and PyTorch do). Where the division is exact, ceil_mode changes nothing."""
    after = []
    for k in range(2):
        size, before, end = x[2 + k], pads[k], pads[2 + k]
        span = size + before + end - kernel[k]
        out = -(-span // stride[k]) + 1
        if (out - 1) * stride[k] >= size + before:
            out -= 1
        after.append(end + max((out - 1) * stride[k] + kernel[k] - (size + before + end), 0))
    return pads[0], pads[1], after[0], after[1]


def _pool(op: str) -> Callable[[_Importer, Any, dict[str, Any]], list[Node]]:
    def f(imp: _Importer, n: Any, a: dict[str, Any]) -> list[Node]:
        if op == "pool_avg" and not a.get("count_include_pad", 0) and any(a.get("pads", [0])):
            raise Decline("AveragePool without count_include_pad=1")
        if len(n.output) > 1 or any(d != 1 for d in a.get("dilations", [1])):
            raise Decline("indices output or dilations")
        x, kernel, stride = imp.value(n, n.input[0]), tuple(a["kernel_shape"]), tuple(a.get("strides", [1, 1]))
        pads = _pads(imp, n, a)
        if a.get("ceil_mode", 0) and len(x.shape) == 4:
            ceil = _ceil_pads(pads, x.shape, kernel, stride)
            if ceil != pads and op == "pool_avg":  # the partial window's divisor differs between runtimes
                raise Decline("ceil_mode with a partial last window in an AveragePool")
            pads = ceil  # max pooling: padding never wins, so the partial window is extra padding after
        pad = _canonical_pad(pads, x.shape, kernel, stride, (1, 1))
        return [node(op, x, kernel=kernel, stride=stride, pad=pad)]
    return f


def _global_avg(imp: _Importer, n: Any, a: dict[str, Any]) -> list[Node]:
    x = imp.value(n, n.input[0])
    return [node("pool_avg", x, kernel=x.shape[2:], stride=(1, 1), pad=(0, 0))]


def _clip(imp: _Importer, n: Any, a: dict[str, Any]) -> list[Node]:
    """Clip with constant bounds: [0, 6] is relu6 (MobileNet's ReLU6), [0, +inf) is relu."""
    ins = list(n.input) + ["", ""]
    bounds = []
    for k, attr, default in ((1, "min", -np.inf), (2, "max", np.inf)):
        if ins[k]:
            bounds.append(float(np.asarray(imp.const(n, ins[k])).reshape(())))
        else:
            bounds.append(float(a.get(attr, default)))  # opset < 11 kept the bounds as attributes
    x = imp.value(n, n.input[0])
    if bounds == [0.0, 6.0]:
        return [node("relu6", x)]
    if bounds == [0.0, np.inf]:
        return [node("relu", x)]
    raise Decline(f"Clip bounds {bounds} (only [0, 6] and [0, inf) are in the op table)")


def _conv_transpose(imp: _Importer, n: Any, a: dict[str, Any]) -> list[Node]:
    """2-D ConvTranspose with explicit pads; ``output_shape`` and ``auto_pad`` decline (their pads
    depend on a convention the op table does not keep)."""
    x, w = imp.value(n, n.input[0]), imp.value(n, n.input[1])
    if len(x.shape) != 4:
        raise Decline("only 2-D transposed convolutions are mapped")
    if "output_shape" in a or a.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
        raise Decline("output_shape or auto_pad")
    bias = [imp.value(n, n.input[2])] if len(_inputs(n)) > 2 else []
    return [node("conv_transpose", x, w, *bias, stride=tuple(a.get("strides", [1, 1])),
                 pads=tuple(a.get("pads", [0, 0, 0, 0])), output_padding=tuple(a.get("output_padding", [0, 0])),
                 dilation=tuple(a.get("dilations", [1, 1])), groups=int(a.get("group", 1)))]
