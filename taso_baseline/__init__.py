"""TASO baseline: the rule generator (enumerate, fingerprint, prune, verify) and the
α-backtracking search. Imports the IR from ``eqsat``; ``eqsat`` never imports it."""
