"""Weight-only products are evaluated factored (eqsat.ir.folds) and give the graph's values."""
from __future__ import annotations

import numpy as np
import pytest

from eqsat.ir.domains import CHECK_PRIME, FAST_PRIME, FLOAT, modp
from eqsat.ir.evaluate import evaluate, evaluate_nodes, random_leaves
from eqsat.ir.folds import Product
from eqsat.ir.graph import Graph, input_, node, weight

X = input_("x", (4, 16))
A, B, C = weight("a", (16, 32)), weight("b", (32, 16)), weight("c", (32, 8))
D = weight("d", (8, 32))


def folded_graphs() -> dict[str, Graph]:
    ab, ac = node("matmul", A, B), node("matmul", A, C)
    return {
        "consumer associates": Graph((node("matmul", X, ab),)),
        "shared left factor concatenated": Graph((node("matmul", X, node("concat", ab, ac, axis=1)),)),
        "transposed fold": Graph((node("matmul", node("transpose", ab, perm=(1, 0)), node("transpose", X, perm=(1, 0))),)),
        "fold read by an elementwise op": Graph((node("ewadd", node("matmul", X, ab), X),
                                                 node("ewadd", ab, ab))),
        "shared right factor concatenated, read from the left": Graph((node(
            "matmul", node("concat", ab, node("matmul", D, B), axis=0), node("transpose", X, perm=(1, 0))),)),
        "fold as an output": Graph((ab,)),
        "fold of a fold": Graph((node("matmul", X, node("matmul", ab, ab)),)),
    }


def eager(graph: Graph, values, domain) -> tuple[np.ndarray, ...]:
    vals = evaluate_nodes(graph, values, domain)  # every product computed where it stands
    return tuple(vals[o] for o in graph.outputs)


@pytest.mark.parametrize("name", list(folded_graphs()))
@pytest.mark.parametrize("domain", [FLOAT, modp(FAST_PRIME), modp(CHECK_PRIME)],
                         ids=["float64", "mod p (limbs)", "mod the check's p"])
def test_factored_evaluation_gives_the_graphs_values(name, domain):
    graph = folded_graphs()[name]
    values = random_leaves(graph, 0, domain)
    got, want = evaluate(graph, values, domain), eager(graph, values, domain)
    for g, w in zip(got, want):
        assert not isinstance(g, Product)
        if domain.exact:
            assert np.array_equal(g, w)
        else:
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)


def test_a_fold_is_not_materialized_when_its_consumer_can_associate():
    ab = node("matmul", A, B)
    graph = Graph((node("matmul", X, node("concat", ab, node("matmul", A, C), axis=1)),))
    vals = evaluate_nodes(graph, random_leaves(graph, 0), FLOAT, fold_lazily=True)
    assert isinstance(vals[ab], Product)  # never computed: X @ A is, then the concatenated right factors
    assert isinstance(vals[graph.outputs[0].inputs[1]], Product)
    assert vals[graph.outputs[0]].shape == (4, 24)


def test_products_reading_an_input_are_computed_as_they_stand():
    xa = node("matmul", X, A)
    graph = Graph((node("matmul", xa, B),))
    vals = evaluate_nodes(graph, random_leaves(graph, 0), FLOAT, fold_lazily=True)
    assert not any(isinstance(v, Product) for v in vals.values())


def test_the_same_graph_is_equal_without_evaluation():
    from eqsat.ir.evaluate import compare_graphs

    graph = folded_graphs()["consumer associates"]
    same = Graph(tuple(graph.outputs))  # a new Graph object over the same structural nodes
    assert compare_graphs(graph, same).method == "identical"
    other = folded_graphs()["fold read by an elementwise op"]
    assert compare_graphs(graph, Graph(other.outputs[:1])).method != "identical"
