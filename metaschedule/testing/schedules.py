"""Hand-written schedules used by the demo, benchmarks and tests."""

from __future__ import annotations

from dataclasses import dataclass

from ..codegen.isa import isa_of
from ..schedule import LoopRV, Schedule
from ..target import Target

#: Vector registers of the ISA by vector width in bytes (AVX-512: 32 zmm, AVX2: 16 ymm).


@dataclass(frozen=True)
class MatmulTiles:
    """Tile sizes of :func:`matmul_schedule` (all divide the loop extents they split).

    ``rows x (vectors * lanes)`` is the register tile; ``row_block x col_block`` the tile
    one parallel iteration computes; ``col_block`` is a multiple of the register tile's
    width, ``row_block`` of its height.
    """

    rows: int
    vectors: int
    lanes: int
    row_block: int
    col_block: int

    @property
    def cols(self) -> int:
        return self.vectors * self.lanes


def _divisor_at_most(n: int, limit: int) -> int:
    """The largest divisor of ``n`` that is at most ``limit`` (at least 1)."""
    for d in range(max(1, min(n, limit)), 0, -1):
        if n % d == 0:
            return d
    return 1


def matmul_tiles(
    target: Target,
    m: int,
    n: int,
    *,
    rows: int | None = None,
    vectors: int | None = None,
    row_block: int = 512,
    col_block: int = 128,
) -> MatmulTiles:
    """Pick a register tile that fits the target's vector registers, and block sizes.

    The tile is ``vectors`` vectors wide (default 2) and as many rows high as the
    register file holds next to them: ``rows * vectors`` accumulators, one broadcast of
    ``A`` and ``vectors`` loads of ``B`` (AVX-512: 8 x 2 of 32 registers, AVX2: 4 x 2 or
    6 x 2 of 16), capped at 8 rows. Every size is shrunk to a divisor of its extent, so
    the splits are exact; ``row_block`` shrinks until there are two parallel tasks per
    core where the rows allow it.
    """
    isa = isa_of(target)
    lanes, regs = isa.lanes("float32"), isa.vector_registers
    if vectors is None:
        vectors = 2
    cols = _divisor_at_most(n, vectors * lanes)
    if cols % lanes == 0:
        vectors = cols // lanes
    else:  # not a whole number of vectors: one vectorized loop of `cols` lanes per row
        vectors, lanes = 1, cols
    if rows is None:
        rows = max(1, (regs - vectors - 1) // vectors)
        rows = min(rows, 8)  # more rows only lengthen the unrolled body
    rows = _divisor_at_most(m, rows)
    row_block = rows * _divisor_at_most(m // rows, max(1, row_block // rows))
    col_block = cols * _divisor_at_most(n // cols, max(1, col_block // cols))
    # at least two parallel tasks per core where the rows allow it (load balance)
    while (m // row_block) * (n // col_block) < 2 * target.num_cores and row_block > rows:
        row_block = rows * _divisor_at_most(m // rows, row_block // rows - 1)
    return MatmulTiles(rows, vectors, lanes, row_block, col_block)


def matmul_schedule(
    sch: Schedule,
    target: Target,
    block: str = "T_matmul_NN",
    *,
    rows: int | None = None,
    vectors: int | None = None,
    row_block: int = 512,
    col_block: int = 128,
    pack_b: bool = True,
) -> Schedule:
    """The classic CPU matmul recipe: packing, register tiling, vectorize, parallel, unroll.

    Loop nest (``i0 j0`` fused and parallel)::

        for i0_j0 in parallel(M / row_block * N / col_block):
            for j1 in range(col_block / cols):
                B_global[k, c] = B[k, j0 * col_block + j1 * cols + c]    # pack a K x cols panel
                for i1 in range(row_block / rows):
                    C_local = 0                                        # rows x cols registers
                    for k in range(K):
                        for i2 in unroll(rows):
                            for c in unroll(vectors), vectorized(lanes):
                                C_local[i2, c] += A[.., k] * B_global[k, c]
                    C[..] = C_local

    The accumulator tile ``C_local`` (``cache_write`` to "local", written back under
    ``i1``) becomes a small stack array that the C compiler keeps in vector registers;
    ``A`` is read with broadcasts straight from memory; the ``B`` panel
    (``cache_read`` to "global", computed under ``j1``) is contiguous and stays in L2
    while ``i1`` sweeps the rows of the block. Tile sizes come from :func:`matmul_tiles`.
    """
    b = sch.get_block(block)
    i, j, k = sch.get_loops(b)
    m, n = _extent(sch, i), _extent(sch, j)
    t = matmul_tiles(
        target, m, n, rows=rows, vectors=vectors, row_block=row_block, col_block=col_block
    )
    i0, i1, i2 = sch.split(i, [None, t.row_block // t.rows, t.rows])
    j0, j1, j2 = sch.split(j, [None, t.col_block // t.cols, t.cols])
    sch.reorder(i0, j0, j1, i1, k, i2, j2)
    acc = sch.cache_write(b, 0, "local")
    sch.reverse_compute_at(acc, i1)
    if pack_b:
        panel = sch.cache_read(b, 1, "global")
        sch.compute_at(panel, j1)
        sch.vectorize(sch.get_loops(panel)[-1])  # cols wide: a few vector copies
    sch.decompose_reduction(b, k)
    sch.parallel(sch.fuse(i0, j0))
    sch.unroll(i2)
    j2o, j2i = sch.split(j2, [t.vectors, t.lanes])
    sch.unroll(j2o)
    sch.vectorize(j2i)
    sch.vectorize(sch.get_loops(acc)[-1])
    return sch


def _extent(sch: Schedule, loop: LoopRV) -> int:
    return int(sch.get(loop).extent.value)
