"""Numeric domains a graph can be evaluated in.

* ``float``: float64, for numerical checks of rewrites (tolerance 1e-6 relative);
* ``int``: exact Python integers (object arrays), for the rule generator's fingerprints;
* ``mod``: integers modulo a prime ``p`` (default 2^31-1), reduced after every op,
  for Schwartz-Zippel tests of polynomial rules.

An op declares the domains it is defined in (sigmoid has no exact integer form,
relu is not a polynomial so it has no GF(p) form); evaluating it elsewhere raises
:class:`~eqsat.errors.DomainError`.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

MERSENNE_31 = 2**31 - 1
FAST_PRIME = 8_388_593  # < 2^23: products < 2^46, so int64 sums of up to 2^17 products stay exact
INT64_SAFE_TERMS = 2**63 // (FAST_PRIME - 1) ** 2
CHECK_PRIME = 1_048_573  # < 2^20: a product of residues is below 2^40, so a float64 (BLAS) sum of up to 2^13
# of them is exact and a model's matmul needs one BLAS product, not one per 12-bit limb
FLOAT64_EXACT = 2**53


@dataclass(frozen=True)
class Domain:
    """A numeric domain: ``name`` is ``float``, ``int`` or ``mod`` (with ``modulus``)."""

    name: str
    modulus: int | None = None

    def __post_init__(self) -> None:
        if self.name not in ("float", "int", "mod"):
            raise ValueError(f"unknown domain {self.name!r}: expected float, int or mod")
        if (self.name == "mod") != (self.modulus is not None):
            raise ValueError("the mod domain needs a modulus, and only it takes one")
        if self.modulus is not None and self.modulus < 2:
            raise ValueError(f"modulus must be >= 2, got {self.modulus}")

    @property
    def exact(self) -> bool:
        """True for the integer domains."""
        return self.name != "float"

    @property
    def int64(self) -> bool:
        """Residues mod a prime below 2^23 live in int64 arrays (fast); other exact values are Python ints."""
        return self.modulus is not None and self.modulus <= FAST_PRIME

    @property
    def object_arrays(self) -> bool:
        return self.exact and not self.int64

    def asarray(self, value: np.ndarray) -> np.ndarray:
        """Convert an input array into this domain's representation."""
        arr = np.asarray(value)
        if self.name == "float":
            return np.asarray(arr, dtype=np.float64)  # no copy of what is float64 already
        if self.int64:
            if self._reduced(arr):
                return arr  # residues already (drawn by :meth:`random`): a read, not a copy
            return np.asarray(arr, dtype=np.int64) % self.modulus
        if arr.dtype.kind == "f":
            if not np.all(np.equal(np.mod(arr, 1), 0)):
                raise ValueError(f"{self.name} domain needs integer-valued inputs")
        out = np.array(arr.astype(np.int64).tolist() if arr.dtype.kind == "f" else arr.tolist(), dtype=object)
        out = out.reshape(arr.shape)
        return self.reduce(out)

    def reduce(self, arr: np.ndarray) -> np.ndarray:
        """Reduce an op's result into the domain (mod p for ``mod``) as an array (0-d results too)."""
        if self.modulus is not None:
            arr = arr % self.modulus
        if not isinstance(arr, np.ndarray):
            arr = np.asarray(arr, dtype=object if self.object_arrays else (np.int64 if self.int64 else np.float64))
        return arr

    def _reduced(self, arr: object) -> bool:
        """An int64 array of residues already: two reads instead of a copy and a division per entry."""
        return (self.int64 and isinstance(arr, np.ndarray) and arr.dtype == np.int64
                and (not arr.size or (arr.min() >= 0 and arr.max() < self.modulus)))

    def contract(self, fn: Callable[[np.ndarray, np.ndarray], np.ndarray], a: np.ndarray, b: np.ndarray,
                 terms: int | None = None) -> np.ndarray:
        """A bilinear contraction ``fn(a, b)`` (matmul, a conv's einsum) computed exactly in this domain.

        Residues in int64 (below 2^23) have ``a`` split into as few limbs as keep each float64 (BLAS)
        product exact: a limb of w bits times a residue is below 2^w * p, and a sum of ``terms`` of
        them must stay below 2^53. Mod :data:`CHECK_PRIME` a matmul of up to 2^13 terms is one BLAS
        product; without ``terms`` (an einsum), 12-bit limbs, exact up to 2^18 terms, more than the
        int64 bound the evaluator already enforces (``INT64_SAFE_TERMS``). The partial products
        are recombined mod p.
        """
        if not self.int64:
            return fn(a, b)
        p = self.modulus
        width = limb_bits(p, terms)
        bf = b.astype(np.float64)
        if width >= p.bit_length():
            return fn(a.astype(np.float64), bf).astype(np.int64) % p
        out = np.zeros((), dtype=np.int64)
        mask = (1 << width) - 1
        for shift in range(0, p.bit_length(), width):
            part = fn(((a >> shift) & mask).astype(np.float64), bf).astype(np.int64) % p
            out = (out + (part << shift) % p) % p
        return out

    def random(self, shape: tuple[int, ...], rng: np.random.Generator, low: int = -50, high: int = 50) -> np.ndarray:
        """Random values: uniform [-1, 1] floats, ints in [low, high], or uniform residues mod p."""
        if self.name == "float":
            return rng.uniform(-1.0, 1.0, size=shape)
        if self.name == "int":
            return self.asarray(rng.integers(low, high + 1, size=shape))
        if self.int64:
            return rng.integers(0, self.modulus, size=shape, dtype=np.int64)
        return self.asarray(rng.integers(0, self.modulus, size=shape, dtype=np.int64))


def limb_bits(p: int, terms: int | None) -> int:
    """The widest limb of a residue mod ``p`` whose products with residues sum exactly in float64
    over ``terms`` terms (12 bits when ``terms`` is unknown)."""
    if terms is None:
        return 12
    for limbs in range(1, p.bit_length() + 1):
        width = -(-p.bit_length() // limbs)
        if max(terms, 1) * ((1 << width) - 1) * (p - 1) < FLOAT64_EXACT:
            return width
    raise ValueError(f"a contraction of {terms} terms mod {p} cannot be exact in float64")


FLOAT = Domain("float")
INT = Domain("int")


def modp(p: int = MERSENNE_31) -> Domain:
    """The domain of integers modulo ``p``."""
    return Domain("mod", p)
