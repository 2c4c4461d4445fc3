"""Warp-shuffle steps for cross-thread reductions (``__shfl_down_sync``).

The threads of a warp (32 consecutive linear thread indices) can read each other's
registers without shared memory or a block barrier. A reduction over ``n`` threads of
``threadIdx.x`` (``n`` a power of two, the whole launch extent of ``threadIdx.x``) folds
in halving steps::

    shfl[0] = T.tvm_warp_shuffle_down(mask, acc[0], n // 2, n)
    acc[0] = f(acc[0], shfl[0])
    ...                                        # offsets n // 4, ..., 1

after which lane 0 of each group of ``n`` lanes holds the group's result. For ``n`` a
multiple of 32, lane 0 of every warp leaves its partial in shared memory, and after a
barrier the first warp of the group folds the ``n // 32`` partials the same way.

The intrinsic is ``Call(dtype, "tvm_warp_shuffle_down", (mask, value, offset, width))``:
the CUDA code generator prints ``__shfl_down_sync``, the GPU emulator exchanges the
lanes' values at the call (every lane named in ``mask`` must reach it together).
"""

from __future__ import annotations

from collections.abc import Callable

from ..buffer import Buffer
from ..expr import EQ, LT, BufferLoad, Call, FloorDiv, FloorMod, PrimExpr, Var, const
from ..stmt import BufferStore, IfThenElse, Stmt, seq

__all__ = [
    "WARP_SHUFFLE_DOWN",
    "WARP_SIZE",
    "is_warp_shuffle",
    "shuffle_steps",
    "warp_shuffle_down",
    "warp_tree",
]

#: The intrinsic name of a shuffle.
WARP_SHUFFLE_DOWN = "tvm_warp_shuffle_down"
#: Threads per warp on every NVIDIA GPU.
WARP_SIZE = 32

Combine = Callable[[PrimExpr, PrimExpr], PrimExpr]


def warp_shuffle_down(mask: int, value: PrimExpr, offset: int, width: int) -> Call:
    """``value`` of the lane ``offset`` above (within segments of ``width`` lanes)."""
    return Call(
        value.dtype,
        WARP_SHUFFLE_DOWN,
        (const(mask, "int64"), value, const(offset, "int32"), const(width, "int32")),
    )


def is_warp_shuffle(value: object) -> bool:
    return isinstance(value, Call) and value.op == WARP_SHUFFLE_DOWN


def shuffle_steps(acc: Buffer, shfl: Buffer, combine: Combine, width: int, mask: int) -> list[Stmt]:
    """Fold ``acc[0]`` over segments of ``width`` lanes; lane 0 of each ends with the result."""
    zero = const(0, "int32")
    mine = BufferLoad(acc, (zero,))
    out: list[Stmt] = []
    offset = width // 2
    while offset >= 1:
        out.append(BufferStore(shfl, warp_shuffle_down(mask, mine, offset, width), (zero,)))
        out.append(BufferStore(acc, combine(mine, BufferLoad(shfl, (zero,))), (zero,)))
        offset //= 2
    return out


def warp_tree(
    tx: Var,
    n: int,
    acc: Buffer,
    shfl: Buffer,
    part: Buffer | None,
    slot: tuple[PrimExpr, ...],
    combine: Combine,
    mask: int,
) -> list[Stmt]:
    """The shuffle reduction of ``acc[0]`` over the ``n`` threads ``tx`` (see the module
    docstring); ``part`` (shared, ``slot + (n // 32,)``) is needed when ``n > 32``. Lane
    ``tx == 0`` ends with the result in ``acc[0]``."""
    zero = const(0, "int32")
    if n <= WARP_SIZE:
        return shuffle_steps(acc, shfl, combine, n, mask)
    assert part is not None and n % WARP_SIZE == 0
    warps = n // WARP_SIZE
    w = const(WARP_SIZE, tx.dtype)
    steps = shuffle_steps(acc, shfl, combine, WARP_SIZE, mask)
    steps.append(
        IfThenElse(
            EQ(FloorMod(tx, w), const(0, tx.dtype)),
            BufferStore(part, BufferLoad(acc, (zero,)), (*slot, FloorDiv(tx, w))),
        )
    )
    # the first warp of the group folds the partials (each segment of `warps` lanes
    # reads all of them, so no identity element is needed)
    second = [
        BufferStore(acc, BufferLoad(part, (*slot, FloorMod(tx, const(warps, tx.dtype)))), (zero,)),
        *shuffle_steps(acc, shfl, combine, warps, mask),
    ]
    steps.append(IfThenElse(LT(tx, w), seq(*second)))
    return steps
