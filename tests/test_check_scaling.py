"""The final check grows linearly with the model: values are dropped after their last use and each
weight is drawn when it is first read, so a 32-layer BERT's check no longer holds every weight and
activation of both graphs at once (4.2 GB before). It must still catch a wrong graph."""
from __future__ import annotations

import tracemalloc

import pytest

from eqsat.cost.roofline import RooflineCost
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
