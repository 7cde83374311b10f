"""What a graph costs on a device.

``costmodel`` is the interface every search prices graphs through (``CostModel``: the cost of
one node and of a whole graph, and what a command may ask of a model); ``devices`` is the
tables of devices (roofline profiles: peak throughput, bandwidth, launch overhead; measured and
tuned rows); ``registry`` reads every device name ``NAME[:suffix]`` and builds its cost model;
``roofline`` is the analytic model over the profiles; ``measured`` holds the devices timed on
this machine (``ort-cpu`` in onnxruntime; ``torch-cpu`` and ``torch-cuda`` in PyTorch eager),
kernels kept in a measurement database. The tuned device (``hypogpu``) is priced by the tuners'
kernels, so its model lives with them (``autotune.tuned_cost``), named by its row. A new device
is one row in ``devices``, or one ``CostModel`` for a device priced another way; a new kind of
device name is one row in ``registry``.
"""
