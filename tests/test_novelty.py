"""Ruler's step for larger graphs: bucket terms that known rules already prove equal share an
e-class, and only one term per e-class is paired."""
from __future__ import annotations

from test_minimize import SMALL

from eqsat.rulesets import default_rules
from taso_baseline.enumerate import enumerate_graphs
from taso_baseline.fingerprint import buckets
from taso_baseline.generate import generate
from taso_baseline.minimize import minimize
from taso_baseline.novelty import novel_groups
from taso_baseline.world import MATRIX


def test_without_rules_every_pair_of_a_bucket_stays():
    """No rule proves anything: the e-graph joins nothing, so no pair is lost."""
    en = enumerate_graphs(MATRIX, 2)
    found = novel_groups(en, buckets(en), [], 2)
    assert found.pairs_after == found.pairs_before > 500
    largest = [t for terms in found.groups.values() for t in terms if not t.is_leaf and en.size(t) == 2]
    assert found.names == len(largest)  # each its own name: no argument e-classes were joined


def test_commutativity_joins_the_terms_it_proves_equal_and_nothing_else():
    """With ``A + B = B + A`` known, the bucket of A + B and B + A pairs nothing, while a bucket
    whose terms need another law (associativity) still pairs its terms."""
    en = enumerate_graphs(MATRIX, 2)
    groups = buckets(en)
    found = novel_groups(en, groups, SMALL[:1], 2)
    assert found.pairs_after < found.pairs_before
    texts = {fp: {repr(t) for t in terms} for fp, terms in found.groups.items()}
    assert not any("ewadd(A, B)" in s and "ewadd(B, A)" in s for s in texts.values())
    assoc = [fp for fp, terms in groups.items() if any(t.op == "ewadd" and t.inputs[0].op == "ewadd"
                                                       and en.size(t) == 2 for t in terms)]
    assert any(fp in found.groups for fp in assoc)


def test_the_shipped_minimized_set_leaves_nothing_new_at_its_own_size():
    """matrix-min was minimized from the k <= 3 set: at k = 2 it already proves every bucket
    equality the generator would find, so an incremental run at k = 2 ships no rule, where the
    full generator finds dozens."""
    full, _ = generate(MATRIX, 2)
    rules, stats = generate(MATRIX, 2, known=default_rules(["matrix-min"]))
    assert len(full) > 20 and rules == []
    assert stats.novelty["pairs_after"] < stats.novelty["pairs_before"] / 50


def test_known_rules_count_as_kept_when_minimizing():
    """A candidate the known rules derive is dropped, and the report holds only candidates."""
    report = minimize(SMALL[2:3], known=SMALL[:2])
    assert report.kept == () and report.derived == ("variant",)
