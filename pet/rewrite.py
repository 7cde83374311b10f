"""PET's transformations as a graph-level rewrite (:class:`eqsat.graph_rewrite.GraphRewrite`) that
both searches apply: for each conv2d PET can describe (:func:`pet.splice.conv_problem`), every
transformation the generator has, with its correction kernels and assembly, as
:func:`pet.splice.transformed_layer` builds it.

Each alternative is verified numerically before it is offered: the same layer (its attributes,
fused activation and bias) on one image and two channels in and out, against its corrected
alternative built the same way (:func:`eqsat.ir.evaluate.compare_graphs`). The non-equivalent
regions and the assembly's cuts depend only on the spatial sizes, kernel, stride, padding and
dilation (see :mod:`pet.optimizer`), so the small layer exercises every cut the full one has;
the search's result is checked at full size by ``run_verified`` as always.
"""
from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

from eqsat.graph_rewrite import Alternative, GraphRewrite
from eqsat.ir.evaluate import compare_graphs
from eqsat.ir.graph import Graph, Node, input_, node, weight
from eqsat.ir.ops import numel
from pet.programs import ConvProblem, candidates
from pet.splice import conv_problem, corrections, transformed_layer

SMALL = {"N": 1, "C": 2, "O": 2}  # the verified layer's batch and channels (the boxes do not depend on them)
MAX_CANDIDATES = 8  # transformations per conv, as PET's beam search (PetLimits.max_candidates)


def small_layer(conv: Node, p: ConvProblem) -> tuple[Node, ConvProblem]:
    """``conv``'s layer on :data:`SMALL` batch and channels: same attributes, activation and bias."""
    q = replace(p, **SMALL)
    x, w = input_("x", (q.N, q.C, q.H, q.W)), weight("w", (q.O, q.C, q.K, q.K))
    bias = (weight("b", (q.O,)),) if len(conv.inputs) > 2 else ()
    return node("conv2d", x, w, *bias, **conv.attr_dict), q


def verified(conv: Node, p: ConvProblem, name: str) -> bool:
    """Whether transformation ``name`` with its corrections computes ``conv``'s layer (on the small
    layer; convs that differ only in channels and batch share it, and the answer is kept)."""
    return _small_verified(*small_layer(conv, p), name)


@lru_cache(maxsize=1024)
def _small_verified(small: Node, q: ConvProblem, name: str) -> bool:
    return compare_graphs(Graph((small,)), Graph((transformed_layer(small, q, name),)), trials=2).equal


@lru_cache(maxsize=4096)
def pet_alternatives(n: Node) -> tuple[Alternative, ...]:
    """Every verified PET transformation of the conv ``n`` (none for another node), with the
    number of correction kernels and the share of the output they recompute; its marker is the
    program's conv, which rules may rewrite (unfuse its activation) while it stays in its e-class."""
    p = conv_problem(n)
    if p is None:
        return ()
    out = []
    for t in candidates(p)[:MAX_CANDIDATES]:
        if not verified(n, p, t.name):
            continue
        kernels, share = corrections(p, t.name)
        alt = Alternative(n, transformed_layer(n, p, t.name), f"pet:{t.name}",
                          (("transformation", t.name), ("corrections", len(kernels)), ("overhead", share)))
        program = max((x for x in alt.inner() if x.op == "conv2d"), key=lambda x: numel(x.shape))
        out.append(replace(alt, marker=program))  # the program's conv: the largest conv it adds
    return tuple(out)


PET_REWRITE = GraphRewrite("pet", pet_alternatives)
