"""The op table: every tensor op as one row of data.

Each :class:`OpSpec` gives an op's arity, attributes, shape rule, FLOP count,
elements moved, NumPy reference implementation, numeric domains and algebraic
properties. Everything else (graphs, evaluation, the cost model, the rule
reader, the rule generator, the e-graph sort) reads this table, so adding an op
is adding one :func:`register` call.

Layouts: activations are NCHW, conv kernels OIHW, matmul operands ``(..., m, k)``
and ``(..., k, n)``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Callable, Mapping, Sequence

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from .domains import Domain
from .errors import AttributeError_, ShapeError, UnknownOpError

Shape = tuple[int, ...]
Attrs = Mapping[str, Any]

ALL_DOMAINS = frozenset({"float", "int", "mod"})
FLOAT_ONLY = frozenset({"float"})
NO_MOD = frozenset({"float", "int"})


# --------------------------------------------------------------------------- attributes
_REQUIRED = object()


@dataclass(frozen=True)
class AttrSpec:
    """One attribute of an op: its name, kind and default.

    Kinds: ``name`` (str), ``shape`` (tuple of ints >= 0), ``int``, ``ints``
    (tuple of ints), ``pair`` (int or 2 ints, stored as 2 ints), ``choice`` (one
    of ``choices``), ``pad`` (``same``, ``valid``, int or 2 ints), ``perm``
    (a permutation, or None for "reverse the axes").
    """

    name: str
    kind: str
    default: Any = _REQUIRED
    choices: tuple[str, ...] = ()

    @property
    def required(self) -> bool:
        return self.default is _REQUIRED

    def canonical(self, op: str, value: Any) -> Any:
        """Validate ``value`` and return its canonical, hashable form."""
        where = f"{op}: attribute {self.name!r}"
        if self.kind == "name":
            if not isinstance(value, str) or not value:
                raise AttributeError_(f"{where} must be a non-empty string, got {value!r}")
            return value
        if self.kind == "int":
            return _int(value, where)
        if self.kind in ("shape", "ints"):
            ints = _ints(value, where)
            if self.kind == "shape" and any(v < 0 for v in ints):
                raise AttributeError_(f"{where} must be non-negative, got {ints}")
            return ints
        if self.kind == "pair":
            return _pair(value, where)
        if self.kind == "choice":
            if value not in self.choices:
                raise AttributeError_(f"{where} must be one of {', '.join(self.choices)}, got {value!r}")
            return value
        if self.kind == "pad":
            if value in ("same", "valid"):
                return value
            pads = _pair(value, where)
            if min(pads) < 0:
                raise AttributeError_(f"{where} must be non-negative, got {pads}")
            return pads
        if self.kind == "perm":
            return None if value is None else _ints(value, where)
        raise AssertionError(f"unknown attribute kind {self.kind}")


def _int(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise AttributeError_(f"{where} must be an integer, got {value!r}")
    return int(value)


def _ints(value: Any, where: str) -> tuple[int, ...]:
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return (int(value),)
    if not isinstance(value, (tuple, list)):
        raise AttributeError_(f"{where} must be a list of integers, got {value!r}")
    return tuple(_int(v, where) for v in value)


def _pair(value: Any, where: str) -> tuple[int, int]:
    ints = _ints(value, where)
    if len(ints) == 1:
        return (ints[0], ints[0])
    if len(ints) != 2:
        raise AttributeError_(f"{where} must be one or two integers, got {value!r}")
    return ints  # type: ignore[return-value]


# --------------------------------------------------------------------------- activations
@dataclass(frozen=True)
class Activation:
    """An elementwise activation that conv2d/matmul can fuse."""

    name: str
    fn: Callable[[np.ndarray], np.ndarray]
    domains: frozenset[str]


def _relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


ACTIVATIONS: dict[str, Activation] = {
    "none": Activation("none", lambda x: x, ALL_DOMAINS),
    "relu": Activation("relu", _relu, NO_MOD),
    "sigmoid": Activation("sigmoid", _sigmoid, FLOAT_ONLY),
    "tanh": Activation("tanh", np.tanh, FLOAT_ONLY),
}
ACT_NAMES = tuple(ACTIVATIONS)


# --------------------------------------------------------------------------- the spec
ShapeRule = Callable[[Attrs, Sequence[Shape]], tuple[Shape, ...]]
FlopRule = Callable[[Attrs, Sequence[Shape], Sequence[Shape]], int]
EvalRule = Callable[[Attrs, Sequence[Any], Domain], Any]


@dataclass(frozen=True)
class OpSpec:
    """One row of the op table.

    ``arity`` is the exact number of tensor inputs, or None for variadic ops
    (at least ``min_arity``); ``optional_inputs`` more trailing inputs may follow
    (conv2d's bias). ``shape`` maps attributes and input shapes to the
    output shapes (one per output). ``flops`` counts arithmetic, ``evaluate`` is
    the NumPy reference. ``linear_in`` lists inputs the op is linear in with the
    other inputs fixed (multilinearity); ``jointly_linear`` says the op is a
    linear map of all inputs together (ewadd, concat, layout ops). Fused
    activations (an ``act`` attribute other than ``none``) cancel linearity.
    ``is_view`` ops alias their input's memory and cost nothing;
    ``takes_tuple`` ops read every output of a multi-output producer.
    ``merge_axes`` lists ``(slot, axis)``: two nodes of this op sharing input ``slot``
    compute slices of one bigger op's output along ``axis`` (used by the pair move).
    ``same_rank`` says every required input has the output's rank (the shape rule enforces it), so a
    pattern that matches the op at a known rank knows its inputs' ranks too.
    """

    name: str
    arity: int | None
    attrs: tuple[AttrSpec, ...]
    shape: ShapeRule
    evaluate: EvalRule
    flops: FlopRule = lambda attrs, ins, outs: 0
    min_arity: int = 0
    optional_inputs: int = 0
    linear_in: tuple[int, ...] = ()
    jointly_linear: bool = False
    elementwise: bool = False
    commutative: bool = False
    is_view: bool = False
    is_leaf: bool = False
    takes_tuple: bool = False
    domains: frozenset[str] = ALL_DOMAINS
    normalize: Callable[[dict[str, Any], Sequence[Shape]], dict[str, Any]] | None = None
    merge_axes: tuple[tuple[int, int], ...] = ()
    same_rank: bool = False
    doc: str = ""

    # -- attributes ---------------------------------------------------------
    @cached_property
    def attr_names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.attrs)

    def canonical_attrs(self, given: Mapping[str, Any], in_shapes: Sequence[Shape] = ()) -> tuple[tuple[str, Any], ...]:
        """Check ``given`` against the spec, fill defaults, return ``((name, value), ...)`` in spec order."""
        unknown = set(given) - set(self.attr_names)
        if unknown:
            known = ", ".join(self.attr_names) or "none"
            raise AttributeError_(f"{self.name}: unknown attribute(s) {', '.join(sorted(unknown))} (known: {known})")
        values: dict[str, Any] = {}
        for spec in self.attrs:
            if spec.name in given:
                values[spec.name] = spec.canonical(self.name, given[spec.name])
            elif spec.required:
                raise AttributeError_(f"{self.name}: missing required attribute {spec.name!r}")
            else:
                values[spec.name] = spec.default
        if self.normalize is not None:
            values = self.normalize(values, in_shapes)
        return tuple((name, values[name]) for name in self.attr_names)

    def check_arity(self, n: int) -> None:
        if self.arity is not None and not self.arity <= n <= self.arity + self.optional_inputs:
            takes = f"{self.arity}" if not self.optional_inputs else f"{self.arity} to {self.arity + self.optional_inputs}"
            raise ShapeError(f"{self.name}: takes {takes} input(s), got {n}")
        if self.arity is None and n < self.min_arity:
            raise ShapeError(f"{self.name}: takes at least {self.min_arity} inputs, got {n}")

    # -- properties that depend on attributes -------------------------------
    def linear_inputs(self, attrs: Attrs, n_inputs: int | None = None) -> tuple[int, ...]:
        """Inputs the op is linear in, given its attributes and input count (a fused activation
        or an optional input such as a bias makes it non-linear)."""
        if attrs.get("act", "none") != "none" or (n_inputs is not None and self.arity is not None
                                                   and n_inputs > self.arity):
            return ()
        return self.linear_in

    def defined_in(self, attrs: Attrs, domain: Domain) -> bool:
        """Whether the op (with these attributes) has an exact form in ``domain``."""
        act = ACTIVATIONS[attrs["act"]].domains if "act" in attrs else ALL_DOMAINS
        return domain.name in (self.domains & act)

    def elements_moved(self, in_shapes: Sequence[Shape], out_shapes: Sequence[Shape]) -> int:
        """Elements read plus elements written by one launch (0 for views and leaves)."""
        if self.is_view or self.is_leaf:
            return 0
        return sum(numel(s) for s in in_shapes) + sum(numel(s) for s in out_shapes)


OP_TABLE: dict[str, OpSpec] = {}


def register(spec: OpSpec) -> OpSpec:
    """Add ``spec`` to the op table (its name must be new)."""
    if spec.name in OP_TABLE:
        raise ValueError(f"op {spec.name!r} is already registered")
    OP_TABLE[spec.name] = spec
    return spec


def unregister(name: str) -> None:
    """Remove an op (used by extensibility tests that add toy ops)."""
    OP_TABLE.pop(name, None)


def get_op(name: str) -> OpSpec:
    """The spec of ``name``; :class:`UnknownOpError` lists the known ops otherwise."""
    try:
        return OP_TABLE[name]
    except KeyError:
        raise UnknownOpError(f"unknown op {name!r} (known: {', '.join(sorted(OP_TABLE))})") from None


def numel(shape: Shape) -> int:
    return math.prod(shape)


# --------------------------------------------------------------------------- shape helpers
def _same_shapes(op: str, ins: Sequence[Shape]) -> tuple[Shape, ...]:
    for i, s in enumerate(ins[1:], start=1):
        if s != ins[0]:
            raise ShapeError(f"{op}: input {i} has shape {s}, input 0 has shape {ins[0]}; elementwise ops need equal shapes")
    return (ins[0],)


def _rank(op: str, shape: Shape, rank: int, what: str) -> None:
    if len(shape) != rank:
        raise ShapeError(f"{op}: {what} must have rank {rank}, got shape {shape}")


def conv_pads(pad: Any, size: int, kernel: int, stride: int, dilation: int) -> tuple[int, int, int]:
    """(pad_before, pad_after, out_size) along one spatial axis, TensorFlow's SAME/VALID or explicit."""
    eff = (kernel - 1) * dilation + 1
    if pad == "same":
        out = -(-size // stride)
        total = max((out - 1) * stride + eff - size, 0)
        return total // 2, total - total // 2, out
    before = 0 if pad == "valid" else int(pad)
    span = size + 2 * before - eff
    if span < 0:
        raise ShapeError(f"window of size {eff} does not fit input of size {size} with padding {before}")
    return before, before, span // stride + 1


def _window_out(op: str, attrs: Attrs, x: Shape, kh: int, kw: int) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    stride = attrs["stride"]
    dil = attrs.get("dilation", (1, 1))
    pad = attrs["pad"]
    ph, pw = (pad, pad) if isinstance(pad, str) else pad
    if min(stride) < 1 or min(dil) < 1:
        raise ShapeError(f"{op}: stride and dilation must be >= 1, got {stride} and {dil}")
    try:
        return conv_pads(ph, x[2], kh, stride[0], dil[0]), conv_pads(pw, x[3], kw, stride[1], dil[1])
    except ShapeError as exc:
        raise ShapeError(f"{op}: input {x}: {exc}") from None


# --------------------------------------------------------------------------- leaves
def _leaf_shape(attrs: Attrs, ins: Sequence[Shape]) -> tuple[Shape, ...]:
    return (attrs["shape"],)


def _leaf_eval(attrs: Attrs, ins: Sequence[Any], domain: Domain) -> Any:
    raise ValueError(f"leaf {attrs['name']!r} has no value: pass it in the inputs mapping")


for _leaf, _doc in (("input", "An activation fed at run time."), ("weight", "A parameter known at compile time.")):
    register(OpSpec(
        name=_leaf, arity=0, attrs=(AttrSpec("name", "name"), AttrSpec("shape", "shape")),
        shape=_leaf_shape, evaluate=_leaf_eval, is_leaf=True, doc=_doc,
    ))


# --------------------------------------------------------------------------- elementwise
def _elementwise(name: str, arity: int, fn: Callable[..., Any], domains: frozenset[str], *,
                 linear_in: tuple[int, ...] = (), jointly_linear: bool = False, commutative: bool = False,
                 doc: str = "") -> OpSpec:
    return register(OpSpec(
        name=name, arity=arity, attrs=(),
        shape=lambda attrs, ins, _n=name: _same_shapes(_n, ins),
        flops=lambda attrs, ins, outs: numel(outs[0]),
        evaluate=lambda attrs, xs, domain: fn(*xs),
        linear_in=linear_in, jointly_linear=jointly_linear, elementwise=True,
        commutative=commutative, domains=domains, same_rank=True, doc=doc,
    ))


_elementwise("ewadd", 2, lambda a, b: a + b, ALL_DOMAINS, jointly_linear=True, commutative=True,
             doc="Elementwise sum.")
_elementwise("ewmul", 2, lambda a, b: a * b, ALL_DOMAINS, linear_in=(0, 1), commutative=True,
             doc="Elementwise product.")
for _act in ("relu", "sigmoid", "tanh"):
    _elementwise(_act, 1, ACTIVATIONS[_act].fn, ACTIVATIONS[_act].domains, doc=f"Elementwise {_act}.")


def _smul_shape(attrs: Attrs, ins: Sequence[Shape]) -> tuple[Shape, ...]:
    if ins[1] != ():
        raise ShapeError(f"smul: input 1 must be a scalar (shape ()), got shape {ins[1]}")
    return (ins[0],)


register(OpSpec(
    name="smul", arity=2, attrs=(), shape=_smul_shape,
    flops=lambda attrs, ins, outs: numel(outs[0]),
    evaluate=lambda attrs, xs, domain: xs[0] * xs[1],
    linear_in=(0, 1), elementwise=True, doc="Tensor times a scalar (a 0-d tensor).",
))


# --------------------------------------------------------------------------- matmul
def _matmul_shape(attrs: Attrs, ins: Sequence[Shape]) -> tuple[Shape, ...]:
    a, b = ins
    if len(a) < 2 or len(b) < 2:
        raise ShapeError(f"matmul: inputs need rank >= 2, got shapes {a} and {b}")
    if len(a) != len(b) or a[:-2] != b[:-2]:
        raise ShapeError(f"matmul: batch dimensions differ: input 0 has shape {a}, input 1 has shape {b}")
    if a[-1] != b[-2]:
        raise ShapeError(f"matmul: inner dimensions differ: input 0 has shape {a} (k={a[-1]}), "
                         f"input 1 has shape {b} (k={b[-2]})")
    return (a[:-1] + (b[-1],),)


def _matmul_flops(attrs: Attrs, ins: Sequence[Shape], outs: Sequence[Shape]) -> int:
    extra = numel(outs[0]) if attrs["act"] != "none" else 0
    return 2 * numel(outs[0]) * ins[0][-1] + extra


register(OpSpec(
    name="matmul", arity=2, attrs=(AttrSpec("act", "choice", "none", ACT_NAMES),),
    shape=_matmul_shape, flops=_matmul_flops,
    evaluate=lambda attrs, xs, domain: ACTIVATIONS[attrs["act"]].fn(domain.contract(np.matmul, xs[0], xs[1])),
    linear_in=(0, 1), merge_axes=((0, -1), (1, -2)), same_rank=True,
    doc="(Batched) matrix product with an optional fused activation.",
))


# --------------------------------------------------------------------------- layout ops
def _transpose_normalize(values: dict[str, Any], ins: Sequence[Shape]) -> dict[str, Any]:
    if values["perm"] is None and ins:
        values["perm"] = tuple(reversed(range(len(ins[0]))))
    return values


def _transpose_shape(attrs: Attrs, ins: Sequence[Shape]) -> tuple[Shape, ...]:
    (x,), perm = ins, attrs["perm"]
    if perm is None:
        perm = tuple(reversed(range(len(x))))
    if sorted(perm) != list(range(len(x))):
        raise ShapeError(f"transpose: perm {perm} is not a permutation of the {len(x)} axes of shape {x}")
    return (tuple(x[p] for p in perm),)


register(OpSpec(
    name="transpose", arity=1, attrs=(AttrSpec("perm", "perm", None),),
    shape=_transpose_shape, normalize=_transpose_normalize,
    evaluate=lambda attrs, xs, domain: np.ascontiguousarray(np.transpose(xs[0], attrs["perm"])),
    linear_in=(0,), jointly_linear=True, same_rank=True, doc="Axis permutation (default: reverse the axes); a real copy.",
))


def _reshape_normalize(values: dict[str, Any], ins: Sequence[Shape]) -> dict[str, Any]:
    shape = values["shape"]
    if ins and shape.count(-1) == 1:
        known = numel(tuple(s for s in shape if s != -1))
        if known and numel(ins[0]) % known == 0:
            values["shape"] = tuple(numel(ins[0]) // known if s == -1 else s for s in shape)
    return values


def _reshape_shape(attrs: Attrs, ins: Sequence[Shape]) -> tuple[Shape, ...]:
    (x,), shape = ins, attrs["shape"]
    if any(s < 0 for s in shape) or numel(shape) != numel(x):
        raise ShapeError(f"reshape: cannot reshape {x} ({numel(x)} elements) into {shape}")
    return (shape,)


register(OpSpec(
    name="reshape", arity=1, attrs=(AttrSpec("shape", "ints"),),
    shape=_reshape_shape, normalize=_reshape_normalize,
    evaluate=lambda attrs, xs, domain: np.reshape(xs[0], attrs["shape"]),
    linear_in=(0,), jointly_linear=True, is_view=True, doc="Reshape (a view, free).",
))


def _axis_normalize(values: dict[str, Any], ins: Sequence[Shape]) -> dict[str, Any]:
    if ins and values["axis"] < 0:
        values["axis"] += len(ins[0])
    return values


def _concat_shape(attrs: Attrs, ins: Sequence[Shape]) -> tuple[Shape, ...]:
    axis, first = attrs["axis"], ins[0]
    if not 0 <= axis < len(first):
        raise ShapeError(f"concat: axis {axis} out of range for shape {first}")
    for i, s in enumerate(ins[1:], start=1):
        if len(s) != len(first) or any(a != b for k, (a, b) in enumerate(zip(s, first)) if k != axis):
            raise ShapeError(f"concat: input {i} has shape {s}, input 0 has shape {first}; "
                             f"they may differ only on axis {axis}")
    return (first[:axis] + (sum(s[axis] for s in ins),) + first[axis + 1:],)


register(OpSpec(
    name="concat", arity=None, min_arity=2, attrs=(AttrSpec("axis", "int"),),
    shape=_concat_shape, normalize=_axis_normalize,
    evaluate=lambda attrs, xs, domain: np.concatenate(xs, axis=attrs["axis"]),
    jointly_linear=True, same_rank=True, doc="Concatenation along an axis; a real kernel on activations.",
))


def _split_shape(attrs: Attrs, ins: Sequence[Shape]) -> tuple[Shape, ...]:
    (x,), axis, sizes = ins, attrs["axis"], attrs["sizes"]
    if not 0 <= axis < len(x):
        raise ShapeError(f"split: axis {axis} out of range for shape {x}")
    if len(sizes) < 2 or any(s < 1 for s in sizes) or sum(sizes) != x[axis]:
        raise ShapeError(f"split: sizes {sizes} must be >= 2 positive parts adding up to {x[axis]} "
                         f"(axis {axis} of shape {x})")
    return tuple(x[:axis] + (s,) + x[axis + 1:] for s in sizes)


def _split_eval(attrs: Attrs, xs: Sequence[Any], domain: Domain) -> tuple[Any, ...]:
    cuts = np.cumsum(attrs["sizes"])[:-1]
    return tuple(np.split(xs[0], cuts, axis=attrs["axis"]))


register(OpSpec(
    name="split", arity=1, attrs=(AttrSpec("axis", "int"), AttrSpec("sizes", "ints")),
    shape=_split_shape, evaluate=_split_eval, normalize=_axis_normalize,
    linear_in=(0,), jointly_linear=True, is_view=True,
    doc="Split into len(sizes) outputs (views, free); read them with proj.",
))


def _proj_shape(attrs: Attrs, ins: Sequence[Shape]) -> tuple[Shape, ...]:
    index = attrs["index"]
    if not 0 <= index < len(ins):
        raise ShapeError(f"proj: index {index} out of range for a producer with {len(ins)} outputs")
    return (ins[index],)


register(OpSpec(
    name="proj", arity=1, attrs=(AttrSpec("index", "int"),),
    shape=_proj_shape, evaluate=lambda attrs, xs, domain: xs[0][attrs["index"]],
    jointly_linear=True, is_view=True, takes_tuple=True,
    doc="Output `index` of a multi-output producer (split, noop).",
))

register(OpSpec(
    name="noop", arity=None, min_arity=1, attrs=(),
    shape=lambda attrs, ins: tuple(ins), evaluate=lambda attrs, xs, domain: tuple(xs),
    jointly_linear=True, is_view=True, doc="Multi-output root tying a graph's outputs together.",
))


def _pad_shape(attrs: Attrs, ins: Sequence[Shape]) -> tuple[Shape, ...]:
    (x,), pads = ins, attrs["pads"]
    if len(pads) != 2 * len(x) or min(pads, default=0) < 0:
        raise ShapeError(f"pad: pads {pads} must be {2 * len(x)} non-negative integers (all befores, then all "
                         f"afters) for shape {x}")
    return (tuple(d + a + b for d, a, b in zip(x, pads[:len(x)], pads[len(x):])),)


register(OpSpec(
    name="pad", arity=1, attrs=(AttrSpec("pads", "ints"),), shape=_pad_shape,
    evaluate=lambda attrs, xs, domain: pad_array(xs[0], tuple(zip(attrs["pads"][:xs[0].ndim], attrs["pads"][xs[0].ndim:]))),
    linear_in=(0,), jointly_linear=True, same_rank=True,
    doc="Zero padding; `pads` lists every axis' before, then every axis' after (ONNX's order); a real copy.",
))


# --------------------------------------------------------------------------- conv2d and friends
_CONV_ATTRS = (
    AttrSpec("stride", "pair", (1, 1)),
    AttrSpec("pad", "pad", "valid"),
    AttrSpec("act", "choice", "none", ACT_NAMES),
    AttrSpec("groups", "int", 1),
    AttrSpec("dilation", "pair", (1, 1)),
)


def _conv_shape(attrs: Attrs, ins: Sequence[Shape]) -> tuple[Shape, ...]:
    x, w = ins[:2]
    _rank("conv2d", x, 4, "input 0 (NCHW)")
    _rank("conv2d", w, 4, "input 1 (OIHW kernel)")
    g = attrs["groups"]
    if g < 1 or x[1] % g or w[0] % g:
        raise ShapeError(f"conv2d: groups={g} must divide input channels {x[1]} and output channels {w[0]}")
    if w[1] * g != x[1]:
        raise ShapeError(f"conv2d: kernel {w} expects {w[1] * g} input channels (groups={g}), input {x} has {x[1]}")
    if len(ins) == 3 and ins[2] != (w[0],):
        raise ShapeError(f"conv2d: bias (input 2) must have shape ({w[0]},) for kernel {w}, got {ins[2]}")
    (_, _, ho), (_, _, wo) = _window_out("conv2d", attrs, x, w[2], w[3])
    return ((x[0], w[0], ho, wo),)


def _conv_flops(attrs: Attrs, ins: Sequence[Shape], outs: Sequence[Shape]) -> int:
    w = ins[1]
    extra = numel(outs[0]) * ((attrs["act"] != "none") + (len(ins) == 3))
    return 2 * numel(outs[0]) * w[1] * w[2] * w[3] + extra


def pad_array(x: np.ndarray, widths: Sequence[tuple[int, int]], fill: Any = 0) -> np.ndarray:
    """Constant padding that keeps object arrays made of Python ints (np.pad would insert int64)."""
    if not any(a or b for a, b in widths):
        return x
    shape = tuple(s + a + b for s, (a, b) in zip(x.shape, widths))
    out = np.full(shape, fill, dtype=x.dtype)
    out[tuple(slice(a, a + s) for s, (a, _) in zip(x.shape, widths))] = x
    return out


def _windows(x: np.ndarray, attrs: Attrs, kh: int, kw: int, fill: Any = 0) -> np.ndarray:
    """Sliding windows of an NCHW tensor: shape (N, C, Ho, Wo, kh, kw)."""
    (pt, pb, ho), (pl, pr, wo) = _window_out("window", attrs, x.shape, kh, kw)
    dh, dw = attrs.get("dilation", (1, 1))
    sh, sw = attrs["stride"]
    x = pad_array(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)), fill)
    win = sliding_window_view(x, ((kh - 1) * dh + 1, (kw - 1) * dw + 1), axis=(2, 3))
    return win[:, :, ::sh, ::sw, ::dh, ::dw][:, :, :ho, :wo]


def _conv_eval(attrs: Attrs, xs: Sequence[Any], domain: Domain) -> Any:
    x, w = xs[:2]
    n, c = x.shape[:2]
    o, _, kh, kw = w.shape
    g = attrs["groups"]
    win = _windows(x, attrs, kh, kw)
    ho, wo = win.shape[2:4]
    win = win.reshape(n, g, c // g, ho, wo, kh, kw)
    wg = w.reshape(g, o // g, c // g, kh, kw)
    out = domain.contract(lambda a, b: np.einsum("ngchwij,gocij->ngohw", a, b, optimize=not domain.object_arrays),
                          win, wg)
    out = out.reshape(n, o, ho, wo)
    if len(xs) == 3:
        out = out + xs[2].reshape(1, o, 1, 1)
    return ACTIVATIONS[attrs["act"]].fn(out)


register(OpSpec(
    name="conv2d", arity=2, optional_inputs=1, attrs=_CONV_ATTRS, shape=_conv_shape, flops=_conv_flops,
    evaluate=_conv_eval, linear_in=(0, 1), merge_axes=((0, 1),), same_rank=True,
    doc="2-D convolution NCHW x OIHW with an optional bias (O,); pad is same/valid/explicit; fused "
        "activation; groups; dilation.",
))


# --------------------------------------------------------------------------- per-channel ops
def _channel_shape(op: str, n_vectors: int) -> ShapeRule:
    def shape(attrs: Attrs, ins: Sequence[Shape]) -> tuple[Shape, ...]:
        x, axis = ins[0], attrs["axis"]
        if not 0 <= axis < len(x):
            raise ShapeError(f"{op}: axis {axis} out of range for input 0 of shape {x}")
        for i, v in enumerate(ins[1:1 + n_vectors], start=1):
            if v != (x[axis],):
                raise ShapeError(f"{op}: input {i} must have shape ({x[axis]},) (axis {axis} of input 0, "
                                 f"shape {x}), got {v}")
        return (x,)
    return shape


def _along(v: Any, x: Any, axis: int) -> Any:
    """Vector ``v`` shaped to broadcast along ``axis`` of ``x``."""
    return v.reshape((1,) * axis + (-1,) + (1,) * (x.ndim - axis - 1))


_CHANNEL_ATTRS = (AttrSpec("axis", "int", 1),)
register(OpSpec(
    name="chmul", arity=2, attrs=_CHANNEL_ATTRS, shape=_channel_shape("chmul", 1), normalize=_axis_normalize,
    flops=lambda attrs, ins, outs: numel(outs[0]),
    evaluate=lambda attrs, xs, domain: xs[0] * _along(xs[1], xs[0], attrs["axis"]),
    linear_in=(0, 1), doc="Scale each slice along `axis` by a vector (per-channel multiply).",
))
register(OpSpec(
    name="chadd", arity=2, attrs=_CHANNEL_ATTRS, shape=_channel_shape("chadd", 1), normalize=_axis_normalize,
    flops=lambda attrs, ins, outs: numel(outs[0]),
    evaluate=lambda attrs, xs, domain: xs[0] + _along(xs[1], xs[0], attrs["axis"]),
    jointly_linear=True, doc="Add a vector along `axis` (per-channel bias).",
))
register(OpSpec(
    name="affine", arity=3, attrs=_CHANNEL_ATTRS, shape=_channel_shape("affine", 2), normalize=_axis_normalize,
    flops=lambda attrs, ins, outs: 2 * numel(outs[0]),
    evaluate=lambda attrs, xs, domain: xs[0] * _along(xs[1], xs[0], attrs["axis"]) + _along(xs[2], xs[0], attrs["axis"]),
    doc="x * scale + shift per slice along `axis`: inference BatchNormalization, one kernel.",
))


def _enlarge_shape(attrs: Attrs, ins: Sequence[Shape]) -> tuple[Shape, ...]:
    (w,), (kh, kw) = ins, attrs["size"]
    _rank("enlarge", w, 4, "input 0 (OIHW kernel)")
    if kh < w[2] or kw < w[3] or (kh - w[2]) % 2 or (kw - w[3]) % 2:
        raise ShapeError(f"enlarge: cannot centre kernel {w} in a {kh}x{kw} window")
    return ((w[0], w[1], kh, kw),)


def _enlarge_eval(attrs: Attrs, xs: Sequence[Any], domain: Domain) -> Any:
    (w,), (kh, kw) = xs, attrs["size"]
    ph, pw = (kh - w.shape[2]) // 2, (kw - w.shape[3]) // 2
    return pad_array(w, ((0, 0), (0, 0), (ph, ph), (pw, pw)))


register(OpSpec(
    name="enlarge", arity=1, attrs=(AttrSpec("size", "pair"),), shape=_enlarge_shape, evaluate=_enlarge_eval,
    linear_in=(0,), jointly_linear=True, same_rank=True, doc="Zero-pad a conv kernel (centred) to size kh x kw.",
))


_POOL_ATTRS = (AttrSpec("kernel", "pair"), AttrSpec("stride", "pair", (1, 1)), AttrSpec("pad", "pad", "valid"))


def _pool_shape(op: str) -> ShapeRule:
    def shape(attrs: Attrs, ins: Sequence[Shape]) -> tuple[Shape, ...]:
        (x,) = ins
        _rank(op, x, 4, "input 0 (NCHW)")
        (_, _, ho), (_, _, wo) = _window_out(op, attrs, x, *attrs["kernel"])
        return ((x[0], x[1], ho, wo),)
    return shape


def _pool_avg_eval(attrs: Attrs, xs: Sequence[Any], domain: Domain) -> Any:
    kh, kw = attrs["kernel"]
    total = _windows(xs[0], attrs, kh, kw).sum(axis=(-2, -1))
    if domain.modulus is not None:
        return total * pow(kh * kw, -1, domain.modulus)
    return total / (kh * kw)


def _pool_max_eval(attrs: Attrs, xs: Sequence[Any], domain: Domain) -> Any:
    kh, kw = attrs["kernel"]
    x = xs[0]
    fill = -np.inf if not domain.exact else (min(x.flat) - 1 if x.size else 0)
    return _windows(x, attrs, kh, kw, fill=fill).max(axis=(-2, -1))


register(OpSpec(
    name="pool_avg", arity=1, attrs=_POOL_ATTRS, shape=_pool_shape("pool_avg"),
    flops=lambda attrs, ins, outs: numel(outs[0]) * attrs["kernel"][0] * attrs["kernel"][1],
    evaluate=_pool_avg_eval, linear_in=(0,), jointly_linear=True, domains=frozenset({"float", "mod"}),
    same_rank=True, doc="Average pooling; padding counts as zeros (so it is linear).",
))
register(OpSpec(
    name="pool_max", arity=1, attrs=_POOL_ATTRS, shape=_pool_shape("pool_max"),
    flops=lambda attrs, ins, outs: numel(outs[0]) * attrs["kernel"][0] * attrs["kernel"][1],
    evaluate=_pool_max_eval, domains=NO_MOD, same_rank=True, doc="Max pooling; padding never wins.",
))


# --------------------------------------------------------------------------- opaque
def _opaque_eval(attrs: Attrs, xs: Sequence[Any], domain: Domain) -> Any:
    """Run the stored ONNX node in onnxruntime (float32), the op's only reference."""
    from .onnx import run_node

    out = run_node(attrs["node"], [np.asarray(x, dtype=np.float64) for x in xs], attrs["index"], attrs["opset"])
    return out.astype(np.float64)


register(OpSpec(
    name="opaque", arity=None, min_arity=0,
    attrs=(AttrSpec("op_type", "name"), AttrSpec("node", "name"), AttrSpec("shape", "shape"),
           AttrSpec("index", "int", 0), AttrSpec("opset", "int")),  # the importer always sets the opset
    shape=lambda attrs, ins: (attrs["shape"],), evaluate=_opaque_eval, domains=FLOAT_ONLY,
    doc="Output `index` of an imported op the table does not know (the ONNX node, hex-encoded); a "
        "boundary for every rewrite, kept exactly; evaluated by onnxruntime. Outputs of one ONNX node "
        "are one opaque node each and are written back as that one node.",
))
