"""Patterns over the tensor IR: the terms rule files are written in.

A pattern is a :class:`Var` (``?a``, any tensor) or an :class:`App` of an op to
attribute expressions and argument patterns. Attribute expressions are
literals, attribute variables (``?ax``), tuples, shape lookups
``(dim ?a k)`` or ``(dim (op ...) k)`` and integer arithmetic ``(+ e e)``, ``(- e e)``, ``(* e e)``,
evaluated once the tensor variables are bound. :func:`match` finds bindings
of a pattern at a node; :func:`instantiate` builds the nodes of a pattern from
bindings (shape rules apply: an ill-typed right side raises ShapeError).
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from eqsat.errors import AttributeError_, ShapeError
from eqsat.ir.graph import Node, node
from eqsat.ir.ops import get_op


@dataclass(frozen=True)
class Var:
    """A pattern variable (written ``?name``)."""

    name: str

    def __str__(self) -> str:
        return f"?{self.name}"


@dataclass(frozen=True)
class Dim:
    """The size of axis ``axis`` of ``term`` (a variable or a sub-pattern of the rule)."""

    term: Pattern
    axis: int


@dataclass(frozen=True)
class Arith:
    """Integer arithmetic over attribute expressions: ``op`` is ``+``, ``-`` or ``*``."""

    op: str
    left: AttrExpr
    right: AttrExpr


AttrExpr = int | str | None | Var | Dim | Arith | tuple


@dataclass(frozen=True)
class App:
    """``op`` applied to attributes (all of the op's, in table order) and argument patterns."""

    op: str
    attrs: tuple[tuple[str, AttrExpr], ...]
    args: tuple[Pattern, ...]


Pattern = Var | App
Bindings = Mapping[str, Any]


# --------------------------------------------------------------------------- variables
def tensor_vars(p: Pattern) -> set[str]:
    """Names of the variables in tensor positions."""
    if isinstance(p, Var):
        return {p.name}
    out: set[str] = set()
    for a in p.args:
        out |= tensor_vars(a)
    return out


def _expr_vars(e: AttrExpr, attr: set[str], tensor: set[str]) -> None:
    if isinstance(e, Var):
        attr.add(e.name)
    elif isinstance(e, Dim):
        tensor |= tensor_vars(e.term)
    elif isinstance(e, Arith):
        _expr_vars(e.left, attr, tensor)
        _expr_vars(e.right, attr, tensor)
    elif isinstance(e, tuple):
        for x in e:
            _expr_vars(x, attr, tensor)


def attr_vars(p: Pattern) -> tuple[set[str], set[str]]:
    """(attribute variables, tensor variables read by ``dim``) used in attribute positions."""
    attr: set[str] = set()
    tensor: set[str] = set()
    if isinstance(p, App):
        for _, e in p.attrs:
            _expr_vars(e, attr, tensor)
        for a in p.args:
            sub_a, sub_t = attr_vars(a)
            attr |= sub_a
            tensor |= sub_t
    return attr, tensor


# --------------------------------------------------------------------------- evaluation of attributes
def eval_attr(e: AttrExpr, b: Bindings) -> Any:
    """The value of an attribute expression under bindings ``b``."""
    if isinstance(e, Var):
        if e.name not in b:
            raise KeyError(f"attribute variable {e} is unbound")
        return b[e.name]
    if isinstance(e, Dim):
        t = instantiate(e.term, b)
        try:
            return t.shape[e.axis]
        except IndexError:
            raise ShapeError(f"dim: axis {e.axis} of a tensor of shape {t.shape}") from None
    if isinstance(e, Arith):
        left, right = eval_attr(e.left, b), eval_attr(e.right, b)
        return left + right if e.op == "+" else left - right if e.op == "-" else left * right
    if isinstance(e, tuple):
        return tuple(eval_attr(x, b) for x in e)
    return e


def _is_ground(e: AttrExpr) -> bool:
    return not isinstance(e, (Var, Dim, Arith)) and not (isinstance(e, tuple) and not all(map(_is_ground, e)))


# --------------------------------------------------------------------------- instantiate
def instantiate(p: Pattern, b: Bindings) -> Node:
    """Build the node of pattern ``p`` under bindings ``b`` (raises ShapeError if ill-typed)."""
    if isinstance(p, Var):
        return b[p.name]
    args = tuple(instantiate(a, b) for a in p.args)
    attrs = {k: eval_attr(e, b) for k, e in p.attrs}
    return node(p.op, *args, **{k: v for k, v in attrs.items() if v is not None})


# --------------------------------------------------------------------------- match
def match(p: Pattern, n: Node, b: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    """Bindings under which ``p`` equals ``n`` (extending ``b``), or None."""
    out = dict(b or {})
    return out if _match(p, n, out) else None


def _match(p: Pattern, n: Node, b: dict[str, Any]) -> bool:
    if isinstance(p, Var):
        bound = b.get(p.name)
        if bound is None:
            if len(n.shapes) != 1:
                return False
            b[p.name] = n
            return True
        return bound is n
    if p.op != n.op or len(p.args) != len(n.inputs):
        return False
    for sub, child in zip(p.args, n.inputs):
        if not _match(sub, child, b):
            return False
    # attributes last: (dim ?x k) needs the arguments bound
    have = dict(n.attrs)
    for key, e in p.attrs:
        if not _match_attr(e, have[key], b, n, key):
            return False
    return True


def _match_attr(e: AttrExpr, value: Any, b: dict[str, Any], n: Node, key: str) -> bool:
    if isinstance(e, Var):
        if e.name in b:
            return b[e.name] == value
        b[e.name] = value
        return True
    if e is None and value is not None:
        # an attribute left to its shape-derived default (e.g. transpose's reversed perm)
        spec = get_op(n.op)
        derived = dict(spec.canonical_attrs({}, tuple(x.shapes[0] for x in n.inputs)))
        return derived[key] == value
    if isinstance(e, tuple) and isinstance(value, tuple):
        return len(e) == len(value) and all(_match_attr(x, v, b, n, key) for x, v in zip(e, value))
    if isinstance(e, (Dim, Arith)):
        try:
            return eval_attr(e, b) == value
        except (KeyError, ShapeError):
            return False
    return e == value


def canonical_pattern_attrs(op: str, given: Mapping[str, AttrExpr]) -> tuple[tuple[str, AttrExpr], ...]:
    """Fill defaults and canonicalize the ground attribute values of a pattern node."""
    spec = get_op(op)
    unknown = set(given) - set(spec.attr_names)
    if unknown:
        raise AttributeError_(f"{op}: unknown attribute(s) {', '.join(sorted(unknown))} "
                              f"(known: {', '.join(spec.attr_names) or 'none'})")
    out = []
    for a in spec.attrs:
        if a.name in given:
            e = given[a.name]
            out.append((a.name, a.canonical(op, e) if _is_ground(e) else e))
        elif a.required:
            raise AttributeError_(f"{op}: missing required attribute {a.name!r}")
        else:
            out.append((a.name, a.default))
    return tuple(out)


def pattern_default(op: str, name: str) -> Any:
    for a in get_op(op).attrs:
        if a.name == name:
            return None if a.required else a.default
    raise KeyError(name)


def bind_attrs(p: Pattern, values: Bindings) -> Pattern:
    """``p`` with the attribute variables in ``values`` replaced by their values."""
    if isinstance(p, Var):
        return p

    def sub(e: AttrExpr) -> AttrExpr:
        if isinstance(e, Var):
            return values.get(e.name, e)
        if isinstance(e, tuple):
            return tuple(sub(x) for x in e)
        if isinstance(e, Arith):
            return Arith(e.op, sub(e.left), sub(e.right))
        return e

    return App(p.op, tuple((k, sub(e)) for k, e in p.attrs), tuple(bind_attrs(a, values) for a in p.args))


def attr_bindings(p: App, attrs: tuple[tuple[str, Any], ...]) -> dict[str, Any] | None:
    """The values ``p``'s attribute variables take when ``p``'s attributes are ``attrs`` (a node's),
    or None when a ground attribute differs. Only plain variables and tuples of them bind."""
    have, out = dict(attrs), {}
    for key, e in p.attrs:
        if not _bind_attr(e, have.get(key), out):
            return None
    return out


def _bind_attr(e: AttrExpr, value: Any, out: dict[str, Any]) -> bool:
    if isinstance(e, Var):
        if e.name in out:
            return out[e.name] == value
        out[e.name] = value
        return True
    if isinstance(e, tuple) and isinstance(value, tuple) and not _is_ground(e):
        return len(e) == len(value) and all(_bind_attr(x, v, out) for x, v in zip(e, value))
    if isinstance(e, (Dim, Arith)):
        return True  # checked when the rule matches
    return e == value


def walk(p: Pattern) -> Iterator[Pattern]:
    yield p
    if isinstance(p, App):
        for a in p.args:
            yield from walk(a)


def pattern_of(n: Node, names: Mapping[Node, str] | None = None) -> Pattern:
    """The pattern of a term: leaves become variables named after them (or ``names[leaf]``)."""
    if n.is_leaf:
        return Var(names[n] if names and n in names else n.attr("name"))
    return App(n.op, n.attrs, tuple(pattern_of(x, names) for x in n.inputs))
