"""Pattern rewriting on graphs, no search: the machinery the searches and the runtime baseline share.

``matcher`` compiles rule directions and indexes them so a node is tried only against rewrites
that can match it; ``rewrite`` applies a match to a search state and reprices only what changed;
``fixpoint`` applies rules forward until none matches (what a runtime fuses by itself, read by
:mod:`eqsat.onnx.runtime_baseline`). The room exists because this machinery is generic: the α
search (:mod:`taso_baseline`) and ``eqsat`` itself both use it, so it lives in the bottom layer
beside the rules it reads, and ``eqsat`` need not reach up into the search built on it.
"""
