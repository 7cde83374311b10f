"""PET's transformations on a whole model: find its conv layers, and put a transformed layer back.

A conv2d node of any graph (a benchmark graph, an imported ONNX file) is a :class:`ConvProblem`
when PET's generator can describe it: one group, a square kernel, the same stride, dilation and
padding on every side. Putting a transformation back builds, on the node's real input and weight,
the transformed program and its correction kernels, and assembles the corrected output: the output
is cut into a grid at the corrected boxes' edges (views), each cell taken from the correction that
covers it or from the program, and concatenated back. The conv's fused activation and bias go
onto every conv of the program and of the corrections (both are per output position), so the
spliced layer computes exactly what the node did; the assembly's concats are real kernels and are
priced like any other op.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from functools import lru_cache

from eqsat.ir.graph import Graph, Node, node, rebuild, split, topo_order
from eqsat.ir.opspec import _window_out
from pet.programs import ConvProblem, candidates
from pet.verify import CorrectionKernel, correction_kernels, overhead, verify


def conv_problem(n: Node) -> ConvProblem | None:
    """The PET problem of a conv2d node, or None when PET's generator cannot describe it."""
    if n.op != "conv2d" or n.is_const or n.attr("groups") != 1:
        return None
    x, w = n.inputs[0].shape, n.inputs[1].shape
    stride, dilation = n.attr("stride"), n.attr("dilation")
    (pt, pb, _), (pl, pr, _) = _window_out("conv2d", n.attr_dict, x, w[2], w[3])
    if w[2] != w[3] or len(set(stride)) != 1 or len(set(dilation)) != 1 or len({pt, pb, pl, pr}) != 1:
        return None
    return ConvProblem(x[0], x[1], w[0], x[2], x[3], K=w[2], pad=pt, stride=stride[0], dilation=dilation[0])


def conv_layers(graph: Graph) -> list[tuple[Node, ConvProblem]]:
    """Every conv2d node of ``graph`` that PET can transform, in topological order."""
    found = ((n, conv_problem(n)) for n in graph.nodes())
    return [(n, p) for n, p in found if p is not None]


def transformation_of(p: ConvProblem, name: str):
    """The generator's transformation called ``name`` for ``p`` (a ValueError if it has none)."""
    for t in candidates(p):
        if t.name == name:
            return t
    raise ValueError(f"no transformation {name!r} for the conv {p}")


def _substitute(roots: Sequence[Node], mapping: Mapping[Node, Node], conv: Node) -> list[Node]:
    """``roots`` rebuilt with ``mapping``'s leaves replaced; every conv2d gets ``conv``'s activation
    and bias (a template's convs have neither)."""
    done: dict[Node, Node] = dict(mapping)
    bias = conv.inputs[2:]
    for x in topo_order(roots):
        if x in done:
            continue
        ins = tuple(done[i] for i in x.inputs)
        if x.op == "conv2d":
            attrs = x.attr_dict | {"act": conv.attr("act")}
            done[x] = node("conv2d", *ins, *bias, **attrs)
        else:
            done[x] = rebuild(x, ins) if ins else x
    return [done[r] for r in roots]


def _crop(x: Node, axis: int, lo: int, hi: int) -> Node:
    """``x[lo:hi]`` along ``axis``, as a view (split + proj)."""
    size = x.shape[axis]
    if (lo, hi) == (0, size):
        return x
    sizes = tuple(s for s in (lo, hi - lo, size - hi) if s)
    return split(x, axis, sizes)[1 if lo else 0]


def _correction(k: CorrectionKernel, p: ConvProblem, x: Node, conv: Node) -> Node:
    """One correction kernel on the real input: the input box (border-padded), the original conv
    without padding, the conv's bias and activation."""
    (h0, h1), (w0, w1) = k.in_box
    (pt, pb), (pl, pr) = k.border_padding(p)
    xs = _crop(_crop(x, 2, max(h0, 0), min(h1, p.H - 1) + 1), 3, max(w0, 0), min(w1, p.W - 1) + 1)
    if pt or pb or pl or pr:
        xs = node("pad", xs, pads=(0, 0, pt, pl, 0, 0, pb, pr))
    template = k.graph(p).outputs[0]
    leaf = template.inputs[0]
    return _substitute([template], {leaf: xs, template.inputs[1]: conv.inputs[1]}, conv)[0]


def _assemble(program: Node, fixes: Sequence[tuple[CorrectionKernel, Node]]) -> Node:
    """The program's output with each correction's box replaced by that correction's output."""
    if not fixes:
        return program
    ho, wo = program.shape[2], program.shape[3]
    cuts_h = sorted({0, ho} | {e for k, _ in fixes for e in (k.out_box[0][0], k.out_box[0][1] + 1)})
    cuts_w = sorted({0, wo} | {e for k, _ in fixes for e in (k.out_box[1][0], k.out_box[1][1] + 1)})
    bands = []
    for h_lo, h_hi in zip(cuts_h, cuts_h[1:]):
        cells = []
        for w_lo, w_hi in zip(cuts_w, cuts_w[1:]):
            cover = next(((k, y) for k, y in fixes if k.out_box[0][0] <= h_lo and h_hi - 1 <= k.out_box[0][1]
                          and k.out_box[1][0] <= w_lo and w_hi - 1 <= k.out_box[1][1]), None)
            if cover is None:
                cells.append(_crop(_crop(program, 2, h_lo, h_hi), 3, w_lo, w_hi))
            else:
                k, y = cover
                kh, kw = k.out_box[0][0], k.out_box[1][0]
                cells.append(_crop(_crop(y, 2, h_lo - kh, h_hi - kh), 3, w_lo - kw, w_hi - kw))
        bands.append(cells[0] if len(cells) == 1 else node("concat", *cells, axis=3))
    return bands[0] if len(bands) == 1 else node("concat", *bands, axis=2)


@lru_cache(maxsize=1024)
def _corrections(spatial: ConvProblem, name: str) -> tuple[tuple[CorrectionKernel, ...], float]:
    v = verify(spatial, transformation_of(spatial, name))
    kernels = correction_kernels(v)
    return tuple(kernels), overhead(v, kernels)


def corrections(p: ConvProblem, name: str) -> tuple[tuple[CorrectionKernel, ...], float]:
    """The correction kernels of transformation ``name`` of ``p`` and the output share they
    recompute, verified on one image and two channels (the boxes depend on the spatial
    configuration alone, so layers that share it share the answer: it is kept)."""
    return _corrections(replace(p, N=1, C=2, O=2), name)


def transformed_layer(conv: Node, p: ConvProblem, name: str) -> Node:
    """What replaces ``conv`` under transformation ``name``: program, corrections, assembly."""
    t = transformation_of(p, name)
    template = t.program(p)
    x_leaf, w_leaf = p.leaves()
    x = conv.inputs[0]
    (program,) = _substitute(template.outputs, {x_leaf: x, w_leaf: conv.inputs[1]}, conv)
    kernels, _ = corrections(p, name)
    return _assemble(program, [(k, _correction(k, p, x, conv)) for k in kernels])


def replace_nodes(graph: Graph, mapping: Mapping[Node, Node]) -> Graph:
    """``graph`` with every key of ``mapping`` replaced by its value in all its users."""
    done: dict[Node, Node] = dict(mapping)
    for x in graph.nodes():
        if x not in done:
            ins = tuple(done.get(i, i) for i in x.inputs)
            done[x] = x if ins == x.inputs else rebuild(x, ins)
    return Graph(tuple(done[o] for o in graph.outputs), graph.dtype, graph.name)
