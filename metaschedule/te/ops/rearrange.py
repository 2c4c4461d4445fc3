"""Injective rearrangements: padding by reflection or by the edge, tile, depth_to_space
and space_to_depth (one block each)."""

from __future__ import annotations

from collections.abc import Sequence

from ...tir import op as _op
from ...tir.expr import PrimExpr, cast, const
from ..tensor import Tensor, compute
from ._util import check_tensor
from .transform import pad

PAD_MODES = ("constant", "reflect", "edge")


def _reflect(j: PrimExpr, n: int) -> PrimExpr:
    # j in [-(n-1), 2(n-1)]: mirror at 0 and at n - 1 (the edge is not repeated)
    a = _op.abs(j)
    return _op.if_then_else(a > const(n - 1), const(2 * (n - 1)) - a, a)


def pad_mode(
    data: Tensor,
    pad_before: Sequence[int],
    pad_after: Sequence[int],
    mode: str = "constant",
    pad_value: float = 0.0,
    name: str = "T_pad",
) -> Tensor:
    """``data`` padded per axis: ``constant`` (``pad_value``), ``reflect`` (mirrored
    without repeating the edge, as numpy's ``reflect``) or ``edge`` (the edge repeated)."""
    check_tensor(data, "pad", "data")
    before = tuple(int(p) for p in pad_before)
    after = tuple(int(p) for p in pad_after)
    if mode == "constant":
        return pad(data, before, after, pad_value, name=name)
    if mode not in PAD_MODES:
        raise ValueError(f"pad: mode {mode!r} is not one of {', '.join(PAD_MODES)}")
    if len(before) != data.ndim or len(after) != data.ndim:
        raise ValueError(f"pad: {data.shape} with pads {before}, {after}")
    if any(p < 0 for p in before + after):
        raise ValueError(f"pad: negative padding {before}, {after} (mode {mode})")
    for n, b, a in zip(data.shape, before, after):
        if mode == "reflect" and (b or a) and max(b, a) > n - 1:
            raise ValueError(f"pad: reflect padding {max(b, a)} needs an axis longer than {n}")
    shape = tuple(s + b + a for s, b, a in zip(data.shape, before, after))

    def body(*idx):
        src = []
        for i, n, b, a in zip(idx, data.shape, before, after):
            if not (b or a):
                src.append(i)
                continue
            j = i - b if b else i
            if mode == "edge":
                src.append(_op.min(_op.max(j, const(0)), const(n - 1)))
            else:
                src.append(_reflect(j, n))
        return data[tuple(src)]

    return compute(shape, body, name=name, tag="injective,pad")


def tile(x: Tensor, repeats: Sequence[int], name: str = "T_tile") -> Tensor:
    """``numpy.tile`` with one repeat count per axis of ``x``."""
    check_tensor(x, "tile", "x")
    reps = tuple(int(r) for r in repeats)
    if len(reps) != x.ndim or any(r < 0 for r in reps):
        raise ValueError(f"tile: repeats {reps} for a tensor of shape {x.shape}")
    shape = tuple(s * r for s, r in zip(x.shape, reps))

    def body(*idx):
        return x[
            tuple(
                i if r == 1 else (const(0) if s == 1 else _op.floormod(i, s))
                for i, s, r in zip(idx, x.shape, reps)
            )
        ]

    return compute(shape, body, name=name, tag="injective")


def depth_to_space(x: Tensor, block: int, mode: str = "DCR", name="T_depth_to_space") -> Tensor:
    """NCHW ``[N, C, H, W]`` -> ``[N, C / b^2, H b, W b]`` (ONNX's DepthToSpace; ``CRD``
    is PyTorch's pixel_shuffle)."""
    check_tensor(x, "depth_to_space", "x", ndim=4)
    N, C, H, W = x.shape
    b = int(block)
    if C % (b * b):
        raise ValueError(f"depth_to_space: {C} channels are not a multiple of {b}x{b}")
    if mode not in ("DCR", "CRD"):
        raise ValueError(f"depth_to_space: mode {mode!r} is not DCR or CRD")
    c_out = C // (b * b)

    def body(n, c, y, xx):
        by, bx = _op.floormod(y, b), _op.floormod(xx, b)
        if mode == "DCR":
            src_c = (by * b + bx) * c_out + c
        else:
            src_c = c * (b * b) + by * b + bx
        return x[n, src_c, _op.floordiv(y, b), _op.floordiv(xx, b)]

    return compute((N, c_out, H * b, W * b), body, name=name, tag="injective")


def space_to_depth(x: Tensor, block: int, name: str = "T_space_to_depth") -> Tensor:
    """NCHW ``[N, C, H, W]`` -> ``[N, C b^2, H / b, W / b]`` (ONNX's SpaceToDepth)."""
    check_tensor(x, "space_to_depth", "x", ndim=4)
    N, C, H, W = x.shape
    b = int(block)
    if H % b or W % b:
        raise ValueError(f"space_to_depth: {H}x{W} is not a multiple of {b}")

    def body(n, c, y, xx):
        k = _op.floordiv(c, C)
        return x[n, _op.floormod(c, C), y * b + _op.floordiv(k, b), xx * b + _op.floormod(k, b)]

    return compute((N, C * b * b, H // b, W // b), body, name=name, tag="injective")


def trilu(x: Tensor, upper: bool = True, k: int = 0, name: str = "T_trilu") -> Tensor:
    """The upper (``j - i >= k``) or lower (``j - i <= k``) triangle of the last two
    axes of ``x``, zeros elsewhere (ONNX's Trilu, numpy's triu/tril)."""
    check_tensor(x, "trilu", "x")
    if x.ndim < 2:
        raise ValueError(f"trilu: input {x.shape} has fewer than 2 dimensions")

    def body(*idx):
        i, j = idx[-2], idx[-1]
        keep = (j - i >= k) if upper else (j - i <= k)
        return _op.if_then_else(keep, x[idx], const(0, x.dtype))

    return compute(x.shape, body, name=name, tag="injective")


def gather_elements(
    data: Tensor, indices: Tensor, axis: int = 0, name: str = "T_gather_elements"
) -> Tensor:
    """``out[i] = data[i with axis replaced by indices[i]]`` (ONNX's GatherElements,
    ``torch.gather``); negative indices count from the end."""
    check_tensor(data, "gather_elements", "data")
    check_tensor(indices, "gather_elements", "indices")
    if indices.ndim != data.ndim:
        raise ValueError(
            f"gather_elements: indices {indices.shape} and data {data.shape} differ in rank"
        )
    axis = axis % data.ndim
    n = data.shape[axis]

    def body(*idx):
        j = cast("int32", indices[idx])
        j = _op.if_then_else(j < 0, j + n, j)
        return data[tuple(j if d == axis else v for d, v in enumerate(idx))]

    return compute(indices.shape, body, name=name, tag="injective")
