"""One search as an experiment cell, beside the registry of searches it reads.

The registry (``SEARCHES``, ``get_search``, presets) lives in :mod:`eqsat.searches` and is
re-exported here for the experiments. Both searches price graphs with the same cost model; every
result is verified once, by :func:`eqsat.search.run_verified`.
"""
from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from eqsat.cost.devices import DEFAULT_DEVICE
from eqsat.searches import (  # noqa: F401  (the registry, re-exported for the experiments)
    ALPHA,
    ALPHA_PET,
    EGRAPH,
    EGRAPH_PET,
    GRAPH_REWRITES,
    PET,
    SEARCHES,
    SearchRow,
    get_search,
    limits_for,
    preset_limits,
)

if TYPE_CHECKING:
    from eqsat.ir.graph import Graph
    from eqsat.search import SearchResult

_PREPARED: dict[tuple[str, tuple[str, ...]], float] = {}


def add_alpha_preset(p: Any) -> None:
    """``--preset``: the α search's named limits, for a command or experiment that runs it."""
    p.add_argument("--preset", default=None, metavar="NAME",
                   help=f"{ALPHA}: named limits of the α search (default taso-paper: TASO's two-output "
                        "substitutions; case-study: single-output rules plus the pair move, budget 1000, as "
                        "docs/reference.md's case studies ran)")


def alpha_preset(name: str | None) -> str | None:
    """``name`` if the α search has such a preset (None: its default), else a clear error listing them."""
    if name is not None:
        preset_limits(get_search(ALPHA), name)
    return name


def prepare_rules(search: str, rule_sets: Sequence[str] | None = None) -> float:
    """Parse the shipped rule sets (and, for the e-graph, compile them to egglog) once per process;
    returns the seconds it took.

    Both searches keep parsed (the e-graph also compiled) rules for the life of the process, and
    the search's worker is started and waited for here (:func:`eqsat.search.ready`), so a search's
    time is its own and does not depend on which model ran first: the first e-graph cell of
    ``compare`` (BERT) paid the worker's start-up, 0.40 s against 0.20 s warm."""
    from eqsat.egraph.relevance import rule_signatures
    from eqsat.egraph.rewrites import compile_rules
    from eqsat.rules.rulesets import default_rules
    from eqsat.search import ready

    key = (search, tuple(rule_sets or ()))
    if key not in _PREPARED:
        t0 = time.perf_counter()
        engine = get_search(search)
        engine.warm()  # its worker imports egglog while the rules are parsed and compiled
        rules = default_rules(rule_sets or engine.default_rule_sets)
        if SEARCHES[search].target == SEARCHES[EGRAPH].target:
            compile_rules(rules, multi=True)
            for rule in rules:
                rule_signatures(rule, False)  # the exact key relevant_rules uses
        ready(engine)
        _PREPARED[key] = time.perf_counter() - t0
    return _PREPARED[key]


def result_row(result: SearchResult, graph: Graph, prepare_s: float = 0.0) -> dict[str, Any]:
    """A flat experiment row of a verified result: the common fields, the work record, one
    ``<phase>_s`` column per timing, and ``verified`` as a flag with its method."""
    assert result.verified is not None, "rows are made of verified results"
    row = result.to_dict()
    timings: Mapping[str, float] = row.pop("timings")
    row.update({f"{k}_s": v for k, v in timings.items() if k != "search"})
    row.update({"ops": graph.op_count(), "verified": result.verified.equal, "verified_by": result.verified.method,
                "prepare_s": prepare_s})
    if "iterations" in row:
        row["per_iteration"] = [[it["enodes"], round(it["seconds"], 3)] for it in row["iterations"]]
        row["iterations"] = len(row["iterations"])
    return row


def search_graph(graph: Graph, model: str, search: str, device: str = DEFAULT_DEVICE, seed: int = 0,
                 quick: bool = False, limits: Any = None,
                 rule_sets: Sequence[str] | None = None) -> tuple[dict[str, Any], Graph]:
    """One verified search of ``graph`` (``limits``: default the paper preset for ``model``, or the
    smoke preset with ``quick``; ``rule_sets``: default the search's own): the row and the best graph."""
    row, result = search_result(graph, model, search, device, seed, quick, limits, rule_sets)
    return row, result.best


def search_result(graph: Graph, model: str, search: str, device: str = DEFAULT_DEVICE, seed: int = 0,
                  quick: bool = False, limits: Any = None,
                  rule_sets: Sequence[str] | None = None) -> tuple[dict[str, Any], SearchResult]:
    """:func:`search_graph`, with the whole verified result (its work record) instead of the best graph."""
    from eqsat.cost.registry import cost_model
    from eqsat.rules.rulesets import default_rules
    from eqsat.search import run_verified

    engine = get_search(search)
    limits = limits if limits is not None else limits_for(engine, model, quick)
    prepare_s = 0.0 if quick else prepare_rules(search, rule_sets)  # a smoke run need not warm every rule
    rules = default_rules(rule_sets or engine.default_rule_sets)
    result = run_verified(engine, graph, rules, cost_model(device), limits, seed)
    return result_row(result, graph, prepare_s) | {"model": model}, result


def run_search(model: str, search: str, device: str = DEFAULT_DEVICE, seed: int = 0, quick: bool = False,
               alpha: float | None = None, budget: int | None = None, iterations: int | None = None,
               nodes: int | None = None, k_multi: int | None = None, params: dict[str, Any] | None = None,
               time_limit: float | str | None = "paper", rules: str | None = None,
               preset: str | None = None) -> dict[str, Any]:
    """One search on one benchmark graph as an experiment cell; the overrides replace the preset's
    settings (``time_limit``: seconds for the α search, ``"paper"`` for the preset's cap, None for none;
    ``rules``: comma-separated rule sets or files for the search instead of its own; ``preset``: the
    α search's named preset, default its paper preset). The row names the preset it ran."""
    limits, named = cell_limits(search, model, quick, alpha, budget, iterations, nodes, k_multi, time_limit, preset)
    rule_sets = cell_rule_sets(rules)
    graph = _PREFETCHED.pop(_graph_key(model, search, params), None) or _build(model, params)
    row, _ = search_graph(graph, model, search, device, seed, quick, limits, rule_sets)
    row |= {} if named is None else {"preset": named}
    return row if rules is None else row | {"rules": rules}


def cell_limits(search: str, model: str, quick: bool = False, alpha: float | None = None,
                budget: int | None = None, iterations: int | None = None, nodes: int | None = None,
                k_multi: int | None = None, time_limit: float | str | None = "paper", preset: str | None = None,
                **_: Any) -> tuple[Any, str | None]:
    """A :func:`run_search` cell's limits and the α search's preset name (None for the others),
    from the cell's parameters (others are ignored: a prefetch passes them all)."""
    engine = get_search(search)
    if SEARCHES[search].target != SEARCHES[ALPHA].target:
        return limits_for(engine, model, quick, iterations=iterations, nodes=nodes, k_multi=k_multi), None
    limits = limits_for(engine, model, quick, preset, alpha=alpha, budget=budget)
    limits = limits if time_limit == "paper" else replace(limits, time_limit=time_limit)
    return limits, "quick" if quick else preset or engine.default_preset


def cell_rule_sets(rules: str | None) -> tuple[str, ...] | None:
    """A cell's ``rules`` (comma-separated sets or files) as names, or None for the search's own."""
    return tuple(rules.split(",")) if rules else None


_PREFETCHED: dict[str, Graph] = {}  # graphs a prefetch built (see _graph_key), until their cell takes them


def _graph_key(model: str, search: str, params: Mapping[str, Any] | None) -> str:
    """The search is part of it: ``compare``'s α cell of the same model, run between the prefetch
    and the e-graph cell, took the e-graph's graph, and the e-graph cell's run was not recorded."""
    return repr((model, search, sorted((params or {}).items())))


def _build(model: str, params: Mapping[str, Any] | None) -> Graph:
    from eqsat.models import build

    return build(model, **(params or {}))


def prefetch_search(params: Mapping[str, Any], running: Mapping[str, Any]) -> None:
    """:func:`run_search`'s prefetch (see :func:`experiments.sweep.prefetch`): the cell's search's
    ``prepare(graph, limits)`` on the graph the cell will search, while a cell of another search
    runs (the e-graph's worker loads the rules this graph's last run left in its host, see
    :mod:`eqsat.egraph.preload`, instead of loading them inside the cell's timed search). Not while
    a cell of the same search runs: its worker is busy with that one."""
    from eqsat.search import prepare

    search, model = params["search"], params["model"]
    engine = get_search(search)
    if params.get("quick") or running.get("search") == search or getattr(engine, "prepare", None) is None:
        return
    prepare_rules(search, cell_rule_sets(params.get("rules")))
    graph = _PREFETCHED[_graph_key(model, search, params.get("params"))] = _build(model, params.get("params"))
    prepare(engine, graph, cell_limits(**params)[0])


run_search.prefetch = prefetch_search  # type: ignore[attr-defined]
