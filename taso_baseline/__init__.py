"""TASO baseline: the α-backtracking search over the graph rewrites the rules make.

``matcher`` matches rules at a node, ``rewrite`` applies a match and reprices only what changed,
``pair_move`` builds the two-output substitutions, ``search`` is TASO's Algorithm 2, and
``fixpoint`` rewrites to a fixed point (what a runtime fuses by itself). The rules it reads are
made by :mod:`rulegen`. Imports the IR from ``eqsat``; ``eqsat`` imports only ``fixpoint``
(for the runtime baseline) and reaches the search through its registry.
"""
