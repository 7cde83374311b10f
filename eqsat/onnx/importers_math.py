"""Importers of products and elementwise math: MatMul, Gemm (and onnxruntime's fused forms), Add/Mul
with their broadcasts, Div, Softmax, LayerNormalization, Gelu.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from eqsat.ir.graph import Node, node
from eqsat.onnx.common import Decline, fused_activation
from eqsat.onnx.importers_base import (
    _broadcast,
    _broadcast_shape,
    _expand_to,
    _Importer,
    _inputs,
    _new_weight,
    _scalar,
    _vector_axis,
)


def _matmul(imp: _Importer, n: Any, a: dict[str, Any]) -> list[Node]:
    return [_product(imp.value(n, n.input[0]), imp.value(n, n.input[1]))]


def _product(x: Node, w: Node) -> Node:
    """ONNX MatMul (numpy broadcasting): equal batch dimensions map to ``matmul``; an N-D
    activation times a 2-D weight (every ``nn.Linear`` on a batch) folds its batch into the rows
    (reshape, 2-D matmul, reshape back). When the right operand's batch dimensions (after
    dropping leading 1s) are the trailing ones of the left's, the left's extra leading
    dimensions are moved next to its rows (transpose, reshape), multiplied, and moved back.
    Other broadcasts and 1-D operands decline."""
    if len(x.shape) < 2 or len(w.shape) < 2:
        raise Decline("a 1-D MatMul operand")
    if len(x.shape) == len(w.shape) and x.shape[:-2] == w.shape[:-2]:
        return node("matmul", x, w)
    if x.shape[-1] != w.shape[-2]:
        raise Decline(f"inner dimensions {x.shape} x {w.shape}")
    kept = len(w.shape) - 2
    while kept and w.shape[-2 - kept] == 1:  # leading 1s of the right operand broadcast freely
        kept -= 1
    if kept < len(w.shape) - 2:
        w = node("reshape", w, shape=w.shape[len(w.shape) - 2 - kept:])
    if len(w.shape) == 2:
        rows = int(np.prod(x.shape[:-1]))
        flat = node("matmul", node("reshape", x, shape=(rows, x.shape[-1])), w)
        return node("reshape", flat, shape=tuple(x.shape[:-1]) + (w.shape[1],))
    lead, batch = x.shape[:len(x.shape) - len(w.shape)], w.shape[:-2]
    if len(x.shape) <= len(w.shape) or x.shape[len(lead):-2] != batch:
        raise Decline(f"broadcast batch dimensions {x.shape} x {w.shape}")
    p, b, (m, k), n = len(lead), len(batch), x.shape[-2:], w.shape[-1]
    to_front = tuple(range(p, p + b)) + tuple(range(p)) + (p + b, p + b + 1)  # (batch, lead, m, k)
    moved = node("reshape", node("transpose", x, perm=to_front), shape=batch + (int(np.prod(lead)) * m, k))
    y = node("reshape", node("matmul", moved, w), shape=batch + lead + (m, n))
    back = tuple(range(b, b + p)) + tuple(range(b)) + (p + b, p + b + 1)
    return node("transpose", y, perm=back)


def _fused_matmul(imp: _Importer, n: Any, a: dict[str, Any]) -> list[Node]:
    """onnxruntime's FusedMatMul (com.microsoft, what its optimizer makes of a transpose feeding a
    MatMul): the transposes come back as nodes, alpha as a scalar weight."""
    if a.get("transBatchA", 0) or a.get("transBatchB", 0):
        raise Decline("transBatchA/transBatchB")
    xs = []
    for k, flag in ((0, "transA"), (1, "transB")):
        x = imp.value(n, n.input[k])
        if a.get(flag, 0):
            r = len(x.shape)
            if r < 2:
                raise Decline(f"{flag} of a rank-{r} operand")
            x = node("transpose", x, perm=tuple(range(r - 2)) + (r - 1, r - 2))
        xs.append(x)
    y = _product(*xs)
    alpha = float(a.get("alpha", 1.0))
    return [y if alpha == 1.0 else node("smul", y, _new_weight(imp, f"{n.output[0]}:alpha", alpha))]


def _gemm(imp: _Importer, n: Any, a: dict[str, Any]) -> list[Node]:
    if a.get("alpha", 1.0) != 1.0 or a.get("beta", 1.0) != 1.0 or a.get("transA", 0):
        raise Decline("alpha, beta or transA")
    b = imp.value(n, n.input[1])
    if a.get("transB", 0):
        b = node("transpose", b, perm=(1, 0))
    act = fused_activation(a)  # FusedGemm: onnxruntime's Gemm with a fused activation
    if act is None or (act != "none" and len(_inputs(n)) > 2):  # the activation follows the bias there
        raise Decline(f"FusedGemm activation {a.get('activation')!r} with a bias or not in the table")
    y = node("matmul", imp.value(n, n.input[0]), b, act=act)
    if len(_inputs(n)) > 2:
        return [_broadcast(imp, n, "chadd", y, imp.value(n, n.input[2]))]
    return [y]


_FORMS = {"ewadd": ("chadd", "sadd"), "ewmul": ("chmul", "smul")}  # op -> its vector and scalar forms


def _combine(imp: _Importer, n: Any, op: str, x: Node, y: Node) -> Node:
    """``x op y`` (ewadd or ewmul, both commutative) under ONNX broadcasting: equal shapes, a scalar
    (GELU's x * 0.5), a per-channel vector, a block of contiguous axes (rotary cos/sin (1, 1, S, D)
    against (B, H, S, D)) as a vector op between reshapes (views), or else both expanded to the
    common shape (an outer sum)."""
    vector_op, scalar_op = _FORMS[op]
    if x.shape == y.shape:
        return node(op, x, y)
    if int(np.prod(x.shape)) == 1 and int(np.prod(y.shape)) != 1:
        x, y = y, x
    if int(np.prod(y.shape)) == 1 and len(y.shape) <= len(x.shape):
        return node(scalar_op, x, _scalar(y))
    if _vector_axis(y.shape, x.shape) is not None and _vector_axis(x.shape, y.shape) is None:
        x, y = y, x
    if _vector_axis(x.shape, y.shape) is not None:
        return _broadcast(imp, n, vector_op, x, y)
    if _block(y.shape, x.shape) is not None and _block(x.shape, y.shape) is None:
        x, y = y, x
    block = _block(x.shape, y.shape)
    if block is not None:  # rotary cos/sin (1, 1, S, D) on (B, H, S, D): a vector op on (B*H, S*D, 1), no copy
        i, j = block
        sizes = tuple(int(np.prod(x.shape[a:b])) for a, b in ((0, i), (i, j), (j, len(x.shape))))
        flat = node(vector_op, node("reshape", x, shape=sizes), node("reshape", y, shape=sizes[1:2]), axis=1)
        return node("reshape", flat, shape=x.shape)
    out = _broadcast_shape(x.shape, y.shape)
    return node(op, _expand_to(x, out), _expand_to(y, out))


def _block(x: tuple[int, ...], y: tuple[int, ...]) -> tuple[int, int] | None:
    """The axes [i, j) of ``x`` that ``y`` (right-aligned) covers with its sizes above 1, when they are
    contiguous and equal to ``x``'s and every other size of ``y`` is 1, else None."""
    if len(y) > len(x):
        return None
    lead = len(x) - len(y)
    big = [lead + k for k, d in enumerate(y) if d != 1]
    if not big or big != list(range(big[0], big[-1] + 1)) or any(x[k] != y[k - lead] for k in big):
        return None
    return big[0], big[-1] + 1


def _binary(op: str) -> Callable[[_Importer, Any, dict[str, Any]], list[Node]]:
    return lambda imp, n, a: [_combine(imp, n, op, imp.value(n, n.input[0]), imp.value(n, n.input[1]))]


def _negated(imp: _Importer, n: Any, x: Node) -> Node:
    """-x as x times a constant -1 (exact; the rules know smul)."""
    return node("smul", x, _new_weight(imp, f"{n.output[0]}:minus_one", -1.0))


def _sub(imp: _Importer, n: Any, a: dict[str, Any]) -> list[Node]:
    """x - c for a constant c: x + (-c), one kernel, -c computed now; x - y for an activation y:
    x + (-1) * y, exact, but two kernels where ONNX had one."""
    x = imp.value(n, n.input[0])
    if n.input[1] in imp.weights:
        y = _new_weight(imp, f"{n.output[0]}:negated", -np.asarray(imp.weights[n.input[1]], dtype=np.float64))
    else:
        y = _negated(imp, n, imp.value(n, n.input[1]))
    return [_combine(imp, n, "ewadd", x, y)]


def _div(imp: _Importer, n: Any, a: dict[str, Any]) -> list[Node]:
    """Division by a constant (attention's 1/sqrt(d)): a product with its reciprocal, computed now;
    by an activation: a product with ``pow(y, -1)`` (two kernels where ONNX had one). A constant
    with a zero (or not a float) declines."""
    x = imp.value(n, n.input[0])
    if n.input[1] not in imp.consts:
        return [_combine(imp, n, "ewmul", x, node("pow", imp.value(n, n.input[1]), exponent=-1.0))]
    c = np.asarray(imp.const(n, n.input[1]))
    if c.dtype.kind != "f" or not np.all(c != 0):
        raise Decline("a constant divisor that is not float or has a zero")
    inverse = _new_weight(imp, f"{n.output[0]}:reciprocal", 1.0 / c.astype(np.float64))
    return [_combine(imp, n, "ewmul", x, inverse)]


def _scalar_const(imp: _Importer, n: Any, k: int, what: str) -> float:
    c = np.asarray(imp.const(n, n.input[k]))
    if c.size != 1:
        raise Decline(f"{what} of shape {c.shape}, not a scalar")
    return float(c.reshape(()))


def _pow(imp: _Importer, n: Any, a: dict[str, Any]) -> list[Node]:
    """Pow with a constant scalar exponent: x ** 1 is x, x ** 2 is x * x (exact in every domain), any
    other exponent a ``pow`` row. A computed exponent declines."""
    x, e = imp.value(n, n.input[0]), _scalar_const(imp, n, 1, "an exponent")
    if e == 1.0:
        return [x]
    return [node("ewmul", x, x) if e == 2.0 else node("pow", x, exponent=e)]


def _power(exponent: float) -> Callable[[_Importer, Any, dict[str, Any]], list[Node]]:
    """Sqrt and Reciprocal: powers 0.5 and -1 (written back as Sqrt and Reciprocal)."""
    return lambda imp, n, a: [node("pow", imp.value(n, n.input[0]), exponent=exponent)]


def _where(imp: _Importer, n: Any, a: dict[str, Any]) -> list[Node]:
    """Where with a constant condition (a causal or padding mask): ``where`` on the mask as 0/1 reals.
    The mask and y keep their sizes (reshaped to the output's rank, a view), x is expanded only if
    it is smaller than the output. A condition computed at run time declines: the IR holds no
    boolean tensors."""
    cond = np.asarray(imp.const(n, n.input[0]))
    x, y = imp.value(n, n.input[1]), imp.value(n, n.input[2])
    out = _broadcast_shape(cond.shape, x.shape, y.shape)
    mask = _new_weight(imp, f"{n.output[0]}:mask", (cond != 0).astype(np.float64).reshape(
        (1,) * (len(out) - cond.ndim) + cond.shape))
    y = y if len(y.shape) == len(out) else node("reshape", y, shape=(1,) * (len(out) - len(y.shape)) + y.shape)
    return [node("where", mask, _expand_to(x, out), y)]


def _reduce_mean(imp: _Importer, n: Any, a: dict[str, Any]) -> list[Node]:
    """ReduceMean with constant axes (an input from opset 18, an attribute before): over H and W of
    an NCHW tensor with keepdims it is global average pooling (``pool_avg``), else ``reduce_mean``."""
    x = imp.value(n, n.input[0])
    if len(_inputs(n)) > 1:
        axes = [int(v) for v in np.asarray(imp.const(n, n.input[1])).reshape(-1)]
    else:
        axes = [int(v) for v in a.get("axes", [])]
    if not axes:
        if a.get("noop_with_empty_axes", 0):
            return [x]
        axes = list(range(len(x.shape)))
    if not x.shape:
        return [x]
    rank, keep = len(x.shape), int(a.get("keepdims", 1))
    if keep and rank == 4 and sorted(v % rank for v in axes) == [2, 3]:
        return [node("pool_avg", x, kernel=x.shape[2:], stride=(1, 1), pad=(0, 0))]
    return [node("reduce_mean", x, axes=tuple(axes), keepdims=keep)]


def _hardsigmoid(imp: _Importer, n: Any, a: dict[str, Any]) -> list[Node]:
    return [node("hardsigmoid", imp.value(n, n.input[0]), alpha=float(a.get("alpha", 0.2)),
                 beta=float(a.get("beta", 0.5)))]


def _softmax(imp: _Importer, n: Any, a: dict[str, Any]) -> list[Node]:
    """Softmax along one axis (opset 13 on); before 13 it flattened the axes from ``axis`` on,
    which is the same only when ``axis`` is the last."""
    x = imp.value(n, n.input[0])
    rank = len(x.shape)
    axis = int(a.get("axis", -1 if imp.opset >= 13 else 1)) % max(rank, 1)
    if imp.opset < 13 and axis != rank - 1:
        raise Decline(f"opset {imp.opset} Softmax over axes {axis}.. (flattened), not one axis")
    return [node("softmax", x, axis=axis)]


def _layernorm(imp: _Importer, n: Any, a: dict[str, Any]) -> list[Node]:
    """LayerNormalization (opset 17): a missing bias is a zero weight; the optional mean and
    inverse-deviation outputs (training) are never mapped."""
    if len([o for o in n.output if o]) > 1:
        raise Decline("the Mean / InvStdDev outputs")
    x, scale = imp.value(n, n.input[0]), imp.value(n, n.input[1])
    axis = int(a.get("axis", -1))
    bias = imp.value(n, n.input[2]) if len(_inputs(n)) > 2 else _new_weight(imp, f"{n.output[0]}:bias",
                                                                           np.zeros(scale.shape))
    tail = x.shape[axis % max(len(x.shape), 1):]
    scale, bias = (v if v.shape == tail else node("reshape", v, shape=tail) for v in (scale, bias))
    return [node("layernorm", x, scale, bias, axis=axis, epsilon=float(a.get("epsilon", 1e-5)))]


def _gelu(imp: _Importer, n: Any, a: dict[str, Any]) -> list[Node]:
    """Gelu (opset 20) and onnxruntime's com.microsoft Gelu: the exact (erf) form, or the tanh one."""
    approx = a.get("approximate", b"none")
    approx = approx.decode() if isinstance(approx, bytes) else approx
    if approx not in ("none", "tanh"):
        raise Decline(f"approximate={approx!r}")
    return [node("gelu" if approx == "none" else "gelu_tanh", imp.value(n, n.input[0]))]
