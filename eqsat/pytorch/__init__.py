"""eqsat.pytorch: graphs of the IR run in PyTorch (the ``torch`` extra).

``module.py`` turns a :class:`~eqsat.ir.graph.Graph` into a ``torch.nn.Module``
(:func:`~eqsat.pytorch.module.to_module`): every node runs through its op-table row's ``torch``
column (the PyTorch twin of the row's NumPy ``evaluate``), weights are buffers, weight-only
subgraphs are folded once when the module is built, and ``forward`` has no data-dependent Python
control flow and no host syncs, so it can be captured in a CUDA graph and traced by
``torch.compile``. :func:`~eqsat.pytorch.module.example_inputs` draws the inputs the numerical
check draws.

PyTorch in and out: ``importer.py`` reads a ``torch.export``-ed program into the IR through
PyTorch's dynamo ONNX exporter and the ONNX importer (the zoo's coverage, the model's real weights;
:func:`~eqsat.pytorch.importer.from_exported`, :func:`~eqsat.pytorch.importer.from_module`) and
builds a graph back as a drop-in module (:func:`~eqsat.pytorch.importer.to_torch`);
``optimize.py`` optimizes a module through the optimize job
(:func:`~eqsat.pytorch.optimize.optimize_module`); ``backend.py`` is the ``torch.compile`` backend
``eqsat`` (a ``torch_dynamo_backends`` entry point), which falls back to the captured graph with
one warning line on any failure; ``capture.py`` compiles one captured graph (weights bound,
exported, optimized, checked); ``partition.py`` splits a captured graph around the ops PyTorch's
ONNX exporter cannot write, which then run in PyTorch itself.

Measuring: ``timing.py`` times PyTorch callables as a user runs them (warm-up, CUDA events on a
GPU, interleaved rounds, the median); ``gpu_check.py`` is the GPU check's measuring half, which
runs the graphs another machine searched on this one's GPU, checks they agree and times them
eager, replayed from a CUDA graph and through ``torch.compile``.

``module.py``, ``timing.py``, ``gpu_check.py`` and everything they import need only numpy, onnx
and torch (not egglog, highspy, scipy or xgboost): they run on a bare CUDA machine with a stock
PyTorch. The importer needs ``onnxscript`` too, and the optimizer the whole project.
"""
