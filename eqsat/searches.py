"""The registry of graph searches: ``SEARCHES`` maps a name to the :class:`eqsat.search.Search`
that runs it, named by ``"module:class"`` and imported on first use (so this module imports
neither search package, and listing the names costs nothing). The CLI, every experiment, the
tests and :func:`eqsat.pipeline.optimize_model` read it. Each search carries named presets
(``taso-paper``, ``tensat-paper``, ``quick``) and its default rule sets, so defaults live in one place.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cache
from typing import TYPE_CHECKING, Any

from eqsat.refs import resolve

if TYPE_CHECKING:
    from eqsat.search import Search

ALPHA, EGRAPH, PET = "taso", "eqsat", "pet"  # the names callers use; each class's ``name`` is the same string
EGRAPH_PET, ALPHA_PET = f"{EGRAPH}+{PET}", f"{ALPHA}+{PET}"  # a search with PET's rewrites inside


@dataclass(frozen=True)
class SearchRow:
    """A registered search: its class as ``"module:class"`` (imported on first use, so listing the
    names costs nothing), the label reports print, and the graph-level rewrites (rows of
    :data:`GRAPH_REWRITES`) it applies beside its rules."""

    target: str
    label: str
    graph_rewrites: tuple[str, ...] = ()


GRAPH_REWRITES: dict[str, str] = {PET: "pet.rewrite:PET_REWRITE"}  # name -> its GraphRewrite as "module:value"

SEARCHES: dict[str, SearchRow] = {
    ALPHA: SearchRow("taso_baseline.search:AlphaSearch", "TASO α search"),
    EGRAPH: SearchRow("eqsat.egraph.optimize:EGraphSearch", "TENSAT e-graph"),
    PET: SearchRow("pet.search:PetSearch", "PET"),
    EGRAPH_PET: SearchRow("eqsat.egraph.optimize:EGraphSearch", "TENSAT with PET's rewrites", (PET,)),
    ALPHA_PET: SearchRow("taso_baseline.search:AlphaSearch", "TASO α search with PET's rewrites", (PET,)),
}


@cache
def get_search(name: str) -> Search:
    """The registered search ``name`` (one instance per process), or a clear error listing them."""
    if name not in SEARCHES:
        raise ValueError(f"unknown search {name!r}; choose from {', '.join(SEARCHES)}")
    row = SEARCHES[name]
    engine = resolve(row.target)()
    if row.graph_rewrites:
        from eqsat.search import WithGraphRewrites

        return WithGraphRewrites(engine, name, [resolve(GRAPH_REWRITES[r]) for r in row.graph_rewrites])
    return engine


def preset_limits(search: Search, name: str, model: str = "") -> Any:
    """The search's preset ``name`` for ``model``, or a clear error listing its presets."""
    if name not in search.presets:
        raise ValueError(f"search {search.name!r} has no preset {name!r} (it has: {', '.join(search.presets)})")
    return search.limits(name, model)


def limits_for(search: Search, model: str = "", quick: bool = False, preset: str | None = None,
               **overrides: Any) -> Any:
    """The search's ``preset`` (default its paper preset; ``quick`` wins) for ``model``, with the
    non-None ``overrides``."""
    base = preset_limits(search, "quick" if quick else preset or search.default_preset, model)
    given = {k: v for k, v in overrides.items() if v is not None}
    if not given:
        return base
    if "k_multi" in given:  # a fixed k_multi is TENSAT's setting: no merges by need on top
        given.setdefault("multi_by_need", 0)
    try:
        return replace(base, **given)
    except TypeError:
        fields = ", ".join(base.__dataclass_fields__)
        raise ValueError(f"search {search.name!r} has no limit named among {', '.join(given)} "
                         f"(its limits: {fields})") from None
