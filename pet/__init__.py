"""PET: partially-equivalent transformations on the ``eqsat`` IR.

``programs`` builds a conv and its shape-preserving rewrites (splits into the batch, dilation to
batch) as op-table graphs, and ``matmul`` the matmul ones; ``verify`` derives each program's boxes,
checks each region with exact finite-field tests and builds the correction kernels where they
differ; ``optimizer`` beam-searches which layers of a network to transform, priced by any
``CostModel``.

On any model: ``splice`` finds the conv layers PET can describe and puts a transformed layer back
with its correction kernels; ``search`` is PET as a search of the ``eqsat.search`` interface (the
beam search's choices spliced in, the result priced as written); ``rewrite`` offers PET's verified
transformations as a graph-level rewrite both searches apply (the e-graph with PET inside it).
"""
