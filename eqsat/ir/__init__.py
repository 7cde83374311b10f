"""The tensor IR every search and device shares.

The op table (``opspec`` is the machinery, ``ops_tensor``/``ops_conv``/``ops_norm`` the rows,
``ops`` the public face) says what each op computes, its shape rule and its cost terms;
``graph`` holds computation graphs of those ops; ``symbolic`` their shapes (concrete or with
named dimensions); ``evaluate`` runs a graph on numpy arrays over a numeric ``domains`` value
(floats or a finite field, which is how rules and results are checked exactly), with ``folds``
for constant subgraphs and ``valuenum`` numbering values so that a check computes what the
optimized graph and its input agree on once. A new op is one row in an ``ops_*`` module.
"""
