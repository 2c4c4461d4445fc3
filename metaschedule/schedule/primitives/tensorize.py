"""``tensorize``: replace a subtree that computes what a tensor intrinsic describes by the
intrinsic's implementation.

The block (or the block ``blockize`` makes of a loop) must hold one loop nest around one
block computing the description (:mod:`.tensorize_match`); its body becomes the
implementation, with each parameter bound to the region it matched::

    with block("C_o"):                    with block("C_o"):
        for j_1, k_1 in T.grid(16, 4):        T.ms_dot_16x4_vnni(
            with block("C"):          ->          T.address_of(C[v_i_o, v_j_o * 16]),
                C[...] += A[...] * ...            T.address_of(A[v_i_o, v_k_o * 4]),
                                                  T.address_of(B[v_j_o * 16, v_k_o * 4]), 64)

``buffer_stride`` calls in the implementation become the bound region's strides (64
above: the rows of ``B`` lie 64 elements apart); every other axis of an implementation's
buffer must be compact where it is bound.

Where we differ from TVM: regions are bound by the indices the two computations use, not
by matching buffer declarations (``offset_factor``, ``strides``), and a reduction must have
its init split off first (``decompose_reduction``), as TVM's ``RewriteTensorize`` does
before it tensorizes.
"""

from __future__ import annotations

from ...tir import Block, BlockRealize, Buffer, BufferStore, For, PrimFunc, Stmt, Var
from ...tir import expr as E
from ...tir.arith import Analyzer
from ...tir.expr import const
from ...tir.functor import Mutator, post_order_visit, substitute
from ...tir.tensor_intrin import TensorIntrin
from ...tir.tensor_intrin.calls import is_buffer_stride, stride_axis
from ..base import ScheduleBase, atomic
from ..error import TensorizeError
from ..instruction import InstructionKind, register_inst_kind
from ..rv import BlockRV, LoopRV
from .tensorize_match import BoundBuffer, compact_stride, description_body, match_description


class TensorizeMixin(ScheduleBase):
    @atomic
    def tensorize(
        self, block_or_loop: BlockRV | LoopRV, tensor_intrin: str, preserve_unit_iters: bool = True
    ) -> None:
        """Replace the computation under a block or loop by a tensor intrinsic::

            with block("C_o"):                    with block("C_o"):
                for j_1, k_1 in T.grid(16, 4):  ->    T.ms_dot_16x4_vnni(&C[..], &A[..], &B[..], 64)
                    with block("C"): C[...] += ...

        Args:
            block_or_loop: a block holding one loop nest around one block, or a loop
                (blockized first, as ``blockize(loop, preserve_unit_iters)`` would).
            tensor_intrin: the name of a registered :class:`~metaschedule.tir.TensorIntrin`.
            preserve_unit_iters: passed to ``blockize`` for a loop.

        Raises:
            ScheduleError: an unknown intrinsic, or a subtree that does not compute its
                description (the message says which loop, operator, buffer or index
                differs) or binds an operand with strides the implementation cannot take.
        """
        intrin = TensorIntrin.get(str(tensor_intrin), allow_missing=True)
        if intrin is None:
            raise TensorizeError(
                f"tensorize: no tensor intrinsic named {tensor_intrin!r}; registered: "
                f"{', '.join(TensorIntrin.names())}"
            )
        if isinstance(block_or_loop, LoopRV):
            block_rv = self._blockize_loop(block_or_loop, bool(preserve_unit_iters))
        elif isinstance(block_or_loop, BlockRV):
            block_rv = block_or_loop
        else:
            raise TensorizeError(
                f"tensorize: expected a BlockRV or a LoopRV, got {block_or_loop!r}"
            )
        fname, realize = self._block(block_rv)
        if block_rv is not block_or_loop:
            del self._rvs[block_rv]  # TVM's tensorize of a loop returns no block
        block = realize.block
        ana = Analyzer()
        for iv in block.iter_vars:
            ana.bind(iv.var, iv.dom)
        bound = match_description(intrin.name, intrin.desc, block, ana)
        new_block = _instantiate(intrin, block, bound, ana)
        self.state.replace(
            fname, {realize: BlockRealize(realize.iter_values, realize.predicate, new_block)}
        )
        self._record(
            "Tensorize",
            [block_or_loop],
            [intrin.name, bool(preserve_unit_iters)],
            [],
        )


def _instantiate(
    intrin: TensorIntrin, block: Block, bound: list[BoundBuffer], ana: Analyzer
) -> Block:
    """``block`` with the implementation, its parameters bound, as its body."""
    impl = intrin.impl
    pmap = dict(zip(impl.params, bound))
    _check_strides(intrin, impl, pmap, ana)
    body = _Bind(pmap, ana).visit(description_body(impl))
    root = impl.body.block if isinstance(impl.body, BlockRealize) else None
    reads, writes = block.reads, block.writes
    if root is not None and not root.iter_vars:
        reads = tuple(pmap[r.buffer].region(r.region, ana) for r in root.reads)
        writes = tuple(pmap[w.buffer].region(w.region, ana) for w in root.writes)
    return Block(
        iter_vars=block.iter_vars,
        reads=reads,
        writes=writes,
        name_hint=block.name_hint,
        body=body,
        init=None,
        alloc_buffers=block.alloc_buffers,
        annotations=block.annotations,
    )


def _check_strides(intrin: TensorIntrin, impl: PrimFunc, pmap: dict, ana: Analyzer) -> None:
    asked: set[tuple[Buffer, int]] = set()

    def visit(node):
        if is_buffer_stride(node):
            asked.add(stride_axis(node))

    post_order_visit(impl.body, visit)
    for k, (param, bb) in enumerate(pmap.items()):
        shape = param.static_shape()
        for axis, ext in enumerate(shape):
            if ext == 1 or (param, axis) in asked:
                continue
            want, got = compact_stride(param, axis), bb.stride(axis)
            if not ana.can_prove_equal(got, want):
                raise TensorizeError(
                    f"tensorize {intrin.name}: operand {k} ({param.name}) must be compact "
                    f"along its axis {axis} (stride {want}), but the region of buffer "
                    f"{bb.buffer.name} bound to it has stride {got} there; change the "
                    "buffer's layout (transform_layout) or copy it (cache_read) first"
                )


class _Bind(Mutator):
    """The implementation's body with its parameters bound to the matched regions."""

    def __init__(self, pmap: dict[Buffer, BoundBuffer], ana: Analyzer):
        self.pmap, self.ana = pmap, ana

    def visit_BufferLoad(self, node: E.BufferLoad):
        node = self.generic_visit(node)
        bb = self.pmap.get(node.buffer)
        return node if bb is None else E.BufferLoad(bb.buffer, bb.index(node.indices, self.ana))

    def visit_BufferStore(self, node: BufferStore):
        node = self.generic_visit(node)
        bb = self.pmap.get(node.buffer)
        if bb is None:
            return node
        return BufferStore(bb.buffer, node.value, bb.index(node.indices, self.ana))

    def visit_Call(self, node: E.Call):
        if is_buffer_stride(node):
            buf, axis = stride_axis(node)
            bb = self.pmap.get(buf)
            return bb.stride(axis) if bb is not None else const(compact_stride(buf, axis))
        return self.generic_visit(node)

    def visit_For(self, node: For):  # a loop of the implementation: a fresh variable per use
        fresh = Var(node.loop_var.name, node.loop_var.dtype)
        return self.generic_visit(substitute(node, {node.loop_var: fresh}))

    def visit_Block(self, node: Block) -> Stmt:
        raise TensorizeError(
            "tensorize: an implementation's body must not contain blocks; write it as "
            "calls (and loops) over its parameters"
        )


register_inst_kind(
    InstructionKind(
        "Tensorize",
        "tensorize",
        inputs=("block_or_loop",),
        attrs=("tensor_intrin", "preserve_unit_iters"),
    )
)

__all__ = ["TensorizeMixin"]
