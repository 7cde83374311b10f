"""eqsat.pytorch: graphs of the IR run in PyTorch (the ``torch`` extra).

``module.py`` turns a :class:`~eqsat.ir.graph.Graph` into a ``torch.nn.Module``
(:func:`~eqsat.pytorch.module.to_module`): every node runs through its op-table row's ``torch``
column (the PyTorch twin of the row's NumPy ``evaluate``), weights are buffers, weight-only
subgraphs are folded once when the module is built, and ``forward`` has no data-dependent Python
control flow and no host syncs, so it can be captured in a CUDA graph and traced by
``torch.compile``. :func:`~eqsat.pytorch.module.example_inputs` draws the inputs the numerical
check draws.

This package and everything it imports need only numpy, onnx and torch (not egglog, highspy,
scipy or xgboost): it runs on a bare CUDA machine with a stock PyTorch.
"""
