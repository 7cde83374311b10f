"""Cost models measured on this machine: kernels as values (:mod:`.kernels`), timing in
onnxruntime (:mod:`.timer`), the measurement database (:mod:`.database`) and the ``ort-cpu``
cost model (:mod:`.ortcpu`)."""
from .database import Context, MeasurementDB, machine_fingerprint
from .kernels import Kernel, Step, node_kernel, op_kernel
from .ortcpu import OrtCpuCost
from .timer import Timing, time_graph

__all__ = ["Context", "Kernel", "MeasurementDB", "OrtCpuCost", "Step", "Timing", "machine_fingerprint",
           "node_kernel", "op_kernel", "time_graph"]
