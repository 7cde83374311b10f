"""An ONNX file read without copying its weights: :func:`read_model` parses the model with the
inline data of its large initializers left out, and maps that data from the file instead.

``onnx.load`` reads the whole file into memory and parses it, and ``numpy_helper.to_array``
copies each initializer's bytes out of the parsed proto: importing a 440 MB BERT peaked at
924 MiB resident (the file's bytes and the proto, then the proto and the arrays) in 1.3 s; read
here, 100 MiB in 0.6 s, and no page of a weight is in this process until read. The file is mapped
(:func:`eqsat.heap.map_file`); the protobuf is walked field by field down to the graph's
initializers, and every initializer whose data is inline, of a type numpy reads as it is and of
the size its dims say, larger than :data:`MAPPED_MIN_BYTES`, is parsed without its ``raw_data``:
its array is a read-only view of the mapped file (:meth:`ModelFile.array`), whose pages the
operating system reads when touched and :func:`eqsat.heap.release_freed_memory` gives back. Any
other tensor is parsed as ``onnx.load`` parses it. A file the walk cannot read is parsed by
``onnx.load`` whole, which names what is wrong with it.
"""
from __future__ import annotations

import math
import mmap
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from eqsat.heap import map_file
from eqsat.onnx.common import SKELETON_MAX_ELEMENTS, _field, _onnx

MAPPED_MIN_BYTES = 16 * SKELETON_MAX_ELEMENTS
"""Inline data longer than this is mapped, not parsed: more than :data:`~eqsat.onnx.common.
SKELETON_MAX_ELEMENTS` elements of any type, so a mapped tensor is never one a skeleton keeps."""

MAPPED_TYPES: dict[int, np.dtype] = {
    t: np.dtype(d).newbyteorder("<") for t, d in {
        1: np.float32, 2: np.uint8, 3: np.int8, 4: np.uint16, 5: np.int16, 6: np.int32, 7: np.int64,
        9: np.bool_, 10: np.float16, 11: np.float64, 12: np.uint32, 13: np.uint64}.items()}
"""ONNX element types whose raw data numpy reads as it is (little-endian, one element after
another): ``to_array`` returns exactly these bytes for them. Packed (int4) and ml_dtypes types
(bfloat16, float8) are parsed."""

_MODEL_GRAPH, _GRAPH_INITIALIZER = 7, 5  # ModelProto.graph, GraphProto.initializer
_DIMS, _DATA_TYPE, _SEGMENT, _RAW_DATA, _DATA_LOCATION = 1, 2, 3, 9, 14  # TensorProto's fields
_VARINT, _FIXED64, _BYTES, _FIXED32 = 0, 1, 2, 5  # protobuf wire types (groups are not ONNX's)


class _Unreadable(ValueError):
    """The walk met bytes that are not protobuf as ONNX writes it: ``onnx.load`` reads the file."""


@dataclass
class ModelFile:
    """A model as :func:`read_model` read it: ``proto`` without the data of the initializers in
    ``spans`` (index in the graph's initializers -> offset and length of its raw data in
    ``data``, the mapped file)."""

    proto: Any
    spans: dict[int, tuple[int, int]] = field(default_factory=dict)
    data: mmap.mmap | None = None

    def array(self, index: int, tensor: Any) -> np.ndarray | None:
        """Initializer ``index`` (``tensor``) as a read-only array over the mapped file, or None
        when its data is in ``proto``."""
        if index not in self.spans:
            return None
        offset, length = self.spans[index]
        dtype = MAPPED_TYPES[tensor.data_type]
        return np.frombuffer(self.data, dtype, length // dtype.itemsize, offset).reshape(tuple(tensor.dims))

    def restore(self, model: Any) -> None:
        """Put the mapped data back into ``model`` (``proto`` or a copy of it, initializers in the
        same order), for what needs the whole model: onnxruntime given it in memory, the opset
        converter."""
        for index, (offset, length) in self.spans.items():
            model.graph.initializer[index].raw_data = self.data[offset:offset + length]


def read_model(path: str | Path) -> ModelFile:
    """The ONNX model in the file ``path``, its large inline initializers mapped (see the module
    docstring); external data is not loaded (``onnx.load(path, load_external_data=False)``)."""
    onnx = _onnx()
    serializer = onnx.serialization.registry.get_format_from_file_extension(os.path.splitext(str(path))[1])
    data = None
    if serializer in (None, "protobuf"):  # onnx.load's default, as it infers the format
        try:
            data = map_file(path)
        except (OSError, ValueError):  # empty, or not a regular file: onnx.load says what it is
            data = None
    if data is None:
        return ModelFile(onnx.load(str(path), load_external_data=False))
    model = onnx.ModelProto()
    try:
        stripped, spans = _without_large_data(data)
        if model.ParseFromString(stripped) not in (None, len(stripped)):
            raise _Unreadable("trailing bytes")
    except Exception:  # noqa: BLE001 - a damaged file: onnx.load raises its own error, as it always did
        return ModelFile(onnx.load(str(path), load_external_data=False))
    return ModelFile(model, spans, data)


def _without_large_data(buf: mmap.mmap) -> tuple[bytes, dict[int, tuple[int, int]]]:
    """The serialized model in ``buf`` without the raw data of its large initializers (each
    graph field rewritten by :func:`_graph_without_large_data`), and where that data is."""
    out: list[bytes] = []
    spans: dict[int, tuple[int, int]] = {}
    initializers = 0  # protobuf merges a graph field given twice: its initializers follow the first's
    for number, wire, start, value, end in _fields(buf, 0, len(buf)):
        if number == _MODEL_GRAPH and wire == _BYTES:
            graph, initializers = _graph_without_large_data(buf, value, end, spans, initializers)
            out += [_field(number, len(graph)), graph]
        else:
            out.append(buf[start:end])
    return b"".join(out), spans


def _graph_without_large_data(buf: mmap.mmap, start: int, end: int, spans: dict[int, tuple[int, int]],
                              index: int) -> tuple[bytes, int]:
    """The graph serialized in ``buf[start:end]``, each initializer :func:`_mappable_data` names
    without its raw data (added to ``spans`` by its index among all initializers, the first of
    this graph field's being ``index``), and the index after its last initializer."""
    out: list[bytes] = []
    for number, wire, first, value, last in _fields(buf, start, end):
        if number != _GRAPH_INITIALIZER or wire != _BYTES:
            out.append(buf[first:last])
            continue
        span = _mappable_data(buf, value, last)
        if span is None:
            out.append(buf[first:last])
        else:
            offset, length, raw_field = span
            tensor = buf[value:raw_field] + buf[offset + length:last]  # its fields around the raw data's
            spans[index] = (offset, length)
            out += [_field(number, len(tensor)), tensor]
        index += 1
    return b"".join(out), index


def _mappable_data(buf: mmap.mmap, start: int, end: int) -> tuple[int, int, int] | None:
    """For the tensor serialized in ``buf[start:end]``: its raw data's offset, its length and
    where its field begins, when that data is mapped (one inline ``raw_data`` field of a type in
    :data:`MAPPED_TYPES`, longer than :data:`MAPPED_MIN_BYTES`, exactly the size its dims say);
    else None."""
    dims: list[int] = []
    data_type = location = 0
    raw: list[tuple[int, int, int]] = []
    for number, wire, first, value, last in _fields(buf, start, end):
        if number == _DIMS and wire == _VARINT:
            dims.append(_signed(value))
        elif number == _DIMS and wire == _BYTES:
            pos = value
            while pos < last:
                dim, pos = _read_varint(buf, pos, last)
                dims.append(_signed(dim))
        elif number == _DATA_TYPE and wire == _VARINT:
            data_type = value
        elif number == _DATA_LOCATION and wire == _VARINT:
            location = value
        elif number == _SEGMENT:
            return None  # to_array refuses it; so does the parsed tensor
        elif number == _RAW_DATA and wire == _BYTES:
            raw.append((value, last - value, first))
    if len(raw) != 1 or location != 0 or data_type not in MAPPED_TYPES or raw[0][1] <= MAPPED_MIN_BYTES:
        return None
    if any(d < 0 for d in dims) or math.prod(dims) * MAPPED_TYPES[data_type].itemsize != raw[0][1]:
        return None  # parsed: to_array names the mismatch
    return raw[0]


def _fields(buf: mmap.mmap, start: int, end: int) -> Iterator[tuple[int, int, int, int, int]]:
    """The fields serialized in ``buf[start:end]``: number, wire type, where the field begins,
    its value (a varint's value; else where its bytes begin) and where it ends."""
    pos = start
    while pos < end:
        first = pos
        key, pos = _read_varint(buf, pos, end)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise _Unreadable("field number 0")
        if wire == _VARINT:
            value, pos = _read_varint(buf, pos, end)
            yield number, wire, first, value, pos
            continue
        if wire == _BYTES:
            length, value = _read_varint(buf, pos, end)
            pos = value + length
        elif wire in (_FIXED64, _FIXED32):
            value, pos = pos, pos + (8 if wire == _FIXED64 else 4)
        else:
            raise _Unreadable(f"wire type {wire}")
        if pos > end:
            raise _Unreadable("a field past its message's end")
        yield number, wire, first, value, pos


def _read_varint(buf: mmap.mmap, pos: int, end: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= end or shift > 63:
            raise _Unreadable("a varint past its message's end")
        byte = buf[pos]
        value |= (byte & 0x7F) << shift
        pos += 1
        shift += 7
        if not byte & 0x80:
            return value, pos


def _signed(value: int) -> int:
    """An int64 field's value (a negative one is written as its 64-bit two's complement)."""
    return value - (1 << 64) if value >= 1 << 63 else value
