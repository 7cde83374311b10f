"""The disk cache of parsed and compiled rules: reused by a second process, never trusted when torn."""
from __future__ import annotations

import subprocess
import sys

from eqsat.diskcache import DiskMemo

PROBE = """
from eqsat.rules.rulesets import default_rules
from eqsat.egraph.rewrites import COMPILED, compile_rules
compile_rules(default_rules(["epilogue", "matrix-min"]), multi=True)
COMPILED.save()
print(COMPILED.hits, COMPILED.misses)
"""


def test_a_second_process_compiles_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("EQSAT_LAB_CACHE", str(tmp_path))
    runs = [subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True).stdout.split()
            for _ in range(2)]
    (hits1, misses1), (hits2, misses2) = [tuple(map(int, r)) for r in runs]
    assert misses1 > 100 and hits2 == hits1 + misses1 and misses2 == 0


def test_a_torn_cache_file_is_ignored_and_off_disables(tmp_path, monkeypatch):
    monkeypatch.setenv("EQSAT_LAB_CACHE", str(tmp_path))
    memo = DiskMemo("probe")
    memo.put("k", 1)
    memo.save()
    assert DiskMemo("probe").get("k") == 1
    memo.path.write_bytes(b"\x80\x04 torn")
    assert DiskMemo("probe").get("k") is None
    monkeypatch.setenv("EQSAT_LAB_CACHE", "off")
    off = DiskMemo("probe")
    off.put("k", 2)
    off.save()
    assert off.path is None and DiskMemo("probe").get("k") is None


def test_a_sharded_memo_reads_only_the_files_of_the_keys_asked(tmp_path, monkeypatch):
    from eqsat.egraph.rewrites import ground_shard

    monkeypatch.setenv("EQSAT_LAB_CACHE", str(tmp_path))
    memo = DiskMemo("probe", shard=lambda key: key[0])
    memo.put(("", 1), "main")
    memo.put(("a", 2), "in a")
    memo.put(("b", 3), "in b")
    memo.save()
    assert len(list(tmp_path.glob("probe-*.json"))) == 3
    again = DiskMemo("probe", shard=lambda key: key[0])
    assert again.get(("a", 2)) == "in a" and again.get(("", 1)) == "main"
    assert set(again._shards) == {"a", ""}  # b's file was not read
    plain, ground = "conv-0013: (relu ?x) <=> ?x", "conv-0013@s=1x1,p=same: (relu ?x) <=> ?x"
    assert ground_shard(("compile", plain, False)) == ""
    assert ground_shard(("compile", ground, False)) == ground_shard(("signatures", ground, True)) != ""


def test_a_graphs_compiled_rules_come_back_the_same_from_the_cache(tmp_path, monkeypatch):
    """relevant_compiled memoizes a graph's compiled relevant rules on disk: what comes back is
    what compiling gives (the same declarations, in order), and another shape is another entry."""
    from eqsat.egraph.relevance import relevant_compiled, relevant_rules
    from eqsat.egraph.rewrites import COMPILED, compile_rules
    from eqsat.models import build
    from eqsat.rules.rulesets import default_rules

    monkeypatch.setenv("EQSAT_LAB_CACHE", str(tmp_path))
    monkeypatch.setattr(COMPILED, "_shards", {})
    rules = default_rules(["epilogue", "matrix-min"])
    graph = build("lora")
    first = relevant_compiled(rules, graph)
    COMPILED.save()
    monkeypatch.setattr(COMPILED, "_shards", {})  # as a fresh process: from the file
    again = relevant_compiled(rules, graph)
    direct = compile_rules(relevant_rules(rules, graph), multi=True)
    for c in (first, again):
        assert (c.declarations, c.rules, c.triggers, c.groups, c.names, c.skipped) == \
            (direct.declarations, direct.rules, direct.triggers, direct.groups, direct.names, direct.skipped)
        assert list(c.lang.ctors) == list(direct.lang.ctors)
    assert len(list(tmp_path.glob("compiled-rules-*-graph-*.json"))) == 1
    relevant_compiled(rules, build("lora", rank=8))  # the same rules, but a graph of other shapes
    COMPILED.save()
    assert len(list(tmp_path.glob("compiled-rules-*-graph-*.json"))) == 2


def test_a_rule_files_copies_share_one_parsed_entry(tmp_path, monkeypatch):
    """A rule file's parse is cached by its content: a checkout, a CI clone and the installed
    copy of one file read one entry, and the cache file does not grow with each."""
    from eqsat.rules import rulesets

    monkeypatch.setenv("EQSAT_LAB_CACHE", str(tmp_path / "cache"))
    text = rulesets.RULE_SETS["epilogue"].path.read_bytes()
    sizes = []
    for k in range(3):
        copy = tmp_path / f"copy{k}" / "epilogue.rules"
        copy.parent.mkdir()
        copy.write_bytes(text)
        rulesets._load.cache_clear()
        assert rulesets.load_rule_file(copy) == rulesets.load_rule_file(rulesets.RULE_SETS["epilogue"].path)
        sizes.append(sum(f.stat().st_size for f in (tmp_path / "cache").glob("parsed-rules-*.json")))
    assert sizes[0] == sizes[1] == sizes[2] > 0
