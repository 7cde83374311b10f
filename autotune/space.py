"""The matmul schedule space: seven knobs as data, configs as rows of an integer array.

A config is one value per knob, in the order of :data:`KNOBS`. Arrays of configs
(``shape (n, 7)``) let the device model, legality check and features work on many configs at
once; :class:`Config` is the readable single-config form. The space is the full product,
157,500 configs; which ones are legal depends on the device (shared memory, registers).
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Knob:
    """A tunable parameter and its ordered candidate values (neighbours are adjacent values)."""

    name: str
    values: tuple[int, ...]
    doc: str = ""

    def index(self, value: int) -> int:
        try:
            return self.values.index(value)
        except ValueError:
            raise ValueError(f"knob {self.name} has no value {value}; choose from {self.values}") from None


KNOBS: tuple[Knob, ...] = (
    Knob("split_k", (1, 2, 4, 8, 16), "K split into this many parts reduced by a second pass"),
    Knob("block_m", (16, 32, 64, 128, 256), "output tile rows per thread block"),
    Knob("block_n", (16, 32, 64, 128, 256), "output tile columns per thread block"),
    Knob("block_k", (16, 32, 64, 128, 256), "K step per pipeline stage"),
    Knob("num_warps", (1, 2, 4, 8, 16, 32), "warps per thread block"),
    Knob("num_stages", (1, 2, 3, 4, 5, 6, 7), "shared-memory pipeline depth"),
    Knob("group_m", (1, 2, 4, 8, 16, 32), "row tiles launched together for L2 reuse (1: row-major)"),
)
KNOB_NAMES = tuple(k.name for k in KNOBS)
COLUMN = {name: i for i, name in enumerate(KNOB_NAMES)}


@dataclass(frozen=True)
class Config:
    """One schedule: a value for every knob."""

    split_k: int
    block_m: int
    block_n: int
    block_k: int
    num_warps: int
    num_stages: int
    group_m: int

    def __post_init__(self) -> None:
        for knob in KNOBS:
            knob.index(getattr(self, knob.name))

    def as_tuple(self) -> tuple[int, ...]:
        return tuple(getattr(self, n) for n in KNOB_NAMES)

    def as_dict(self) -> dict[str, int]:
        return {n: getattr(self, n) for n in KNOB_NAMES}

    @classmethod
    def from_dict(cls, d: Mapping[str, int]) -> Config:
        missing = [n for n in KNOB_NAMES if n not in d]
        if missing:
            raise ValueError(f"config is missing knob(s) {', '.join(missing)}: {dict(d)}")
        return cls(**{n: int(d[n]) for n in KNOB_NAMES})

    def __str__(self) -> str:
        return (f"sk{self.split_k} {self.block_m}x{self.block_n}x{self.block_k} "
                f"w{self.num_warps} s{self.num_stages} g{self.group_m}")


class Space:
    """The product of the knobs' values, addressed by a flat index in lexicographic order."""

    def __init__(self, knobs: Sequence[Knob] = KNOBS,
                 restriction: Callable[[np.ndarray], np.ndarray] | None = None):
        """``restriction``: a target's mask of the configs worth measuring (an ``(n, 7)`` array of
        values to a boolean per row), which tuners use instead of HypoGPU's resource legality
        (:func:`autotune.resources.allowed`); None keeps that legality."""
        self.knobs, self.restriction = tuple(knobs), restriction
        self.sizes = np.array([len(k.values) for k in self.knobs], dtype=np.int64)
        self.tables = [np.array(k.values, dtype=np.int64) for k in self.knobs]

    def __len__(self) -> int:
        return int(np.prod(self.sizes))

    def digits(self, index: np.ndarray | int) -> np.ndarray:
        """Per-knob value positions of flat indices, shape (n, knobs)."""
        idx = np.atleast_1d(np.asarray(index, dtype=np.int64))
        if idx.size and (idx.min() < 0 or idx.max() >= len(self)):
            raise IndexError(f"config index out of range 0..{len(self) - 1}")
        out = np.empty((idx.size, len(self.knobs)), dtype=np.int64)
        for j in range(len(self.knobs) - 1, -1, -1):
            out[:, j] = idx % self.sizes[j]
            idx = idx // self.sizes[j]
        return out

    def index_of_digits(self, digits: np.ndarray) -> np.ndarray:
        digits = np.atleast_2d(digits)
        idx = np.zeros(len(digits), dtype=np.int64)
        for j in range(len(self.knobs)):
            idx = idx * self.sizes[j] + digits[:, j]
        return idx

    def values(self, index: np.ndarray | int) -> np.ndarray:
        """Knob values of flat indices, shape (n, knobs)."""
        d = self.digits(index)
        return np.stack([self.tables[j][d[:, j]] for j in range(len(self.knobs))], axis=1)

    def all_values(self) -> np.ndarray:
        return self.values(np.arange(len(self)))

    def index(self, config: Config) -> int:
        digits = np.array([[k.index(v) for k, v in zip(self.knobs, config.as_tuple())]])
        return int(self.index_of_digits(digits)[0])

    def config(self, index: int) -> Config:
        return Config(*(int(v) for v in self.values(index)[0]))

    def families(self, index: np.ndarray | int) -> np.ndarray:
        """A key per flat index, shared by configs that differ only in ``group_m`` (the launch
        order: the knob most like a re-roll, which would otherwise fill a batch with one tile)."""
        digits = self.digits(index)
        names = [k.name for k in self.knobs]
        if "group_m" in names:
            digits[:, names.index("group_m")] = 0
        return self.index_of_digits(digits)

    def neighbours(self, index: int) -> list[int]:
        """Configs one knob away, that knob moved to an adjacent value."""
        d = self.digits(index)[0]
        out = []
        for j, size in enumerate(self.sizes):
            for step in (-1, 1):
                if 0 <= d[j] + step < size:
                    e = d.copy()
                    e[j] += step
                    out.append(int(self.index_of_digits(e)[0]))
        return out

    def random_neighbours(self, index: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """For each index, one random neighbour (a random knob moved one step, kept in range)."""
        d = self.digits(index)
        j = rng.integers(0, len(self.knobs), size=len(d))
        step = rng.choice(np.array([-1, 1]), size=len(d))
        col = d[np.arange(len(d)), j] + step
        col = np.where((col < 0) | (col >= self.sizes[j]), d[np.arange(len(d)), j] - step, col)
        d[np.arange(len(d)), j] = col
        return self.index_of_digits(d)

    def __iter__(self) -> Iterator[Config]:
        for i in range(len(self)):
            yield self.config(i)


SPACE = Space()


def knob_distance(digits: np.ndarray, others: np.ndarray) -> np.ndarray:
    """For each row of ``digits`` (knob value positions, as :meth:`Space.digits` gives), how many
    knobs it differs in from the nearest row of ``others`` (the number of knobs when ``others``
    is empty): what a tuner's novelty bonus counts."""
    out = np.full(len(digits), digits.shape[1], dtype=np.int8)
    for row in others:
        np.minimum(out, (digits != row).sum(axis=1, dtype=np.int8), out=out)
    return out


def column(configs: np.ndarray, name: str) -> np.ndarray:
    """One knob's values from an (n, 7) array of configs."""
    return configs[:, COLUMN[name]]
