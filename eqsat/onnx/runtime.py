"""onnxruntime: run one stored opaque node, random feeds, and the numerical comparison of two models."""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

from eqsat.ir.ops import set_opaque_runner
from eqsat.onnx.common import OPSET, OnnxError, _first_line, _onnx

CONTRIB_OPSET = 1  # the version of a non-default operator domain (onnxruntime's com.microsoft has only 1)


def node_model(graph_hex: str, opset: int = OPSET, const_inputs: Sequence[bool] = ()) -> Any:
    """One stored opaque node (see :func:`eqsat.onnx.reader._opaque`) as a model at its own opset
    and operator domain, its inputs typed as in its file; each input flagged in ``const_inputs``
    (a weight of the model) becomes an initializer of its type and shape, filled with one small
    value (:func:`node_constants`)."""
    onnx = _onnx()
    model, constants = node_model_parts(graph_hex, opset, const_inputs)
    model.graph.initializer.extend(onnx.numpy_helper.from_array(np.ascontiguousarray(v), name) for name, v in constants)
    return model


def write_node_model(graph_hex: str, path: str | Path, opset: int = OPSET, const_inputs: Sequence[bool] = ()) -> Path:
    """:func:`node_model` written to ``path``, its constants streamed from their one value
    (:func:`eqsat.onnx.writer.write_model`): built in memory and serialized, a BERT's 94 MB
    embedding table was held five times over while onnxruntime opened it."""
    from eqsat.onnx.writer import write_model

    model, constants = node_model_parts(graph_hex, opset, const_inputs)
    write_model(model, constants, path)
    return Path(path)


def node_model_parts(graph_hex: str, opset: int = OPSET,
                     const_inputs: Sequence[bool] = ()) -> tuple[Any, list[tuple[str, np.ndarray]]]:
    """:func:`node_model` without the initializers of its constant inputs, and those (name, a
    read-only broadcast of one value each) in order: the initializers come after the node's own.
    Each is filled with 1/sqrt(fan-in) in its type (a kernel's speed does not depend on it;
    constants whose values matter are stored in the node itself), so the runtime pre-packs it as
    it does in the model."""
    onnx = _onnx()
    h = onnx.helper
    graph = onnx.GraphProto()
    graph.ParseFromString(bytes.fromhex(graph_hex))
    constants = []
    for vi, const in zip(list(graph.input), const_inputs):
        if not const:
            continue
        t = vi.type.tensor_type
        shape = [d.dim_value for d in t.shape.dim]
        fill = 1.0 / np.sqrt(max(int(np.prod(shape[1:])) if len(shape) > 1 else 1, 1))
        value = np.full((), fill, dtype=h.tensor_dtype_to_np_dtype(t.elem_type))
        constants.append((vi.name, np.broadcast_to(value, shape)))
        graph.input.remove(vi)
    domains = sorted({n.domain for n in graph.node} - {"", "ai.onnx"})
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", opset)]
                         + [h.make_opsetid(d, CONTRIB_OPSET) for d in domains])
    return model, constants


def run_node(graph_hex: str, inputs: list[np.ndarray], index: int = 0, opset: int = OPSET) -> np.ndarray:
    """Output ``index`` of one stored opaque node (see :func:`node_model`) in onnxruntime; inputs
    are cast to the element types the node reads."""
    onnx = _onnx()
    import onnxruntime as ort

    graph = onnx.GraphProto()
    graph.ParseFromString(bytes.fromhex(graph_hex))
    so = ort.SessionOptions()
    so.log_severity_level = 4  # a failure is raised (and named by the caller), not also logged to stderr
    session = ort.InferenceSession(node_model(graph_hex, opset).SerializeToString(), so)
    feeds = {vi.name: x.astype(onnx.helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type))
             for vi, x in zip(graph.input, inputs)}
    return np.asarray(session.run([f"out{index}"], feeds)[0])



def random_feeds(session: Any, seed: int = 0, input_scale: float = 1.0, like: Any = None,
                 domain: tuple[float, float] | None = None) -> dict[str, np.ndarray]:
    """Inputs for an onnxruntime session: standard normal times ``input_scale`` in each float
    input's type (uniform in ``domain`` when given, see :data:`DOMAINS`); zeros for integer inputs
    (always a valid index or count) and random bools; a dynamic dimension takes ``like``'s size
    (another session), else 1."""
    rng = np.random.default_rng(seed)
    fixed = {i.name: i.shape for i in (like or session).get_inputs()}
    feeds = {}
    for i in session.get_inputs():
        dims = [d if isinstance(d, int) else (e if isinstance(e, int) else 1) for d, e in zip(i.shape, fixed[i.name])]
        kind = _FEED_TYPES.get(i.type)
        if kind is None:
            raise OnnxError(f"input {i.name}: element type {i.type} is not supported by the onnxruntime check")
        if kind is np.bool_:  # np.asarray: a rank-0 draw is a numpy scalar, which onnxruntime refuses
            feeds[i.name] = np.asarray(rng.integers(0, 2, dims), dtype=np.bool_)
        elif np.issubdtype(kind, np.integer):
            feeds[i.name] = np.zeros(dims, dtype=kind)
        elif domain is not None:
            feeds[i.name] = np.asarray(rng.uniform(domain[0], domain[1], dims), dtype=kind)
        else:
            feeds[i.name] = np.asarray(input_scale * rng.standard_normal(dims), dtype=kind)
    return feeds


DOMAINS: tuple[tuple[float, float], ...] = ((0.1, 0.9), (1.1, 2.0))
"""Where the check draws float inputs when standard normal ones make the input model's outputs NaN
(a log, square root or power of a negative number: (0.1, 0.9), also inside asin, acos and atanh's
domain; acosh: (1.1, 2.0)): the check compares two models where both are defined."""


_FEED_TYPES = {"tensor(float)": np.float32, "tensor(double)": np.float64, "tensor(float16)": np.float16,
               "tensor(int64)": np.int64, "tensor(int32)": np.int32, "tensor(int16)": np.int16, "tensor(int8)": np.int8,
               "tensor(uint64)": np.uint64, "tensor(uint32)": np.uint32, "tensor(uint16)": np.uint16,
               "tensor(uint8)": np.uint8, "tensor(bool)": np.bool_}
"""onnxruntime input type -> the numpy type the check feeds: every type :data:`eqsat.onnx.reader.
READABLE_ELEM_TYPES` lets in, so no model reaches the check with an input it cannot feed."""


def check_session(path: str | Path) -> Any:
    """An onnxruntime CPU session for a numerical check: weights not pre-packed and no memory
    arena (a session of a 440 MB BERT then peaks at 0.57 GB, not 0.69 GB, and opens in half the
    time; speed does not matter for one run)."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.enable_cpu_mem_arena = False
    opts.add_session_config_entry("session.disable_prepacking", "1")
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])


class _Inputs:
    """A closed session's inputs (names, shapes, types), for :func:`random_feeds`' ``like``."""

    def __init__(self, session: Any):
        self.inputs = [SimpleNamespace(name=i.name, shape=list(i.shape), type=i.type) for i in session.get_inputs()]

    def get_inputs(self) -> list[Any]:
        return self.inputs


def max_difference(a: str | Path, b: str | Path, seed: int = 0, input_scale: float = 1.0) -> float:
    """Largest |difference| between two models' outputs in onnxruntime on the same random inputs
    (standard normal times ``input_scale``), relative to the largest output magnitude. One session
    is open at a time (:func:`check_session`): two of a large model held together doubled the
    memory a write takes."""
    try:
        import onnxruntime  # noqa: F401
    except ImportError as exc:  # pragma: no cover - depends on the optional extra
        raise OnnxError("checking with onnxruntime needs the optional extra: pip install 'eqsat-lab[onnx]'") from exc
    from eqsat.heap import release_freed_memory

    def open_a() -> Any:
        try:
            return check_session(a)
        except Exception as exc:  # onnxruntime's own checks (e.g. node input types) are stricter than onnx's
            raise OnnxError(f"{a}: onnxruntime cannot load this model: {_first_line(exc)}") from None

    release_freed_memory()  # what the export before it read and freed goes back before a session opens
    sa, like = open_a(), None
    if not all(isinstance(d, int) for i in sa.get_inputs() for d in i.shape):
        del sa  # b's sizes for a's symbolic dimensions, read while a is closed
        like = _Inputs(check_session(b))
        release_freed_memory()
        sa = open_a()
    for domain in (None, *DOMAINS):
        feeds = random_feeds(sa, seed, input_scale, like=like, domain=domain)
        xa = _run_input(a, sa, feeds)
        if not any(np.isnan(x).any() for x in xa if np.asarray(x).dtype.kind == "f"):
            break
    else:
        raise OnnxError(f"{a}: outputs are NaN in onnxruntime on every random input the check draws (standard "
                        f"normal, uniform in {' and '.join(map(str, DOMAINS))}); check it on your own inputs")
    if not all(np.isfinite(x).all() for x in xa):
        raise OnnxError(f"{a}: outputs overflow in onnxruntime ({', '.join(i.type for i in sa.get_inputs())}); "
                        f"compare float64 exports instead")
    del sa
    release_freed_memory()
    xb = check_session(b).run(None, feeds)
    release_freed_memory()
    xa = [np.asarray(x, dtype=np.float64) for x in xa]
    xb = [np.asarray(x, dtype=np.float64) for x in xb]
    scale = max([1.0] + [float(np.abs(x).max()) for x in xa if x.size])
    return max([0.0] + [float(np.abs(x - y).max()) for x, y in zip(xa, xb) if x.size]) / scale


def _run_input(path: str | Path, session: Any, feeds: dict[str, np.ndarray]) -> list[Any]:
    """The input model's outputs on ``feeds``; where its integer inputs of 0 are not valid (a
    divisor, a count, a size), on integers of 1; else one sentence naming onnxruntime's reason."""
    try:
        return session.run(None, feeds)
    except Exception as exc:  # onnxruntime's errors have no common base class
        first = exc
    ones = {k: (v + 1 if v.dtype.kind in "iu" else v) for k, v in feeds.items()}
    try:
        out = session.run(None, ones)
    except Exception:  # the first error names the cause
        raise OnnxError(f"{path}: onnxruntime cannot run the model on the check's random inputs (integers 0 and "
                        f"1, floats standard normal): {_first_line(first)}") from None
    feeds.update(ones)  # the optimized model is compared on the same inputs
    return out


set_opaque_runner(run_node)
