"""Cost models measured on this machine: kernels as values (:mod:`.kernels`), timing in
onnxruntime (:mod:`.timer`), the measurement database (:mod:`.database`), what every measured
device shares (:mod:`.base`) and the ``ort-cpu`` cost model (:mod:`.ortcpu`). ``torch-cpu`` and
``torch-cuda`` (:mod:`.torchdev`, timing in :mod:`.torchtime`) import PyTorch, so they are not
imported here: :func:`eqsat.cost.registry.cost_model` imports them when one is built."""
from eqsat.cost.measured.database import Context, MeasurementDB, machine_fingerprint
from eqsat.cost.measured.kernels import Kernel, Step, node_kernel, op_kernel
from eqsat.cost.measured.ortcpu import OrtCpuCost
from eqsat.cost.measured.timer import Timing, time_graph

__all__ = ["Context", "Kernel", "MeasurementDB", "OrtCpuCost", "Step", "Timing", "machine_fingerprint",
           "node_kernel", "op_kernel", "time_graph"]
