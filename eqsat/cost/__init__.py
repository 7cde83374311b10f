"""What a graph costs on a device.

``costmodel`` is the interface every search prices graphs through (``CostModel``: the cost of
one node and of a whole graph, and what a command may ask of a model); ``devices`` is the
table of devices (peak throughput, bandwidth, launch overhead); ``roofline`` is the analytic
model over that table; ``measured`` holds the devices timed on this machine (``ort-cpu`` in
onnxruntime; ``torch-cpu`` and ``torch-cuda`` in PyTorch eager), kernels kept in a measurement
database. A new device is one row in ``devices``, or one ``CostModel`` for a device priced
another way.
"""
