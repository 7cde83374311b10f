"""Candidate pairs that known rules cannot already prove (Ruler's step, for k = 4).

TASO pairs every two graphs of a fingerprint bucket: at four ops that is 12 million pairs in
the matrix world, nearly all of them consequences of the rules found at three ops. Here the
terms of every bucket that holds a graph of the new size go into one e-graph with the known
rules, which run for a few iterations; terms the rules make equal share an e-class, and only
one representative per e-class (its smallest, first-enumerated term) is paired. A bucket whose
terms all end in one e-class yields nothing; one with m e-classes yields the pairs of its m
representatives. The e-graph can only join terms whose equality follows from the rules, so
no equality is lost that the rules do not already give (up to the iteration bound, as in
:mod:`.minimize`).
"""
from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from eqsat.egraph.extract import read_egraph
from eqsat.egraph.limits import Limits
from eqsat.egraph.rewrites import compile_rules
from eqsat.egraph.runner import EGraphRunner
from eqsat.ir.graph import Graph, Node
from eqsat.rules.rulefile import Rule
from rulegen.enumerate import Enumeration
from rulegen.root_rewrite import RootRewriter, join_names


@dataclass(frozen=True)
class NoveltySettings:
    """How hard the known rules try: saturation ``iterations`` and an e-node cap."""

    iterations: int = 2
    nodes: int = 20_000_000
    seconds: float = 600.0
    step: str = "root"  # the second step: "root" (rules at the new graphs' roots, in Python) or "egraph"
    rounds: int = 1  # root rewriting rounds ("root" step)
    workers: int = 1  # processes matching rules at the roots ("root" step; same result for any value)


@dataclass(frozen=True)
class Novelty:
    """Buckets reduced to one representative per e-class, and what it took."""

    groups: dict[int, list[Node]]  # fingerprint -> representatives (only buckets with two or more)
    buckets_in: int  # buckets holding a term of the new size and another term
    terms_in: int  # terms sent to the e-graph: every smaller one, one per name of the largest
    names: int  # distinct (op, argument e-classes) among the largest terms
    enodes: int  # the e-graph's size after the rules ran
    pairs_before: int  # pairs of op terms TASO's way (every two terms of a bucket)
    pairs_after: int
    seconds: dict[str, float]
    applied: int = 0  # rule instances applied at the roots ("root" step)


@dataclass
class Naming:
    """The first step: the smaller terms' e-classes in ``runner``'s e-graph, and the name of each
    graph of the new size in the chosen buckets."""

    runner: EGraphRunner
    chosen: dict[int, list[Node]]  # buckets holding a graph of the new size and another term
    ids: dict[Node, int]  # smaller term -> its (term K) index
    classes: dict[Node, object]  # smaller term -> its e-class
    named: dict[tuple, Node]  # (op, attrs, argument e-classes) -> the first graph of that name
    name_of: dict[Node, tuple]
    seconds: dict[str, float]


def name_largest(en: Enumeration, groups: dict[int, list[Node]], known: Sequence[Rule], size: int,
                 settings: NoveltySettings = NoveltySettings()) -> Naming:
    """Every term smaller than ``size`` ops into one e-graph with ``known``, the rules run, and
    the graphs of ``size`` ops in the buckets that hold one named by op and argument e-classes."""
    clock: dict[str, float] = {}
    t0 = time.perf_counter()
    chosen = {fp: terms for fp, terms in groups.items()
              if len(terms) > 1 and any(not t.is_leaf and en.size(t) == size for t in terms)}
    runner = EGraphRunner(compile_rules(list(known), multi=False, rewrite_constants=True))
    smaller = tuple(t for level in en.by_size[1:size] for t in level)
    ids = runner.insert_terms(Graph(smaller)) if smaller else {}
    clock["insert smaller"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    runner.run(_limits(settings))
    classes = runner.term_classes()
    clock["saturate smaller"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    cls = {t: classes[k] for t, k in ids.items()}
    named: dict[tuple, Node] = {}
    name_of: dict[Node, tuple] = {}
    for terms in chosen.values():
        for t in terms:
            if not t.is_leaf and en.size(t) == size:
                key = (t.op, t.attrs, tuple(cls[x] for x in t.inputs))
                name_of[t] = key
                named.setdefault(key, t)
    clock["name"] = time.perf_counter() - t0
    return Naming(runner, chosen, ids, cls, named, name_of, clock)


def root_classes(naming: Naming, known: Sequence[Rule], settings: NoveltySettings = NoveltySettings()
                 ) -> tuple[dict[Node, object], int, int, dict[str, float]]:
    """The second step by :mod:`.root_rewrite`: the e-graph of the smaller terms is frozen and the
    known rules are matched at the roots of the new graphs' names. Returns each term of the chosen
    buckets -> its class (equal for terms the rules proved equal), the rule instances applied, the
    frozen e-graph's e-nodes, and the seconds per stage."""
    clock: dict[str, float] = {}
    t0 = time.perf_counter()
    ids: dict[object, int] = {}
    view = read_egraph(naming.runner.egraph, naming.runner.lang, ids)
    cls = {t: ids[c] for t, c in naming.classes.items()}
    frozen = {k: (k[0], k[1], tuple(ids[c] for c in k[2])) for k in naming.named}  # enumeration order
    name_of = {t: frozen[k] for t, k in naming.name_of.items()}
    rewriter = RootRewriter(view, known)
    clock["freeze"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    uf, applied = join_names(rewriter, list(frozen.values()), settings.rounds, settings.workers)
    clock["rewrite roots"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    classes = {t: uf[rewriter.item(name_of[t]) if t in name_of else ("c", cls[t])]
               for terms in naming.chosen.values() for t in terms}
    clock["classes"] = time.perf_counter() - t0
    return classes, applied, len(view.nodes), clock


def _root_step(naming: Naming, known: Sequence[Rule], settings: NoveltySettings) -> Novelty:
    classes, applied, enodes, clock = root_classes(naming, known, settings)
    out, before, after = _representatives(naming.chosen, classes.__getitem__)
    return Novelty(out, len(naming.chosen), len(naming.ids) + len(naming.named), len(naming.named),
                   enodes, before, after, {k: round(v, 3) for k, v in {**naming.seconds, **clock}.items()},
                   applied)


def _representatives(chosen: dict[int, list[Node]], key) -> tuple[dict[int, list[Node]], int, int]:
    """Each bucket cut to its first term per ``key`` (enumeration order: the smallest term of a
    class comes first), with the pairs of op terms before and after."""
    out: dict[int, list[Node]] = {}
    before = after = 0
    for fp, terms in chosen.items():
        members: dict[object, Node] = {}
        for t in terms:
            members.setdefault(key(t), t)
        n = sum(not t.is_leaf for t in terms)
        before += n * (n - 1) // 2
        if len(members) > 1:
            out[fp] = list(members.values())
            m = sum(not t.is_leaf for t in out[fp])
            after += m * (m - 1) // 2
    return out, before, after


def _limits(settings: NoveltySettings) -> Limits:
    return Limits(iterations=settings.iterations, nodes=settings.nodes, seconds=settings.seconds, k_multi=0)


def novel_groups(en: Enumeration, groups: dict[int, list[Node]], known: Sequence[Rule], size: int,
                 settings: NoveltySettings = NoveltySettings()) -> Novelty:
    """The buckets of ``groups`` that hold a term of ``size`` ops, each cut down to one term per
    e-class after ``known`` ran on their terms.

    In two steps, so that the e-graph holds far fewer terms than the buckets do: every smaller
    term goes in and the rules run; a term of ``size`` ops is then named by its op and its
    arguments' e-classes (terms with one name are equal by congruence), one term per name goes in,
    and the rules run again, which joins names equal by a rewrite at the root."""
    naming = name_largest(en, groups, known, size, settings)
    if settings.step == "root":
        return _root_step(naming, known, settings)
    if settings.step != "egraph":
        raise ValueError(f"unknown novelty step {settings.step!r} (known: root, egraph)")
    runner, chosen, ids, cls, named, name_of = (naming.runner, naming.chosen, naming.ids, naming.classes,
                                                naming.named, naming.name_of)
    clock = dict(naming.seconds)
    t0 = time.perf_counter()
    reps = tuple(named.values())
    # the representatives' arguments are in the e-graph already: insert them under fresh indices
    new = runner.insert_terms(Graph(reps), offset=len(ids)) if reps else {}
    clock["insert largest"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    report = runner.run(_limits(settings))
    classes = runner.term_classes()
    clock["saturate largest"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    for t, k in new.items():
        cls.setdefault(t, classes[k])
    cls.update({t: classes[k] for t, k in ids.items()})
    out, pairs_before, pairs_after = _representatives(
        chosen, lambda t: cls[named[name_of[t]]] if t in name_of else cls[t])
    clock["classes"] = time.perf_counter() - t0
    return Novelty(out, len(chosen), len(ids) + len(reps), len(named), report.enodes, pairs_before,
                   pairs_after, {k: round(v, 3) for k, v in clock.items()})
