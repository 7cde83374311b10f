"""Op-table rows for leaves, elementwise ops, matmul and layout ops (one :func:`register` each)."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from eqsat.errors import ShapeError
from eqsat.ir.domains import Domain
from eqsat.ir.opspec import (
    ACT_NAMES,
    ACTIVATIONS,
    ALL_DOMAINS,
    Attrs,
    AttrSpec,
    OpSpec,
    Shape,
    numel,
    pad_array,
    register,
    register_elementwise,
)


# --------------------------------------------------------------------------- leaves
def _leaf_shape(attrs: Attrs, ins: Sequence[Shape]) -> tuple[Shape, ...]:
    return (attrs["shape"],)


def _leaf_eval(attrs: Attrs, ins: Sequence[Any], domain: Domain) -> Any:
    raise ValueError(f"leaf {attrs['name']!r} has no value: pass it in the inputs mapping")


def _leaf_torch(t: Any, attrs: Attrs, xs: Sequence[Any]) -> Any:
    raise ValueError(f"leaf {attrs['name']!r} has no value: a module is fed its inputs and holds its weights")


for _leaf, _doc in (("input", "An activation fed at run time."), ("weight", "A parameter known at compile time.")):
    register(OpSpec(
        name=_leaf, arity=0, attrs=(AttrSpec("name", "name"), AttrSpec("shape", "shape")),
        shape=_leaf_shape, evaluate=_leaf_eval, torch=_leaf_torch, is_leaf=True, doc=_doc,
    ))


# --------------------------------------------------------------------------- elementwise
register_elementwise("ewadd", 2, lambda a, b: a + b, ALL_DOMAINS, jointly_linear=True, commutative=True,
                     torch_fn=lambda t, a, b: a + b, doc="Elementwise sum.")
register_elementwise("ewmul", 2, lambda a, b: a * b, ALL_DOMAINS, linear_in=(0, 1), commutative=True,
                     torch_fn=lambda t, a, b: a * b, doc="Elementwise product.")
for _act in (a for a in ACTIVATIONS if a != "none"):
    register_elementwise(_act, 1, ACTIVATIONS[_act].fn, ACTIVATIONS[_act].domains, torch_fn=ACTIVATIONS[_act].torch,
                         doc=f"Elementwise {_act}.")


def _scalar_shape(attrs: Attrs, ins: Sequence[Shape]) -> tuple[Shape, ...]:
    if ins[1] != ():
        raise ShapeError(f"smul/sadd: input 1 must be a scalar (shape ()), got shape {ins[1]}")
    return (ins[0],)


for _name, _fn, _linear, _doc in (
    ("smul", lambda a, s: a * s, (0, 1), "Tensor times a scalar (a 0-d tensor)."),
    ("sadd", lambda a, s: a + s, (), "Tensor plus a scalar (a 0-d tensor): GELU's 1 + erf(...)."),
):
    register(OpSpec(
        name=_name, arity=2, attrs=(), shape=_scalar_shape,
        flops=lambda attrs, ins, outs: numel(outs[0]),
        evaluate=lambda attrs, xs, domain, _f=_fn: _f(xs[0], xs[1]),
        torch=lambda t, attrs, xs, _f=_fn: _f(xs[0], xs[1]),  # a 0-d tensor broadcasts
        linear_in=_linear, elementwise=True, doc=_doc,
    ))


# --------------------------------------------------------------------------- matmul
def _matmul_shape(attrs: Attrs, ins: Sequence[Shape]) -> tuple[Shape, ...]:
    a, b = ins
    if len(a) < 2 or len(b) < 2:
        raise ShapeError(f"matmul: inputs need rank >= 2, got shapes {a} and {b}")
    if len(a) != len(b) or a[:-2] != b[:-2]:
        raise ShapeError(f"matmul: batch dimensions differ: input 0 has shape {a}, input 1 has shape {b}")
    if a[-1] != b[-2]:
        raise ShapeError(f"matmul: inner dimensions differ: input 0 has shape {a} (k={a[-1]}), "
                         f"input 1 has shape {b} (k={b[-2]})")
    return (a[:-1] + (b[-1],),)


def _matmul_flops(attrs: Attrs, ins: Sequence[Shape], outs: Sequence[Shape]) -> int:
    extra = numel(outs[0]) if attrs["act"] != "none" else 0
    return 2 * numel(outs[0]) * ins[0][-1] + extra


register(OpSpec(
    name="matmul", arity=2, attrs=(AttrSpec("act", "choice", "none", ACT_NAMES),),
    terms=lambda attrs, ins: ins[0][-1],
    shape=_matmul_shape, flops=_matmul_flops,
    evaluate=lambda attrs, xs, domain: ACTIVATIONS[attrs["act"]].fn(
        domain.contract(np.matmul, xs[0], xs[1], terms=xs[0].shape[-1])),
    torch=lambda t, attrs, xs: ACTIVATIONS[attrs["act"]].torch(t, t.matmul(xs[0], xs[1])),
    linear_in=(0, 1), merge_axes=((0, -1), (1, -2)), same_rank=True,
    doc="(Batched) matrix product with an optional fused activation.",
))


# --------------------------------------------------------------------------- layout ops
def _transpose_eval(attrs: Attrs, xs: Sequence[Any], domain: Domain) -> Any:
    """A view when it is still one block of memory (a 2-D transpose is Fortran-ordered, which
    BLAS takes as is: VGG's 400 MB classifier weight is not copied); else a copy, because numpy's
    matmul leaves BLAS for a slow loop on other strided operands."""
    out = np.transpose(xs[0], attrs["perm"])
    return out if out.flags.c_contiguous or out.flags.f_contiguous else np.ascontiguousarray(out)


def _transpose_normalize(values: dict[str, Any], ins: Sequence[Shape]) -> dict[str, Any]:
    if values["perm"] is None and ins:
        values["perm"] = tuple(reversed(range(len(ins[0]))))
    return values


def _transpose_shape(attrs: Attrs, ins: Sequence[Shape]) -> tuple[Shape, ...]:
    (x,), perm = ins, attrs["perm"]
    if perm is None:
        perm = tuple(reversed(range(len(x))))
    if sorted(perm) != list(range(len(x))):
        raise ShapeError(f"transpose: perm {perm} is not a permutation of the {len(x)} axes of shape {x}")
    return (tuple(x[p] for p in perm),)


register(
    OpSpec(
        name="transpose",
        arity=1,
        attrs=(AttrSpec("perm", "perm", None),),
        shape=_transpose_shape,
        normalize=_transpose_normalize,
        evaluate=_transpose_eval,
        torch=lambda t, attrs, xs: xs[0].permute(attrs["perm"] or tuple(reversed(range(xs[0].ndim)))),
        linear_in=(0,),
        jointly_linear=True,
        same_rank=True,
        doc="Axis permutation (default: reverse the axes); a real copy (in PyTorch a strided view, as "
            "``permute`` is in PyTorch code: the consumer reads it as it can).",
    )
)


def _reshape_normalize(values: dict[str, Any], ins: Sequence[Shape]) -> dict[str, Any]:
    shape = values["shape"]
    if ins and shape.count(-1) == 1:
        known = numel(tuple(s for s in shape if s != -1))
        if known and numel(ins[0]) % known == 0:
            values["shape"] = tuple(numel(ins[0]) // known if s == -1 else s for s in shape)
    return values


def _reshape_shape(attrs: Attrs, ins: Sequence[Shape]) -> tuple[Shape, ...]:
    (x,), shape = ins, attrs["shape"]
    if any(s < 0 for s in shape) or numel(shape) != numel(x):
        raise ShapeError(f"reshape: cannot reshape {x} ({numel(x)} elements) into {shape}")
    return (shape,)


register(
    OpSpec(
        name="reshape",
        arity=1,
        attrs=(AttrSpec("shape", "ints"),),
        shape=_reshape_shape,
        normalize=_reshape_normalize,
        evaluate=lambda attrs, xs, domain: np.reshape(xs[0], attrs["shape"]),
        torch=lambda t, attrs, xs: xs[0].reshape(attrs["shape"]),  # a view unless the input is strided
        linear_in=(0,),
        jointly_linear=True,
        is_view=True,
        doc="Reshape (a view, free).",
    )
)


def _axis_normalize(values: dict[str, Any], ins: Sequence[Shape]) -> dict[str, Any]:
    if ins and values["axis"] < 0:
        values["axis"] += len(ins[0])
    return values


def _concat_shape(attrs: Attrs, ins: Sequence[Shape]) -> tuple[Shape, ...]:
    axis, first = attrs["axis"], ins[0]
    if not 0 <= axis < len(first):
        raise ShapeError(f"concat: axis {axis} out of range for shape {first}")
    for i, s in enumerate(ins[1:], start=1):
        if len(s) != len(first) or any(a != b for k, (a, b) in enumerate(zip(s, first)) if k != axis):
            raise ShapeError(
                f"concat: input {i} has shape {s}, input 0 has shape {first}; they may differ only on axis {axis}"
            )
    return (first[:axis] + (sum(s[axis] for s in ins),) + first[axis + 1 :],)


register(
    OpSpec(
        name="concat",
        arity=None,
        min_arity=2,
        attrs=(AttrSpec("axis", "int"),),
        shape=_concat_shape,
        normalize=_axis_normalize,
        evaluate=lambda attrs, xs, domain: np.concatenate(xs, axis=attrs["axis"]),
        torch=lambda t, attrs, xs: t.cat(list(xs), dim=attrs["axis"]),
        jointly_linear=True,
        same_rank=True,
        doc="Concatenation along an axis; a real kernel on activations.",
    )
)


def _split_shape(attrs: Attrs, ins: Sequence[Shape]) -> tuple[Shape, ...]:
    (x,), axis, sizes = ins, attrs["axis"], attrs["sizes"]
    if not 0 <= axis < len(x):
        raise ShapeError(f"split: axis {axis} out of range for shape {x}")
    if len(sizes) < 2 or any(s < 1 for s in sizes) or sum(sizes) != x[axis]:
        raise ShapeError(
            f"split: sizes {sizes} must be >= 2 positive parts adding up to {x[axis]} (axis {axis} of shape {x})"
        )
    return tuple(x[:axis] + (s,) + x[axis + 1 :] for s in sizes)


def _split_eval(attrs: Attrs, xs: Sequence[Any], domain: Domain) -> tuple[Any, ...]:
    cuts = np.cumsum(attrs["sizes"])[:-1]
    return tuple(np.split(xs[0], cuts, axis=attrs["axis"]))


register(
    OpSpec(
        name="split",
        arity=1,
        attrs=(AttrSpec("axis", "int"), AttrSpec("sizes", "ints")),
        shape=_split_shape,
        evaluate=_split_eval,
        torch=lambda t, attrs, xs: tuple(t.split(xs[0], list(attrs["sizes"]), dim=attrs["axis"])),  # views
        normalize=_axis_normalize,
        linear_in=(0,),
        jointly_linear=True,
        is_view=True,
        doc="Split into len(sizes) outputs (views, free); read them with proj.",
    )
)


def _proj_shape(attrs: Attrs, ins: Sequence[Shape]) -> tuple[Shape, ...]:
    index = attrs["index"]
    if not 0 <= index < len(ins):
        raise ShapeError(f"proj: index {index} out of range for a producer with {len(ins)} outputs")
    return (ins[index],)


register(
    OpSpec(
        name="proj",
        arity=1,
        attrs=(AttrSpec("index", "int"),),
        shape=_proj_shape,
        evaluate=lambda attrs, xs, domain: xs[0][attrs["index"]],
        torch=lambda t, attrs, xs: xs[0][attrs["index"]],
        jointly_linear=True,
        is_view=True,
        takes_tuple=True,
        doc="Output `index` of a multi-output producer (split, noop).",
    )
)

register(
    OpSpec(
        name="noop",
        arity=None,
        min_arity=1,
        attrs=(),
        shape=lambda attrs, ins: tuple(ins),
        evaluate=lambda attrs, xs, domain: tuple(xs),
        torch=lambda t, attrs, xs: tuple(xs),
        jointly_linear=True,
        is_view=True,
        doc="Multi-output root tying a graph's outputs together.",
    )
)


def _pad_shape(attrs: Attrs, ins: Sequence[Shape]) -> tuple[Shape, ...]:
    (x,), pads = ins, attrs["pads"]
    if len(pads) != 2 * len(x) or min(pads, default=0) < 0:
        raise ShapeError(
            f"pad: pads {pads} must be {2 * len(x)} non-negative integers (all befores, then all afters) for shape {x}"
        )
    return (tuple(d + a + b for d, a, b in zip(x, pads[: len(x)], pads[len(x) :])),)


def _pad_torch(t: Any, attrs: Attrs, xs: Sequence[Any]) -> Any:
    """torch's pad lists (before, after) from the last axis back; ONNX's all befores, then all afters."""
    x, pads = xs[0], attrs["pads"]
    if not any(pads):
        return x
    widths = [w for k in reversed(range(x.ndim)) for w in (pads[k], pads[x.ndim + k])]
    return t.nn.functional.pad(x, widths)


register(
    OpSpec(
        name="pad",
        arity=1,
        attrs=(AttrSpec("pads", "ints"),),
        shape=_pad_shape,
        evaluate=lambda attrs, xs, domain: pad_array(
            xs[0], tuple(zip(attrs["pads"][: xs[0].ndim], attrs["pads"][xs[0].ndim :]))
        ),
        torch=_pad_torch,
        linear_in=(0,),
        jointly_linear=True,
        same_rank=True,
        doc="Zero padding; `pads` lists every axis' before, then every axis' after (ONNX's order); a real copy.",
    )
)
