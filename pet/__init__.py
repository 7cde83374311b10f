"""PET: partially-equivalent transformations on the ``eqsat`` IR.

``programs`` builds a conv and its shape-preserving rewrites (splits into the batch, dilation to
batch) as op-table graphs, and ``matmul`` the matmul ones; ``verify`` derives each program's boxes,
checks each region with exact finite-field tests and builds the correction kernels where they
differ; ``optimizer`` beam-searches which layers of a network to transform, priced by any
``CostModel``.
"""
