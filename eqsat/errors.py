"""Exceptions raised by the tensor IR, the cost model and the rule-file reader.

Every error names *what* is wrong and *where* (op and input for graphs,
``file:line:col`` for rule files) so that a user can fix the input.
"""
from __future__ import annotations


class EqsatError(Exception):
    """Base class of all errors raised by eqsat-lab."""


class UnknownOpError(EqsatError, KeyError):
    """An op name that is not in the op table."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else "unknown op"


class AttributeError_(EqsatError, ValueError):
    """A missing, unknown or ill-typed op attribute."""


class ShapeError(EqsatError, ValueError):
    """Input shapes that an op's shape rule rejects."""


class DomainError(EqsatError, ValueError):
    """An op evaluated in a numeric domain where it is not defined (e.g. relu mod p)."""


class UnsupportedError(EqsatError, ValueError):
    """A dtype, device or op that a backend (PyTorch) cannot run, named with what it can run."""


class RuleParseError(EqsatError, ValueError):
    """A malformed rule file; the message starts with ``file:line:col``."""

    def __init__(self, message: str, filename: str = "<string>", line: int = 0, col: int = 0):
        self.message = message
        self.filename = filename
        self.line = line
        self.col = col
        super().__init__(f"{filename}:{line}:{col}: {message}")


class RuleCompileError(EqsatError, ValueError):
    """A rule the e-graph cannot use (no ranks type it, no direction compiles), named with the reason."""
