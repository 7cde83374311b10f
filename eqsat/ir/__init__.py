"""The tensor IR every search and device shares.

The op table says what each op computes, its shape rule and its cost terms: ``opspec`` is the
machinery, ``ops`` the public face, and the rows are in ``ops_tensor`` (leaves, elementwise,
matmul, layout), ``ops_conv`` (convolution, per-channel scale and shift, pooling), ``ops_convt``
(the transposed convolution), ``ops_norm`` (softmax, layer norm, GELU), ``ops_math`` (powers,
hard activations, selects, broadcasts, means: what PyTorch's dynamo exporter emits) and
``ops_index`` (slices and gathers at constant positions); ``opaque_torch`` computes in PyTorch the
opaque ONNX nodes it can (Gather, Resize), as onnxruntime does.

``graph`` holds computation graphs of those ops; ``symbolic`` their shapes (concrete or with
named dimensions); ``evaluate`` runs a graph on numpy arrays over a numeric ``domains`` value
(floats or a finite field, which is how rules and results are checked exactly), with ``folds``
for constant subgraphs and ``valuenum`` numbering values so that a check computes what the
optimized graph and its input agree on once. ``graphfile`` writes a graph as a JSON document any
machine reads with the standard library (the GPU check's graphs travel so), and ``recompute``
undoes fusions that make a graph compute a node twice. A new op is one row in an ``ops_*`` module.
"""
