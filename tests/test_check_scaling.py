"""The final check grows linearly with the model: values are dropped after their last use and each
weight is drawn when it is first read, so a 32-layer BERT's check no longer holds every weight and
activation of both graphs at once (4.2 GB before). It must still catch a wrong graph."""
from __future__ import annotations

import tracemalloc
from collections import Counter

import numpy as np
import pytest

from eqsat.cost.roofline import RooflineCost
from eqsat.ir import evaluate as evaluate_module
from eqsat.ir.domains import CHECK_PRIME, FAST_PRIME, Domain, limb_bits, modp
from eqsat.ir.evaluate import compare_graphs
from eqsat.ir.graph import Graph, Node, node, rebuild
from eqsat.models import build
from eqsat.search import SearchError, SearchResult, run_verified


def _bert(layers: int) -> Graph:
    return build("bert", seq=16, hidden=128, heads=4, layers=layers)


def _rewrite_last(graph: Graph, op: str, change) -> Graph:
    """``graph`` with the last ``op`` node (in topological order) replaced by ``change(node)``."""
    order = graph.nodes()
    target = [n for n in order if n.op == op][-1]
    mapping: dict[Node, Node] = {target: change(target)}
    for n in order:
        if n is not target and n.inputs:
            mapping[n] = rebuild(n, tuple(mapping.get(x, x) for x in n.inputs))
    return Graph(tuple(mapping.get(o, o) for o in graph.outputs), graph.dtype, graph.name)


def _equal_but_different(graph: Graph) -> Graph:
    return Graph(tuple(node("transpose", node("transpose", o)) for o in graph.outputs), graph.dtype, graph.name)


def _peak_bytes(layers: int) -> int:
    g = _bert(layers)
    tracemalloc.start()
    assert compare_graphs(g, _equal_but_different(g), trials=1).equal
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def test_the_checks_memory_does_not_grow_with_depth():
    """16 layers hold 4x the weights of 4 (0.5 MB a layer here); the check's peak stays flat."""
    shallow, deep = _peak_bytes(4), _peak_bytes(16)
    assert deep < 1.3 * shallow, (shallow, deep)


@pytest.mark.parametrize("layers", [2, 8])
def test_the_check_still_catches_one_wrong_weight_in_the_last_layer(layers):
    g = _bert(layers)
    wrong = _rewrite_last(g, "matmul", lambda n: node("matmul", n.inputs[0], node("transpose", n.inputs[1])))
    assert wrong.outputs != g.outputs
    assert not compare_graphs(g, wrong, trials=1).equal

    class Wrong:  # a search whose "best" graph uses an unsound rewrite
        name = "wrong"

        def run(self, graph, rules, cost_model, limits):
            return SearchResult("wrong", graph.name, "h100", 1.0, 0.5, wrong, 0.0, "done", None)

    with pytest.raises(SearchError, match="differs from the input"):
        run_verified(Wrong(), g, [], RooflineCost("h100"), None)


@pytest.mark.parametrize(("p", "terms"), [(CHECK_PRIME, 1024), (CHECK_PRIME, 8192), (FAST_PRIME, None),
                                          (FAST_PRIME, 4096)])
def test_a_contraction_is_exact_mod_p_in_as_few_blas_products_as_stay_exact(p, terms):
    """One float64 product per limb; mod the check's prime a matmul of up to 2^13 terms is one."""
    rng = np.random.default_rng(1)
    k = terms or 300
    a, b = rng.integers(0, p, (3, k)), rng.integers(0, p, (k, 5))
    a[0], b[:, 0] = p - 1, p - 1  # the largest residues: the worst case of a float64 sum
    calls = []

    def counted(x, y):
        calls.append(1)
        return np.matmul(x, y)

    got = modp(p).contract(counted, a, b, terms=terms)
    exact = (a.astype(object) @ b.astype(object)) % p
    assert np.array_equal(got, exact.astype(np.int64))
    assert len(calls) == -(-p.bit_length() // limb_bits(p, terms))
    if p == CHECK_PRIME:
        assert len(calls) == 1


def _check_work(layers: int, monkeypatch) -> Counter:
    """What the check of ``layers``-deep BERT against a rewritten copy does: values drawn, ops
    evaluated, BLAS products."""
    g = _bert(layers)
    wrong_free = _equal_but_different(g)
    work: Counter = Counter()
    draw, contract, value_of = Domain.random, Domain.contract, evaluate_module._value_of
    monkeypatch.setattr(Domain, "random", lambda self, *a, **k: work.update(["draws"]) or draw(self, *a, **k))
    monkeypatch.setattr(Domain, "contract", lambda self, fn, *a, **k: contract(
        self, lambda x, y: work.update(["products"]) or fn(x, y), *a, **k))
    monkeypatch.setattr(evaluate_module, "_value_of", lambda n, *a: work.update(["nodes"]) or value_of(n, *a))
    assert compare_graphs(g, wrong_free, trials=1).equal
    assert work["draws"] == len(g.leaves())  # each weight drawn once (reading a lazy leaf drew it twice)
    assert work["nodes"] == len(Graph(tuple(g.outputs) + tuple(wrong_free.outputs)).nodes())
    return work


def test_the_checks_work_is_linear_in_depth(monkeypatch):
    """Counted, not timed: 4x the layers is at most 4x the draws, evaluated ops and BLAS products
    (plus the two transposes at the end)."""
    shallow, deep = _check_work(2, monkeypatch), _check_work(8, monkeypatch)
    for kind in ("draws", "nodes", "products"):
        assert deep[kind] <= 4 * shallow[kind], (kind, shallow, deep)
    assert deep["products"] == 6 * 8  # 4 linear layers and 2 batched products a layer, once each


def test_the_check_catches_swapped_projections_in_a_middle_layer():
    """A planted unsound rewrite (q and k weights swapped in one layer of eight) in the check's GF(p)."""
    g = _bert(8)
    layer = [n for n in g.nodes() if n.op == "weight" and n.attr("name").startswith(("wq", "wk"))]
    wq, wk = layer[8], layer[9]
    swapped = {wq: wk, wk: wq}
    order, mapping = g.nodes(), dict(swapped)
    for n in order:
        if n.inputs:
            mapping[n] = rebuild(n, tuple(mapping.get(x, x) for x in n.inputs))
    wrong = Graph(tuple(mapping.get(o, o) for o in g.outputs), g.dtype, g.name)
    check = compare_graphs(g, wrong, trials=1)
    assert check.method == f"mod {CHECK_PRIME}" and not check.equal
