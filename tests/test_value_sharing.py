"""The check numbers values (eqsat.ir.valuenum): past a rewrite, an op of the optimized graph whose
inputs equal the input graph's returns the input graph's result. Every reuse must give exactly the
plain evaluation's values, and a wrong rewrite must still be caught."""
from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from eqsat.ir import evaluate as evaluate_module
from eqsat.ir.domains import CHECK_PRIME, FLOAT, Domain, modp
from eqsat.ir.evaluate import compare_graphs, evaluate, evaluate_nodes, random_leaves
from eqsat.ir.graph import Graph, Node, input_, node, split, weight
from eqsat.ir.valuenum import ValueTable

SEQ, HIDDEN, HEADS = 8, 64, 4  # weights 8x an activation, as in BERT (16x)


def _attention(x: Node, q: Node, k: Node, v: Node) -> Node:
    d = HIDDEN // HEADS
    heads = lambda t, perm: node("transpose", node("reshape", t, shape=(SEQ, HEADS, d)), perm=perm)  # noqa: E731
    out = node("matmul", node("matmul", heads(q, (1, 0, 2)), heads(k, (1, 2, 0))), heads(v, (1, 0, 2)))
    return node("reshape", node("transpose", out, perm=(1, 0, 2)), shape=(SEQ, HIDDEN))


def _stack(layers: int, merged: bool, wrong_layer: int = -1) -> Graph:
    """BERT's attention stack; ``merged``: each layer's Q/K/V as one product by the concatenated
    weights, split again, and each output projection folded into the next layer's weights (what
    the e-graph writes for BERT); ``wrong_layer``: that layer's q and k swapped (unsound)."""
    x = input_("x", (SEQ, HIDDEN))
    carry = None  # the previous layer's output projection, when folded
    for i in range(layers):
        w = {n: weight(f"w{n}{i}", (HIDDEN, HIDDEN)) for n in "qkvo"}
        if not merged:
            q, k, v = (node("matmul", x, w[n]) for n in "qkv")
        else:
            parts = [w[n] if carry is None else node("matmul", carry, w[n]) for n in "qkv"]
            q, k, v = split(node("matmul", x, node("concat", *parts, axis=1)), 1, (HIDDEN,) * 3)
        if i == wrong_layer:
            q, k = k, q
        out = _attention(x, q, k, v)
        if merged and i < layers - 1:
            x, carry = out, w["o"]
        else:
            x, carry = node("matmul", out, w["o"]), None
    return Graph((x,))


def _plain(graph: Graph, values, domain: Domain) -> tuple[np.ndarray, ...]:
    vals = evaluate_nodes(graph, values, domain)  # every node computed where it stands, no table
    return tuple(vals[o] for o in graph.outputs)


@pytest.mark.parametrize("domain", [FLOAT, modp(CHECK_PRIME)], ids=["float64", "mod p"])
def test_values_with_a_table_are_the_plain_values(domain):
    """The input and the optimized stack evaluated together with a table (shared results) give
    each graph's plain values: bitwise mod p, to rounding in float64 (a product by concatenated
    weights is computed part by part)."""
    plain, merged = _stack(3, merged=False), _stack(3, merged=True)
    both = Graph(plain.outputs + merged.outputs)
    values = random_leaves(both, 0, domain)
    table = ValueTable()
    got = evaluate(both, values, domain, table)
    want = _plain(plain, values, domain) + _plain(merged, values, domain)
    assert table.hits > 0  # something was shared, or this test checks nothing
    for g, w in zip(got, want):
        if domain.exact:
            assert np.array_equal(g, w)
        else:
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)


def _products(monkeypatch) -> Counter:
    work: Counter = Counter()
    contract = Domain.contract
    monkeypatch.setattr(Domain, "contract", lambda self, fn, *a, **k: contract(
        self, lambda x, y: work.update(["products"]) or fn(x, y), *a, **k))
    return work


def test_the_check_of_a_merged_stack_makes_only_the_inputs_products(monkeypatch):
    """Merged Q/K/V and folded output projections: every product of the optimized graph is one
    the input graph made (6 a layer: 4 linear, 2 batched), none is made twice."""
    work = _products(monkeypatch)
    assert compare_graphs(_stack(8, merged=False), _stack(8, merged=True), trials=1).equal
    assert work["products"] == 6 * 8


@pytest.mark.parametrize(("layers", "wrong_layer", "exact"),
                         [(8, 0, True), (8, 4, True), (8, 7, True), (2, 0, False), (2, 1, False)],
                         ids=["mod p, first of 8", "mod p, middle", "mod p, last", "float64, first of 2",
                              "float64, last"])
def test_a_wrong_rewrite_in_a_shared_stack_is_still_caught(layers, wrong_layer, exact):
    """q and k swapped in one layer of an otherwise sound merged stack whose every other value the
    check takes from the input graph: the first wrong value gets a number of its own and all
    below it is computed afresh. (In float64 this stack's values vanish past 2 layers, which is
    why the check of such graphs is exact mod p.)"""
    plain, wrong = _stack(layers, merged=False), _stack(layers, merged=True, wrong_layer=wrong_layer)
    check = compare_graphs(plain, wrong, trials=1, exact=exact)
    assert not check.equal, check
    assert check.method == (f"mod {CHECK_PRIME}" if exact else "float64")
    assert compare_graphs(plain, _stack(layers, merged=True), trials=1, exact=exact).equal


def test_the_tables_results_never_outgrow_what_the_evaluation_held(monkeypatch):
    """The table keeps at most the most bytes the evaluation itself held, so the check's memory
    still follows the graph's width."""
    seen: list[tuple[int, int]] = []
    shrink = ValueTable.shrink
    monkeypatch.setattr(ValueTable, "shrink", lambda self: shrink(self) or seen.append((self._bytes, self.budget)))
    compare_graphs(_stack(8, merged=False), _stack(8, merged=True), trials=1)
    assert seen and all(kept <= budget for kept, budget in seen)


def test_numbers_follow_bits_not_objects():
    table = ValueTable()
    a = np.arange(12.0).reshape(3, 4)
    assert table.number(a) == table.number(a.copy()) == table.number(np.ascontiguousarray(a.T).T)
    assert table.number(a) != table.number(a + 1)
    assert table.number(a) != table.number(a.astype(np.int64))  # same values, another dtype
    zeros = np.zeros(4)
    assert table.number(zeros) != table.number(-zeros)  # 1/x tells the zeros apart
    nan = np.full(4, np.nan)
    assert table.number(nan) != table.number(nan.copy())  # a NaN never matches


def test_a_table_goes_with_its_last_reference_not_at_the_next_cycle_collection():
    """Its kept results are freed when the check drops the table: a numbered array's callback
    held the table strongly, a cycle that kept a BERT check's results until the collector ran."""
    import gc
    import weakref

    table = ValueTable(budget_bytes=1 << 20)
    a = np.ones((2, 2))
    table.put(table.key("neg", (), [a]), -a)
    gone = weakref.ref(table)
    enabled = gc.isenabled()
    gc.disable()
    try:
        del table
        assert gone() is None
    finally:
        if enabled:
            gc.enable()
    del a  # its callback finds no table: nothing to forget, no error


def test_a_kept_result_answers_only_the_same_op_on_the_same_numbers():
    table = ValueTable(budget_bytes=1 << 20)
    a, b = np.ones((2, 2)), np.full((2, 2), 2.0)
    key = table.key("matmul", (("act", "none"),), [a, b])
    table.put(key, a @ b)
    assert table.get(table.key("matmul", (("act", "none"),), [a.copy(), b.copy()])) is not None
    assert table.get(table.key("matmul", (("act", "none"),), [b, a])) is None
    assert table.get(table.key("matmul", (("act", "relu"),), [a, b])) is None
    table.budget = 0
    table.shrink()
    assert table.get(key) is None


def test_the_eager_path_is_unchanged(monkeypatch):
    """Without a table nothing is numbered: the rule verifier and the writer evaluate as before."""
    monkeypatch.setattr(ValueTable, "number", lambda *a: pytest.fail("numbered without a table"))
    graph = _stack(2, merged=True)
    evaluate_nodes(graph, random_leaves(graph, 0))
    assert evaluate_module.evaluate(graph, random_leaves(graph, 0))[0].shape == (SEQ, HIDDEN)


def test_folds_contractions_share_the_key_of_a_plain_matmul_node():
    """A product inside folds (x @ Wq of a merged Q/K/V) is found under the input graph's matmul
    node's key only if the attributes agree."""
    from eqsat.ir.evaluate import PLAIN_MATMUL

    assert node("matmul", input_("a", (2, 3)), weight("b", (3, 4))).attrs == PLAIN_MATMUL
