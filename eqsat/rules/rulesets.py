"""The shipped rule sets, as a table, and the one loader every search uses.

The rule files live in ``eqsat/rules/``. ``RULE_SETS`` names each of them (and is the only place
their names are written); ``DEFAULT_RULE_SETS`` and ``FULL_RULE_SETS`` are what the e-graph and the
α search read when the user names no file. Every rule, shipped or a user's file, loads through
:func:`default_rules`. Adding a shipped set is one row here
and one file there (see the README's "Add a rule set").
"""
from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from eqsat.diskcache import DiskMemo, content_key
from eqsat.rules.pattern import App, Arith, Dim, Var
from eqsat.rules.rulefile import Rule, load_rules, merge_duplicates

RULES_DIR = Path(__file__).parent
EPILOGUE = "epilogue"  # the hand-written fusions, which code outside the searches also reads
FOLD = "folds"  # the hand-written folds: LoRA adapters, scales into weights, reshape/transpose chains


@dataclass(frozen=True)
class RuleSet:
    """A shipped rule file: its name, its file in ``RULES_DIR`` and how it was made."""

    name: str
    file: str
    origin: str

    @property
    def path(self) -> Path:
        return RULES_DIR / self.file


RULE_SETS: dict[str, RuleSet] = {s.name: s for s in (
    RuleSet("matrix", "matrix.rules", "generated: matrix world, graphs of up to 3 ops"),
    RuleSet("conv", "conv.rules", "generated: conv world, graphs of up to 3 ops"),
    RuleSet(EPILOGUE, "epilogue.rules", "hand-written: BN folding, bias and activation fusion"),
    RuleSet(FOLD, "folds.rules", "hand-written: LoRA adapters and scales folded into weights, reshape and "
                                "transpose chains removed"),
    RuleSet("matrix-min", "matrix.min.rules", "the matrix set less every rule the others derive (rules minimize)"),
    RuleSet("conv-min", "conv.min.rules", "the conv set less every rule the others derive (rules minimize)"),
    RuleSet("matrix4", "matrix4.rules", "generated: matrix world, graphs of 4 ops that matrix-min does not prove"),
    RuleSet("conv4", "conv4.rules", "generated: conv world, graphs of 4 ops that conv-min does not prove"),
    RuleSet("matrix4-min", "matrix4.min.rules", "the matrix4 set less every rule matrix-min and the others derive"),
    RuleSet("conv4-min", "conv4.min.rules", "the conv4 set less every rule conv-min and the others derive"),
)}
DEFAULT_RULE_SETS = ("matrix-min", "conv-min", EPILOGUE, FOLD)  # the e-graph's own: saturation re-derives the rest
FULL_RULE_SETS = ("matrix", "conv", EPILOGUE, FOLD)  # the generated sets before minimization: the α search's own


@lru_cache(maxsize=16)
def _load(path: str, key: str) -> tuple[Rule, ...]:
    # one cache file per rule file: the e-graph's minimized rules load without reading the full
    # generated sets, which only the alpha search reads. Keyed by the content alone (the path only
    # names a file in a parse error, and errors are not cached): keyed by path too, every checkout
    # and installed copy of a file added its whole parse to the file (five: 0.4-0.5 MB, a 0.06 s
    # parse in every process, 0.02 s with one)
    memo = DiskMemo(f"parsed-rules-{key[:16]}", types=(Rule, App, Var, Dim, Arith))
    rules = memo.get_or_compute(key, lambda: tuple(load_rules(path)))
    memo.save()
    if not rules:
        raise ValueError(f"{path}: the rule file has no rules")
    return rules


def load_rule_file(path: str | Path) -> tuple[Rule, ...]:
    """One rule file, parsed once per process and content (keyed by its bytes, not its
    modification time, which two quick writes can share: commands read users' files here too)."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise FileNotFoundError(f"{p}: no such rule file") from None
    return _load(str(p), content_key(data))


def resolve_rule_files(names_or_paths: Sequence[str | Path] | None = None) -> list[Path]:
    """Files for the given shipped set names or paths (the default sets when none are given)."""
    items = list(names_or_paths) if names_or_paths else list(DEFAULT_RULE_SETS)
    return [RULE_SETS[str(x)].path if str(x) in RULE_SETS else Path(x) for x in items]


def default_rules(names_or_paths: Sequence[str | Path] | None = None) -> list[Rule]:
    """The rules of the default shipped sets, or of the named sets and files, in order, each once
    (repeats are merged, with a warning saying how many)."""
    files = resolve_rule_files(names_or_paths)
    out: list[Rule] = []
    for f in files:
        out.extend(load_rule_file(f))
    kept, dropped = merge_duplicates(out)
    if dropped:
        pairs = ", ".join(f"{a} = {b}" for a, b in list(dropped.items())[:3]) + (", ..." if len(dropped) > 3 else "")
        warnings.warn(f"{', '.join(map(str, files))}: {len(dropped)} duplicate rule(s) merged, {len(kept)} kept "
                      f"({pairs})", stacklevel=2)
    return kept
