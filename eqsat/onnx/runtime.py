"""onnxruntime: run one stored opaque node, random feeds, and the numerical comparison of two models."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ..ops import set_opaque_runner
from .common import OPSET, OnnxError, _onnx


def run_node(graph_hex: str, inputs: list[np.ndarray], index: int = 0, opset: int = OPSET) -> np.ndarray:
    """Output ``index`` of one stored opaque node (see :func:`_opaque`) in onnxruntime; inputs are
    cast to the element types the node reads."""
    onnx = _onnx()
    import onnxruntime as ort

    graph = onnx.GraphProto()
    graph.ParseFromString(bytes.fromhex(graph_hex))
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", opset)])
    session = ort.InferenceSession(model.SerializeToString())
    feeds = {vi.name: x.astype(onnx.helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type))
             for vi, x in zip(graph.input, inputs)}
    return np.asarray(session.run([f"out{index}"], feeds)[0])



def random_feeds(session: Any, seed: int = 0, input_scale: float = 1.0, like: Any = None) -> dict[str, np.ndarray]:
    """Standard normal inputs times ``input_scale`` for an onnxruntime session, in each input's
    float type; a dynamic dimension takes ``like``'s size (another session), else 1."""
    rng = np.random.default_rng(seed)
    fixed = {i.name: i.shape for i in (like or session).get_inputs()}
    feeds = {}
    for i in session.get_inputs():
        dims = [d if isinstance(d, int) else (e if isinstance(e, int) else 1) for d, e in zip(i.shape, fixed[i.name])]
        x = input_scale * rng.standard_normal(dims)
        feeds[i.name] = x.astype(np.float64 if i.type == "tensor(double)" else np.float32)
    return feeds


def max_difference(a: str | Path, b: str | Path, seed: int = 0, input_scale: float = 1.0) -> float:
    """Largest |difference| between two models' outputs in onnxruntime on the same random inputs
    (standard normal times ``input_scale``), relative to the largest output magnitude."""
    try:
        import onnxruntime as ort
    except ImportError as exc:  # pragma: no cover - depends on the optional extra
        raise OnnxError("checking with onnxruntime needs the optional extra: pip install 'eqsat-lab[onnx]'") from exc
    sa, sb = ort.InferenceSession(str(a)), ort.InferenceSession(str(b))
    feeds = random_feeds(sa, seed, input_scale, like=sb)
    xa, xb = sa.run(None, feeds), sb.run(None, feeds)
    if not all(np.isfinite(x).all() for x in xa):
        raise OnnxError(f"{a}: outputs overflow in onnxruntime ({', '.join(i.type for i in sa.get_inputs())}); "
                        f"compare float64 exports instead")
    scale = max(1.0, max(float(np.abs(x).max()) for x in xa))
    return max(float(np.abs(x - y).max()) for x, y in zip(xa, xb)) / scale


set_opaque_runner(run_node)
