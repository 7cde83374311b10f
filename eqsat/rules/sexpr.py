"""A tiny s-expression reader that remembers where every datum came from.

Atoms are integers, symbols (``matmul``, ``relu``, ``same``), variables
(``?a``) and keywords (``:axis``). ``( ... )`` is a list, ``[ ... ]`` a
bracketed list (attribute tuples). Every datum carries its line and column,
so errors can point at ``file:line:col``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from eqsat.errors import RuleParseError

_TOKEN = re.compile(r"\s*(?:(?P<open>[(\[])|(?P<close>[)\]])|(?P<atom>[^\s()\[\];]+))")


@dataclass(frozen=True)
class Atom:
    text: str
    line: int
    col: int

    @property
    def is_int(self) -> bool:
        return re.fullmatch(r"[-+]?\d+", self.text) is not None

    @property
    def is_var(self) -> bool:
        return self.text.startswith("?")

    @property
    def is_keyword(self) -> bool:
        return self.text.startswith(":")


@dataclass(frozen=True)
class SList:
    items: tuple[Datum, ...]
    bracket: str  # "(" or "["
    line: int
    col: int


Datum = Atom | SList


MAX_DEPTH = 100  # brackets one rule may nest (shipped rules: under 10; 400 raised RecursionError)


def read_all(text: str, filename: str = "<string>", line: int = 1, col_offset: int = 0) -> list[Datum]:
    """Read every datum in ``text`` (one line of a rule file); columns are 1-based."""
    pos = 0
    stack: list[tuple[str, int, list[Datum]]] = []
    top: list[Datum] = []
    closing = {"(": ")", "[": "]"}
    while True:
        m = _TOKEN.match(text, pos)
        if m is None:
            rest = text[pos:].strip()
            if rest:
                col = col_offset + len(text) - len(text[pos:].lstrip()) + 1
                raise RuleParseError(f"unexpected character {rest[0]!r}", filename, line, col)
            break
        if m.end() == pos:
            break
        kind = m.lastgroup
        col = col_offset + m.start(kind) + 1
        pos = m.end()
        if kind == "open":
            if len(stack) == MAX_DEPTH:  # deeper terms overflowed the recursive passes after this reader
                raise RuleParseError(f"nested more than {MAX_DEPTH} levels deep (the limit)", filename, line, col)
            stack.append((m.group(kind), col, []))
        elif kind == "close":
            if not stack:
                raise RuleParseError(f"unmatched {m.group(kind)!r}", filename, line, col)
            bracket, start, items = stack.pop()
            if closing[bracket] != m.group(kind):
                raise RuleParseError(f"{bracket!r} opened at column {start} is closed by {m.group(kind)!r}",
                                     filename, line, col)
            (stack[-1][2] if stack else top).append(SList(tuple(items), bracket, line, start))
        else:
            (stack[-1][2] if stack else top).append(Atom(m.group(kind), line, col))
    if stack:
        bracket, start, _ = stack[-1]
        raise RuleParseError(f"{bracket!r} opened at column {start} is never closed", filename, line, start)
    return top
