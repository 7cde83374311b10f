"""ONNX ops to op-table nodes, one importer per ONNX op type (the :data:`IMPORTERS` table).

An importer returns the IR nodes of its ONNX node's outputs, or raises :class:`Decline` with the
reason the node stays an opaque node (kept exactly, not optimized).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from eqsat.ir.graph import Node, input_, node, weight
from eqsat.ir.ops import conv_pads
from eqsat.onnx.common import ACTIVATIONS, Decline, OnnxError, _onnx, fused_activation


def _attrs(n: Any) -> dict[str, Any]:
    onnx = _onnx()
    return {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}


class _Importer:
    def __init__(self, path: str, model: Any, batch: int, opset: int):
        onnx = _onnx()
        self.path = path
        self.opset = opset
        self.values: dict[str, Node] = {}
        self.consts: dict[str, np.ndarray] = {}
        self.weights: dict[str, np.ndarray] = {}
        g = model.graph
        for init in g.initializer:
            arr = onnx.numpy_helper.to_array(init)
            self.consts[init.name] = arr
            if arr.dtype.kind == "f":  # kept in its own type: a 500 MB model is not copied to float64
                self.weights[init.name] = arr
                self.values[init.name] = weight(init.name, arr.shape)
        self.input_names = []
        for inp in g.input:
            if inp.name in self.consts:
                continue
            dims = [d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else batch
                    for d in inp.type.tensor_type.shape.dim]
            self.values[inp.name] = input_(inp.name, tuple(dims))
            self.input_names.append(inp.name)

    def where(self, n: Any) -> str:
        return f"{self.path}: node {n.name or '?'} ({n.op_type})"

    def value(self, n: Any, name: str) -> Node:
        if name not in self.values:
            raise OnnxError(f"{self.where(n)}: input {name!r} is neither a graph input, an initializer "
                            f"nor the output of another node")
        return self.values[name]

    def const(self, n: Any, name: str) -> np.ndarray:
        if name not in self.consts:
            raise Decline(f"input {name!r} is computed, not an initializer")
        return self.consts[name]


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


def _inputs(n: Any) -> list[str]:
    return [i for i in n.input if i]


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


def _new_weight(imp: _Importer, name: str, data: Any) -> Node:
    """A constant the import introduces (a reciprocal, an alpha, BN's scale and shift, a zero
    bias), as a weight with data (written back as an initializer)."""
    imp.weights[name] = data = np.asarray(data)
    return weight(name, data.shape)


def _flatten(imp: _Importer, n: Any, a: dict[str, Any]) -> list[Node]:
    x = imp.value(n, n.input[0])
    axis = int(a.get("axis", 1)) % (len(x.shape) + 1) if x.shape else 0
    return [node("reshape", x, shape=(int(np.prod(x.shape[:axis])), int(np.prod(x.shape[axis:]))))]


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


def _vector_axis(x: tuple[int, ...], y: tuple[int, ...]) -> int | None:
    """The axis of ``x`` along which ``y`` broadcasts as a vector (ONNX's right-aligned
    broadcasting with exactly one size above 1, equal to ``x``'s), or None."""
    if len(y) > len(x) or not y:
        return None
    big = [k for k, d in enumerate(y) if d != 1]
    if len(big) != 1:
        return None
    axis = len(x) - len(y) + big[0]
    return axis if x[axis] == y[big[0]] else None


def _broadcast(imp: _Importer, n: Any, op: str, x: Node, y: Node) -> Node:
    """``x op y`` where ``y`` is a per-channel vector in broadcasting form: the vector op
    (``chadd``/``chmul``) on ``y`` reshaped to 1-D (a view)."""
    axis = _vector_axis(x.shape, y.shape)
    if axis is None:
        raise Decline(f"broadcasting {x.shape} with {y.shape}")
    vector = y if len(y.shape) == 1 else node("reshape", y, shape=(x.shape[axis],))
    return node(op, x, vector, axis=axis)


def _scalar(x: Node) -> Node:
    """A one-element operand as a 0-d tensor (a view; weight-only reshapes fold)."""
    return x if x.shape == () else node("reshape", x, shape=())


def _binary(op: str, vector_op: str, scalar_op: str) -> Callable[[_Importer, Any, dict[str, Any]], list[Node]]:
    def f(imp: _Importer, n: Any, a: dict[str, Any]) -> list[Node]:
        x, y = imp.value(n, n.input[0]), imp.value(n, n.input[1])
        if x.shape == y.shape:
            return [node(op, x, y)]
        if int(np.prod(x.shape)) == 1 and int(np.prod(y.shape)) != 1:
            x, y = y, x  # both ops commute
        if int(np.prod(y.shape)) == 1 and len(y.shape) <= len(x.shape):  # GELU's x * 0.5, 1 + erf
            return [node(scalar_op, x, _scalar(y))]
        if _vector_axis(y.shape, x.shape) is not None and _vector_axis(x.shape, y.shape) is None:
            x, y = y, x  # both ops commute
        return [_broadcast(imp, n, vector_op, x, y)]
    return f


def _pad(imp: _Importer, n: Any, a: dict[str, Any]) -> list[Node]:
    mode = a.get("mode", b"constant")
    inputs = _inputs(n)
    if mode not in (b"constant", "constant") or len(inputs) > 3:
        raise Decline(f"mode {mode!r} or axes")
    if len(inputs) > 2 and np.any(imp.const(n, n.input[2]) != 0):
        raise Decline("a non-zero constant value")
    return [node("pad", imp.value(n, n.input[0]), pads=tuple(int(v) for v in imp.const(n, n.input[1])))]


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


def _unary(op: str) -> Callable[[_Importer, Any, dict[str, Any]], list[Node]]:
    return lambda imp, n, a: [node(op, imp.value(n, n.input[0]))]


def _reshape(imp: _Importer, n: Any, a: dict[str, Any]) -> list[Node]:
    x = imp.value(n, n.input[0])
    shape = [int(v) for v in imp.const(n, n.input[1])]
    shape = [x.shape[i] if v == 0 else v for i, v in enumerate(shape)]
    if -1 in shape:
        known = int(np.prod([v for v in shape if v != -1]))
        shape[shape.index(-1)] = int(np.prod(x.shape)) // known
    return [node("reshape", x, shape=tuple(shape))]


def _split(imp: _Importer, n: Any, a: dict[str, Any]) -> list[Node]:
    x = imp.value(n, n.input[0])
    axis = int(a.get("axis", 0)) % len(x.shape)
    if len(n.input) > 1 and n.input[1]:
        sizes = tuple(int(v) for v in imp.const(n, n.input[1]))
    else:
        sizes = (x.shape[axis] // len(n.output),) * len(n.output)
    sp = node("split", x, axis=axis, sizes=sizes)
    return [node("proj", sp, index=i) for i in range(len(sizes))]


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


def _softmax(imp: _Importer, n: Any, a: dict[str, Any]) -> list[Node]:
    """Softmax along one axis (opset 13 on); before 13 it flattened the axes from ``axis`` on,
    which is the same only when ``axis`` is the last."""
    x = imp.value(n, n.input[0])
    rank = len(x.shape)
    axis = int(a.get("axis", -1 if imp.opset >= 13 else 1)) % max(rank, 1)
    if imp.opset < 13 and axis != rank - 1:
        raise Decline(f"opset {imp.opset} Softmax over axes {axis}.. (flattened), not one axis")
    return [node("softmax", x, axis=axis)]


def _div(imp: _Importer, n: Any, a: dict[str, Any]) -> list[Node]:
    """Division by a constant scalar (attention's 1/sqrt(d)): a product with its reciprocal."""
    x = imp.value(n, n.input[0])
    c = np.asarray(imp.const(n, n.input[1]))
    if c.size != 1 or c.dtype.kind != "f" or float(c.reshape(())) == 0.0:
        raise Decline("a divisor that is not a non-zero float scalar constant")
    return [node("smul", x, _new_weight(imp, f"{n.output[0]}:reciprocal", 1.0 / float(c.reshape(()))))]


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
    """Gelu (opset 20) and onnxruntime's com.microsoft Gelu: the exact form; tanh's is declined."""
    approx = a.get("approximate", b"none")
    if approx not in (b"none", "none"):
        raise Decline(f"approximate={approx!r}")
    return [node("gelu", imp.value(n, n.input[0]))]


def _raw_axes(imp: _Importer, n: Any, a: dict[str, Any]) -> list[int] | None:
    """Unsqueeze/Squeeze axes: a constant input from opset 13, an attribute before."""
    raw = imp.const(n, n.input[1]) if len(_inputs(n)) > 1 else a.get("axes")
    return None if raw is None else [int(v) for v in np.asarray(raw).reshape(-1)]


def _unsqueeze(imp: _Importer, n: Any, a: dict[str, Any]) -> list[Node]:
    x = imp.value(n, n.input[0])
    raw = _raw_axes(imp, n, a) or []
    rank = len(x.shape) + len(raw)
    shape = list(x.shape)
    for ax in sorted(v % rank for v in raw):
        shape.insert(ax, 1)
    return [node("reshape", x, shape=tuple(shape))]


def _squeeze(imp: _Importer, n: Any, a: dict[str, Any]) -> list[Node]:
    x = imp.value(n, n.input[0])
    raw = _raw_axes(imp, n, a)
    rank = max(len(x.shape), 1)
    drop = {v % rank for v in raw} if raw is not None else {k for k, d in enumerate(x.shape) if d == 1}
    if any(x.shape[k] != 1 for k in drop):
        raise Decline(f"squeezing an axis of size > 1 in {x.shape}")
    return [node("reshape", x, shape=tuple(d for k, d in enumerate(x.shape) if k not in drop))]


def _gather(imp: _Importer, n: Any, a: dict[str, Any]) -> list[Node]:
    """Gather of an activation at constant indices that form one contiguous run (how exporters
    unpack a packed QKV projection, ``proj[0], proj[1], proj[2]``): a split part, reshaped to
    drop the axis for a scalar index. Other indices decline."""
    x = imp.value(n, n.input[0])
    if not x.shape:
        raise Decline("gathering from a scalar")
    axis = int(a.get("axis", 0)) % len(x.shape)
    idx = np.asarray(imp.const(n, n.input[1]))
    size = x.shape[axis]
    flat = [int(v) % size if -size <= int(v) < size else -1 for v in idx.reshape(-1)]
    if idx.ndim > 1 or not flat or -1 in flat or flat != list(range(flat[0], flat[0] + len(flat))):
        raise Decline("indices that are not one contiguous run of constants")
    start, count = flat[0], len(flat)
    sizes = tuple(s for s in (start, count, size - start - count) if s)
    part = x if sizes == (size,) else node("proj", node("split", x, axis=axis, sizes=sizes), index=int(start > 0))
    if idx.ndim == 0:
        part = node("reshape", part, shape=x.shape[:axis] + x.shape[axis + 1:])
    return [part]


def _expand(imp: _Importer, n: Any, a: dict[str, Any]) -> list[Node]:
    """Expand to a shape the input already has (exporters' broadcast guards): nothing."""
    x = imp.value(n, n.input[0])
    target = [int(v) for v in imp.const(n, n.input[1])]
    rank = max(len(x.shape), len(target))
    padded_x, padded_t = (1,) * (rank - len(x.shape)) + x.shape, [1] * (rank - len(target)) + target
    out = tuple(max(d, t) if d == 1 or t == 1 else d for d, t in zip(padded_x, padded_t))
    if out != x.shape:
        raise Decline(f"a real broadcast of {x.shape} to {tuple(target)}")
    return [x]


IMPORTERS: dict[str, Callable[[_Importer, Any, dict[str, Any]], list[Node]]] = {
    "Conv": _conv,
    "FusedConv": _conv,
    "MatMul": _matmul,
    "Flatten": _flatten,
    "Gemm": _gemm,
    "FusedGemm": _gemm,
    "FusedMatMul": _fused_matmul,
    "Add": _binary("ewadd", "chadd", "sadd"),
    "Mul": _binary("ewmul", "chmul", "smul"),
    **{form.op_type: _unary(act) for act, form in ACTIVATIONS.items() if not form.params},
    "Clip": _clip,
    "Softmax": _softmax,
    "LayerNormalization": _layernorm,
    "Erf": _unary("erf"),
    "Gelu": _gelu,
    "Unsqueeze": _unsqueeze,
    "Squeeze": _squeeze,
    "Gather": _gather,
    "Expand": _expand,
    "Div": _div,
    "Concat": lambda imp, n, a: [node("concat", *(imp.value(n, i) for i in n.input), axis=int(a["axis"]))],
    "Split": _split,
    "Reshape": _reshape,
    "Transpose": lambda imp, n, a: [
        node("transpose", imp.value(n, n.input[0]), perm=tuple(a["perm"]) if "perm" in a else None)
    ],
    "MaxPool": _pool("pool_max"),
    "AveragePool": _pool("pool_avg"),
    "GlobalAveragePool": _global_avg,
    "Identity": lambda imp, n, a: [imp.value(n, n.input[0])],
    "BatchNormalization": _batchnorm,
    "Pad": _pad,
}
