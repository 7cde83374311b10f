"""Symbolic dimensions: run the op table's own shape rules on unknown sizes.

A :class:`Sym` is an integer linear expression over named atoms (egglog
variables such as ``?A__0``, each a size >= 1) plus a constant. Running an op's Python shape rule on input
shapes made of Syms yields the output shape as Syms and, through the equality
checks the rule makes, the conditions under which the op type-checks. This is
how rewrite rules get their egglog shape facts and conditions without a second
hand-written copy of any shape rule. Orderings that cannot be decided
symbolically raise :class:`Undecidable`; such a rule stays out of the e-graph.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Union

Number = Union[int, "Sym"]


class Undecidable(Exception):
    """A shape rule asked a question about symbolic sizes that has no fixed answer."""


_CONSTRAINTS: list[list[tuple[Sym, Sym]]] = []


@contextmanager
def recording() -> Iterator[list[tuple[Sym, Sym]]]:
    """Collect the equalities shape rules assume while running inside this block."""
    found: list[tuple[Sym, Sym]] = []
    _CONSTRAINTS.append(found)
    try:
        yield found
    finally:
        _CONSTRAINTS.pop()


class Sym:
    """const + sum(coef * atom); atoms are egglog i64 expressions."""

    __slots__ = ("terms", "const")

    def __init__(self, terms: dict[str, int] | None = None, const: int = 0):
        self.terms = {k: v for k, v in (terms or {}).items() if v}
        self.const = const

    @classmethod
    def atom(cls, text: str) -> Sym:
        return cls({text: 1})

    @staticmethod
    def lift(x: Number) -> Sym:
        return x if isinstance(x, Sym) else Sym(None, int(x))

    @property
    def is_const(self) -> bool:
        return not self.terms

    # arithmetic ----------------------------------------------------------
    def __add__(self, other: Number) -> Sym:
        o = Sym.lift(other)
        terms = dict(self.terms)
        for k, v in o.terms.items():
            terms[k] = terms.get(k, 0) + v
        return Sym(terms, self.const + o.const)

    __radd__ = __add__

    def __neg__(self) -> Sym:
        return Sym({k: -v for k, v in self.terms.items()}, -self.const)

    def __sub__(self, other: Number) -> Sym:
        return self + (-Sym.lift(other))

    def __rsub__(self, other: Number) -> Sym:
        return Sym.lift(other) - self

    def __mul__(self, other: Number) -> Sym:
        o = Sym.lift(other)
        if o.is_const:
            return Sym({k: v * o.const for k, v in self.terms.items()}, self.const * o.const)
        if self.is_const:
            return o * self.const
        return Sym.atom(f"(* {self.egg()} {o.egg()})")

    __rmul__ = __mul__

    def __floordiv__(self, other: Number) -> Sym:
        o = Sym.lift(other)
        if o.is_const and o.const == 1:
            return self
        if o.is_const and o.const != 0 and all(v % o.const == 0 for v in self.terms.values()) \
                and self.const % o.const == 0:
            return Sym({k: v // o.const for k, v in self.terms.items()}, self.const // o.const)
        if self.is_const and o.is_const:
            return Sym(None, self.const // o.const)
        return Sym.atom(f"(/ {self.egg()} {o.egg()})")

    def __mod__(self, other: Number) -> Sym:
        o = Sym.lift(other)
        if o.is_const and o.const == 1:
            return Sym(None, 0)
        if self.is_const and o.is_const:
            return Sym(None, self.const % o.const)
        return Sym.atom(f"(% {self.egg()} {o.egg()})")

    # comparisons -----------------------------------------------------------
    def _diff(self, other: object) -> Sym | None:
        if isinstance(other, (int, Sym)) and not isinstance(other, bool):
            return self - other
        return None

    def __eq__(self, other: object) -> bool:  # type: ignore[override]
        d = self._diff(other)
        if d is None:
            return NotImplemented  # type: ignore[return-value]
        if d.is_const:
            return d.const == 0
        if not _CONSTRAINTS:
            raise Undecidable(f"is {self.egg()} = {Sym.lift(other).egg()}?")  # type: ignore[arg-type]
        _CONSTRAINTS[-1].append((self, Sym.lift(other)))  # type: ignore[arg-type]
        return True

    def __ne__(self, other: object) -> bool:  # type: ignore[override]
        result = self.__eq__(other)
        return result if result is NotImplemented else not result

    def _bounds(self) -> tuple[float, float]:
        """Lower and upper bounds, knowing every size variable (``?x``) is >= 1."""
        lo = hi = float(self.const)
        for k, c in self.terms.items():
            if not k.startswith("?"):
                return float("-inf"), float("inf")
            if c > 0:
                lo, hi = lo + c, float("inf")
            else:
                lo, hi = float("-inf"), hi + c
        return lo, hi

    def _sign_below(self, other: Number, strict: bool) -> bool:
        """Decide self < other (strict) or self <= other, or raise Undecidable."""
        lo, hi = (self - other)._bounds()
        if (hi < 0) if strict else (hi <= 0):
            return True
        if (lo >= 0) if strict else (lo > 0):
            return False
        raise Undecidable(f"sign of {(self - other).egg()}")

    def __lt__(self, other: Number) -> bool:
        return self._sign_below(other, True)

    def __le__(self, other: Number) -> bool:
        return self._sign_below(other, False)

    def __gt__(self, other: Number) -> bool:
        return Sym.lift(other)._sign_below(self, True)

    def __ge__(self, other: Number) -> bool:
        return Sym.lift(other)._sign_below(self, False)

    def __hash__(self) -> int:
        return hash(self.egg())

    def __index__(self) -> int:
        if not self.is_const:
            raise Undecidable(f"{self.egg()} used as a concrete integer")
        return self.const

    __int__ = __index__

    def __bool__(self) -> bool:
        if not self.is_const:
            raise Undecidable(f"truth of {self.egg()}")
        return self.const != 0

    # egglog text -----------------------------------------------------------
    def egg(self) -> str:
        parts = []
        for k, v in sorted(self.terms.items()):
            parts.append(k if v == 1 else f"(* {v} {k})")
        if self.const or not parts:
            parts.append(str(self.const))
        out = parts[0]
        for p in parts[1:]:
            out = f"(+ {out} {p})"
        return out

    def __repr__(self) -> str:
        return f"Sym({self.egg()})"
