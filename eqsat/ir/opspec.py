"""The op table's machinery: attribute specs, activations, :class:`OpSpec`, the registry and the
shape helpers every row uses. The rows themselves are in :mod:`eqsat.ir.ops_tensor`,
:mod:`eqsat.ir.ops_conv`, :mod:`eqsat.ir.ops_convt`, :mod:`eqsat.ir.ops_norm`, :mod:`eqsat.ir.ops_math`
and :mod:`eqsat.ir.ops_index`; :mod:`eqsat.ir.ops` is the table's public face."""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from eqsat.errors import AttributeError_, ShapeError, UnknownOpError
from eqsat.ir.domains import Domain

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
    (a permutation, or None for "reverse the axes"), ``float`` (a finite number, e.g. an epsilon).
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
        if self.kind == "float":
            if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)) \
                    or not np.isfinite(value):
                raise AttributeError_(f"{where} must be a finite number, got {value!r}")
            return float(value)
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
    torch: Callable[[Any, Any], Any] | None = None
    """The activation on a torch tensor: ``torch(t, x)`` with ``t`` the torch module (see :class:`OpSpec`)."""


def _relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


ACTIVATIONS: dict[str, Activation] = {
    "none": Activation("none", lambda x: x, ALL_DOMAINS, lambda t, x: x),
    "relu": Activation("relu", _relu, NO_MOD, lambda t, x: t.relu(x)),
    "sigmoid": Activation("sigmoid", _sigmoid, FLOAT_ONLY, lambda t, x: t.sigmoid(x)),
    "tanh": Activation("tanh", np.tanh, FLOAT_ONLY, lambda t, x: t.tanh(x)),
    "relu6": Activation("relu6", lambda x: np.clip(x, 0, 6), FLOAT_ONLY,  # MobileNet's; ONNX Clip(0, 6)
                        lambda t, x: t.clamp(x, 0, 6)),
}
ACT_NAMES = tuple(ACTIVATIONS)


# --------------------------------------------------------------------------- the spec
ShapeRule = Callable[[Attrs, Sequence[Shape]], tuple[Shape, ...]]
FlopRule = Callable[[Attrs, Sequence[Shape], Sequence[Shape]], int]
EvalRule = Callable[[Attrs, Sequence[Any], Domain], Any]
TorchRule = Callable[[Any, Attrs, Sequence[Any]], Any]
"""``torch(t, attrs, inputs)``: the op on torch tensors, ``t`` the ``torch`` module itself, so the op
table imports no torch (an optional extra, slow to import) and a row stays a plain lambda."""


@dataclass(frozen=True)
class OpSpec:
    """One row of the op table.

    ``arity`` is the exact number of tensor inputs, or None for variadic ops
    (at least ``min_arity``); ``optional_inputs`` more trailing inputs may follow
    (conv2d's bias). ``shape`` maps attributes and input shapes to the
    output shapes (one per output). ``flops`` counts arithmetic, ``evaluate`` is
    the NumPy reference, ``torch`` the same op on torch tensors (:data:`TorchRule`; what
    :mod:`eqsat.pytorch` runs: no data-dependent Python control flow and no host syncs, so a
    whole graph can be captured in a CUDA graph). ``linear_in`` lists inputs the op is linear in with the
    other inputs fixed (multilinearity); ``jointly_linear`` says the op is a
    linear map of all inputs together (ewadd, concat, layout ops). Fused
    activations (an ``act`` attribute other than ``none``) cancel linearity.
    ``is_view`` ops alias their input's memory and cost nothing;
    ``takes_tuple`` ops read every output of a multi-output producer.
    ``merge_axes`` lists ``(slot, axis)``: two nodes of this op sharing input ``slot``
    compute slices of one bigger op's output along ``axis`` (used by the pair move).
    ``same_rank`` says every required input has the output's rank (the shape rule enforces it), so a
    pattern that matches the op at a known rank knows its inputs' ranks too.
    ``terms`` gives the longest sum of products one output element needs (matmul's k); the exact
    integer checks use it to stay clear of int64 overflow (None: the op adds no such sum).
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
    terms: Callable[[Attrs, Sequence[Shape]], int] | None = None
    torch: TorchRule | None = None
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
            most = self.arity + self.optional_inputs
            takes = f"{self.arity}" if not self.optional_inputs else f"{self.arity} to {most}"
            raise ShapeError(f"{self.name}: takes {takes} input(s), got {n}")
        if self.arity is None and n < self.min_arity:
            raise ShapeError(f"{self.name}: takes at least {self.min_arity} inputs, got {n}")

    # -- properties that depend on attributes -------------------------------
    def linear_inputs(self, attrs: Attrs, n_inputs: int | None = None) -> tuple[int, ...]:
        """Inputs the op is linear in, given its attributes and input count (a fused activation
        or an optional input such as a bias makes it non-linear)."""
        if attrs.get("act", "none") != "none" or (
            n_inputs is not None and self.arity is not None and n_inputs > self.arity
        ):
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


def register_elementwise(name: str, arity: int, fn: Callable[..., Any], domains: frozenset[str], *,
                         flops_per_element: int = 1, linear_in: tuple[int, ...] = (), jointly_linear: bool = False,
                         commutative: bool = False, torch_fn: Callable[..., Any] | None = None,
                         doc: str = "") -> OpSpec:
    """One row for an elementwise op on equal shapes: ``fn`` applied to the inputs' values
    (``torch_fn(t, *inputs)`` on torch tensors, ``t`` the torch module)."""
    return register(OpSpec(
        name=name, arity=arity, attrs=(),
        shape=lambda attrs, ins, _n=name: _same_shapes(_n, ins),
        flops=lambda attrs, ins, outs: flops_per_element * numel(outs[0]),
        evaluate=lambda attrs, xs, domain: fn(*xs),
        torch=None if torch_fn is None else (lambda t, attrs, xs: torch_fn(t, *xs)),
        linear_in=linear_in, jointly_linear=jointly_linear, elementwise=True,
        commutative=commutative, domains=domains, same_rank=True, doc=doc,
    ))


def unregister(name: str) -> None:
    """Remove an op (used by extensibility tests that add toy ops)."""
    OP_TABLE.pop(name, None)


def get_op(name: str) -> OpSpec:
    """The spec of ``name``; :class:`UnknownOpError` lists the known ops otherwise."""
    try:
        return OP_TABLE[name]
    except KeyError:
        raise UnknownOpError(f"unknown op {name!r} (known: {', '.join(sorted(OP_TABLE))})") from None


_DEVICE_CONSTANTS: dict[tuple[Any, ...], Any] = {}


def device_constant(t: Any, key: tuple[Any, ...], device: Any, make: Callable[[], Any]) -> Any:
    """A constant tensor an op's torch form needs (gather's indices), made by ``make()`` once per
    ``key`` and device and kept: a copy from the host on every call would sync and could not be
    captured in a CUDA graph (the first, eager call makes it)."""
    found = _DEVICE_CONSTANTS.get((key, device))
    if found is None:
        found = _DEVICE_CONSTANTS[(key, device)] = t.as_tensor(np.array(make()), device=device)
    return found


def numel(shape: Shape) -> int:
    return math.prod(shape)


# --------------------------------------------------------------------------- shape helpers
def _same_shapes(op: str, ins: Sequence[Shape]) -> tuple[Shape, ...]:
    for i, s in enumerate(ins[1:], start=1):
        if s != ins[0]:
            raise ShapeError(
                f"{op}: input {i} has shape {s}, input 0 has shape {ins[0]}; elementwise ops need equal shapes"
            )
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


def pad_array(x: np.ndarray, widths: Sequence[tuple[int, int]], fill: Any = 0) -> np.ndarray:
    """Constant padding that keeps object arrays made of Python ints (np.pad would insert int64)."""
    if not any(a or b for a, b in widths):
        return x
    shape = tuple(s + a + b for s, (a, b) in zip(x.shape, widths))
    out = np.full(shape, fill, dtype=x.dtype)
    out[tuple(slice(a, a + s) for s, (a, _) in zip(x.shape, widths))] = x
    return out
