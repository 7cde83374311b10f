"""The rule toolchain: TASO's rule generator, the verifier, the prover and the minimizer.

``world`` declares the leaves and op instances, ``enumerate`` builds graphs, ``fingerprint``
buckets them, ``prune`` drops redundant pairs, ``verify`` checks candidates numerically,
``generate`` drives it all; ``novelty`` and ``root_rewrite`` keep only what known rules cannot
prove, ``minimize`` drops derivable rules, ``prove`` proves rules from the operator axioms with Z3.
It writes the rule files the searches read (``eqsat/rules/*.rules``). Imports the IR and the
e-graph from ``eqsat``; ``eqsat`` and the searches never import it, except the α search's pair
move, which checks the rules it builds with ``verify``.
"""
