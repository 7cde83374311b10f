"""TASO baseline: the rule generator and the α-backtracking search.

The generator: ``world`` declares the leaves and op instances, ``enumerate`` builds graphs,
``fingerprint`` buckets them, ``prune`` drops redundant pairs, ``verify`` checks candidates
numerically, ``generate`` drives it all; ``novelty`` and ``root_rewrite`` keep only what known
rules cannot prove, ``minimize`` drops derivable rules, ``prove`` proves rules from the operator
axioms with Z3. The search: ``matcher``, ``rewrite``, ``pair_move`` and ``search`` (TASO's
Algorithm 2), and ``fixpoint`` (rewriting to a fixed point, what a runtime fuses by itself).
Imports the IR from ``eqsat``; ``eqsat`` never imports it.
"""
