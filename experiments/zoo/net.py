"""An ONNX graph under construction, written the way PyTorch's exporters write modules.

:class:`Net` holds nodes, initializers and fresh names; its helpers emit one PyTorch module
each as the dynamo exporter does at opset 18-20 (constants as initializers, BatchNormalization
folded into the conv before it, ``ReduceMean`` with axes as an input, SiLU as Sigmoid and Mul,
``nn.Linear`` on a 2-D input as Gemm and on a batch as MatMul plus Add). Weights are random from
the builder's seed, scaled by fan-in so deep stacks neither vanish nor overflow in float32.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from eqsat.files import replace_atomic


class Net:
    """An ONNX graph under construction: nodes, initializers and fresh names."""

    def __init__(self, name: str, seed: int):
        import onnx

        self.onnx, self.h = onnx, onnx.helper
        self.name = name
        self.rng = np.random.default_rng(seed)
        self.nodes: list[Any] = []
        self.inits: list[Any] = []
        self.count = 0

    def fresh(self, stem: str) -> str:
        self.count += 1
        return f"{stem}_{self.count}"

    def weight(self, *shape: int, scale: float | None = None) -> str:
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else shape[0]
        data = self.rng.standard_normal(shape, dtype=np.float32)  # float32 throughout: VGG holds 132M
        data *= np.float32(scale if scale is not None else 1 / np.sqrt(max(fan_in, 1)))
        name = self.fresh("p")
        self.inits.append(self.onnx.numpy_helper.from_array(data, name))
        return name

    def const(self, value: Any, dtype: Any = np.int64, as_node: bool = True) -> str:
        """A constant: a Constant node (TorchScript's habit) or an initializer (dynamo's)."""
        arr = np.asarray(value, dtype=dtype)
        name = self.fresh("c")
        if as_node:
            self.nodes.append(self.h.make_node("Constant", [], [name],
                                               value=self.onnx.numpy_helper.from_array(arr, name + "_v")))
        else:
            self.inits.append(self.onnx.numpy_helper.from_array(arr, name))
        return name

    def init(self, value: Any, dtype: Any = np.int64) -> str:
        """A constant as dynamo writes it: an initializer."""
        return self.const(value, dtype, as_node=False)

    def scalar(self, value: float) -> str:
        """A rank-0 float32 initializer (a Python float in the module's code)."""
        return self.init(value, np.float32)

    def op(self, op_type: str, *ins: str, n_out: int = 1, domain: str = "", **attrs: Any) -> Any:
        outs = [self.fresh(f"node_{op_type}") for _ in range(n_out)]
        self.nodes.append(self.h.make_node(op_type, list(ins), outs, name=outs[0], domain=domain or None, **attrs))
        return outs[0] if n_out == 1 else outs

    def static_view(self, x: str, *tail: int) -> str:
        """``x.view(x.size(0), *tail)`` as TorchScript writes it: the batch read back with Shape."""
        batch = self.op("Gather", self.op("Shape", x), self.const(0), axis=0)
        shape = self.op("Concat", self.op("Unsqueeze", batch, self.const([0])), self.const(list(tail)), axis=0)
        return self.op("Reshape", x, shape)

    def linear(self, x: str, d_in: int, d_out: int, gemm: bool = False, bias: bool = True,
               scale: float | None = None) -> str:
        """nn.Linear: Gemm(transB) on a 2-D input, MatMul with the transposed weight + Add otherwise."""
        if gemm:
            return self.op("Gemm", x, self.weight(d_out, d_in), self.weight(d_out, scale=0.1), transB=1)
        w = self.weight(d_in, d_out, scale=scale if scale is not None else 1 / np.sqrt(d_in))
        y = self.op("MatMul", x, w)
        return self.op("Add", y, self.weight(d_out, scale=0.1)) if bias else y

    def conv(self, x: str, c_in: int, c_out: int, k: int, stride: int = 1, groups: int = 1,
             pad: int | None = None, scale: float | None = None) -> str:
        """nn.Conv2d, with the bias an eval-mode BatchNormalization after it folds into."""
        p = k // 2 if pad is None else pad
        w = self.weight(c_out, c_in // groups, k, k,
                        scale=scale if scale is not None else np.sqrt(2 / (c_in // groups * k * k)))
        return self.op("Conv", x, w, self.weight(c_out, scale=0.1),
                       kernel_shape=[k, k], strides=[stride, stride], pads=[p, p, p, p], group=groups)

    def batchnorm(self, x: str, c: int) -> str:
        """An eval-mode BatchNormalization that cannot fold (it does not follow a conv)."""
        var = (1 + 0.1 * np.abs(self.rng.standard_normal(c))).astype(np.float32)
        return self.op("BatchNormalization", x, self.weight(c, scale=1.0), self.weight(c, scale=0.1),
                       self.weight(c, scale=0.1), self.init(var, np.float32), epsilon=1e-5)

    def layernorm(self, x: str, d: int, eps: float = 1e-5) -> str:
        gamma = self.init(1 + 0.1 * self.rng.standard_normal(d), np.float32)
        return self.op("LayerNormalization", x, gamma, self.weight(d, scale=0.1), axis=-1, epsilon=eps)

    def mean(self, x: str, axes: Sequence[int], keepdims: bool = True) -> str:
        """``x.mean(axes)`` / adaptive average pooling to 1x1: ReduceMean with axes as an input."""
        return self.op("ReduceMean", x, self.init(list(axes)), keepdims=int(keepdims))

    def silu(self, x: str) -> str:
        return self.op("Mul", x, self.op("Sigmoid", x))

    def reshape(self, x: str, *shape: int) -> str:
        return self.op("Reshape", x, self.init(list(shape)))

    def output(self, name: str) -> None:
        """Rename the last node's first output to the graph output ``name``."""
        self.nodes[-1].output[0] = name

    def save(self, path: str | Path, inputs: Mapping[str, tuple], outputs: Mapping[str, tuple], opset: int,
             input_types: Mapping[str, int] | None = None) -> Path:
        h = self.h
        fl = self.onnx.TensorProto.FLOAT
        types = dict(input_types or {})
        graph = h.make_graph(self.nodes, self.name,
                             [h.make_tensor_value_info(k, types.get(k, fl), list(v)) for k, v in inputs.items()],
                             [h.make_tensor_value_info(k, fl, list(v)) for k, v in outputs.items()], self.inits)
        model = h.make_model(graph, opset_imports=[h.make_opsetid("", opset)], producer_name="pytorch-shaped")
        self.onnx.checker.check_model(model)
        replace_atomic(path, lambda tmp: self.onnx.save(model, tmp))  # a killed run leaves no half model
        return Path(path)
