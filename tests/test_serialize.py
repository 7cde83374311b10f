"""egraph-serialize JSON out of the e-graph optimizer and into the extractors."""
from __future__ import annotations

import json

import pytest

from experiments.cli import main


def test_dumped_egraph_extracts_to_the_same_cost(tmp_path, capsys):
    dump, result, greedy, ilp = (tmp_path / n for n in ("qkv.egraph.json", "r.json", "g.json", "i.json"))
    # no whole-e-graph proof in optimize (--ilp-nodes 0): its 2,000 nodes took 19 s of this test, and the
    # cost to match is the cycle filter's optimum, which the extract command's own search must reach
    assert main(["optimize", "qkv", "--search", "eqsat", "--k-multi", "2", "--ilp-nodes", "0",
                 "--dump-egraph", str(dump), "--json", str(result)]) == 0
    data = json.loads(dump.read_text())
    assert {"nodes", "root_eclasses"} <= set(data) and len(data["nodes"]) > 20
    node = next(iter(data["nodes"].values()))
    assert {"op", "children", "eclass", "cost"} <= set(node)
    opt = json.loads(result.read_text())
    assert main(["extract", str(dump), "--extractor", "greedy", "--json", str(greedy)]) == 0
    assert main(["extract", str(dump), "--seconds", "5", "--json", str(ilp)]) == 0
    assert json.loads(greedy.read_text())["cost"] == pytest.approx(opt["greedy_us"], rel=1e-9)
    exact = json.loads(ilp.read_text())
    # the same cost; the bound is on the whole e-graph, whose concat/split cycles keep it loose (no proof here)
    assert exact["cost"] == pytest.approx(opt["best_us"], rel=1e-6) and exact["bound"] <= exact["cost"]
    assert exact["gap"] == pytest.approx((exact["cost"] - exact["bound"]) / exact["cost"])
    assert opt["best_us"] == pytest.approx(34.2, rel=0.005)


@pytest.mark.parametrize("text,message", [
    ("{", "not valid JSON"),
    ('{"nodes": []}', "no 'nodes' object"),
    ('{"nodes": {"a": {"op": "x", "children": [], "eclass": "c", "cost": 1}}, "root_eclasses": []}',
     "'root_eclasses' must be a non-empty list"),
    ('{"nodes": {"a": {"op": "x", "children": ["b"], "eclass": "c", "cost": 1}}, "root_eclasses": ["c"]}',
     "node 'a': child 'b' is not a node"),
    ('{"nodes": {"a": {"op": "x", "children": [], "eclass": "c", "cost": -1}}, "root_eclasses": ["c"]}',
     "node 'a': cost must be a finite number >= 0"),
    ('{"nodes": {"a": {"op": "x", "children": [], "eclass": "c", "cost": 1}}, "root_eclasses": ["d"]}',
     "root e-class 'd' has no node"),
])
def test_a_malformed_file_is_a_clear_error(tmp_path, capsys, text, message):
    bad = tmp_path / "bad.json"
    bad.write_text(text)
    assert main(["extract", str(bad)]) == 2
    err = capsys.readouterr().err
    assert message in err and "bad.json" in err
