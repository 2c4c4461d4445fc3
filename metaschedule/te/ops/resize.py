"""Resizing (ONNX's Resize, ATen's upsample): nearest and (multi-)linear interpolation
over any axes, one block; layout-agnostic (each axis has its own output size and scale).

The source coordinate of output index ``i`` on an axis (input size ``n``, output size
``m``, scale ``s``) follows ONNX's ``coordinate_transformation_mode``, in float32
arithmetic as onnxruntime computes it:

* ``half_pixel``: ``(i + 0.5) / s - 0.5``; ``pytorch_half_pixel``: the same, but 0 when
  ``m == 1``; ``half_pixel_symmetric``: centred on the input's middle;
* ``align_corners``: ``i * (n - 1) / (m - 1)`` (0 when ``m == 1``);
* ``asymmetric``: ``i / s``.

Nearest rounds it by ``nearest_mode`` (``round_prefer_floor``, ``round_prefer_ceil``,
``floor``, ``ceil``) and clamps to the input; linear clamps it to ``[0, n - 1]`` and
blends the two neighbours.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...tir import op as _op
from ...tir.expr import PrimExpr, cast, const
from ..tensor import Tensor, compute
from ._util import check_tensor

COORDINATE_MODES = (
    "half_pixel",
    "pytorch_half_pixel",
    "half_pixel_symmetric",
    "align_corners",
    "asymmetric",
)
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def source_coordinate(i: PrimExpr, n: int, m: int, scale: float, mode: str) -> PrimExpr:
    """The float32 input coordinate output index ``i`` maps to (see the module doc)."""
    f = cast("float32", i)
    half = const(0.5, "float32")
    inv = const(1.0 / scale, "float32")
    if mode == "asymmetric":
        return f * inv
    if mode == "half_pixel":
        return (f + half) * inv - half
    if mode == "pytorch_half_pixel":
        return (f + half) * inv - half if m > 1 else const(0.0, "float32")
    if mode == "half_pixel_symmetric":
        adj = m / (scale * n)
        off = const(n / 2.0 * (1 - adj), "float32")
        return off + (f + half) * inv - half
    if mode == "align_corners":
        return f * const((n - 1) / (m - 1), "float32") if m > 1 else const(0.0, "float32")
    raise ValueError(
        f"resize: coordinate_transformation_mode {mode!r} is not one of "
        f"{', '.join(COORDINATE_MODES)}"
    )


def _nearest(c: PrimExpr, mode: str) -> PrimExpr:
    half = const(0.5, "float32")
    if mode == "floor":
        r = _op.floor(c)
    elif mode == "ceil":
        r = _op.ceil(c)
    elif mode == "round_prefer_floor":  # ties go down
        r = _op.ceil(c - half)
    elif mode == "round_prefer_ceil":
        r = _op.floor(c + half)
    else:
        raise ValueError(f"resize: nearest_mode {mode!r} is not one of {', '.join(NEAREST_MODES)}")
    return cast("int32", r)


def _clamp(v: PrimExpr, n: int) -> PrimExpr:
    return _op.min(_op.max(v, const(0, v.dtype)), const(n - 1, v.dtype))


def resize(
    x: Tensor,
    out_shape: Sequence[int],
    scales: Sequence[float] | None = None,
    mode: str = "nearest",
    coordinate_transformation_mode: str = "half_pixel",
    nearest_mode: str = "round_prefer_floor",
    name: str = "T_resize",
) -> Tensor:
    """``x`` resized to ``out_shape``; ``scales`` (default ``out / in``) per axis enter
    the coordinate transform. ``mode`` is ``nearest`` or ``linear``."""
    check_tensor(x, "resize", "x")
    out_shape = tuple(int(s) for s in out_shape)
    if len(out_shape) != x.ndim:
        raise ValueError(f"resize: out_shape {out_shape} does not match the rank of {x.shape}")
    if scales is None:
        scales = [m / n for m, n in zip(out_shape, x.shape)]
    scales = [float(s) for s in scales]
    if mode not in ("nearest", "linear"):
        raise ValueError(f"resize: mode {mode!r} (nearest and linear are supported)")
    if coordinate_transformation_mode not in COORDINATE_MODES:
        source_coordinate(const(0), 1, 1, 1.0, coordinate_transformation_mode)  # raises
    if mode == "nearest" and nearest_mode not in NEAREST_MODES:
        _nearest(const(0.0, "float32"), nearest_mode)  # raises
    moving = [
        d for d in range(x.ndim) if out_shape[d] != x.shape[d] or scales[d] != 1.0
    ]  # the axes that interpolate; the others are copied
    if mode == "linear" and len(moving) > 3:
        raise ValueError(f"resize: linear interpolation over {len(moving)} axes (at most 3)")
    if not x.dtype.startswith("float") and mode == "linear":
        raise TypeError(f"resize: linear mode needs a float tensor, got {x.dtype}")

    def coord(d: int, i: PrimExpr) -> PrimExpr:
        return source_coordinate(
            i, x.shape[d], out_shape[d], scales[d], coordinate_transformation_mode
        )

    def integer_factor(d: int) -> int | None:
        """``s`` where nearest resizing on axis ``d`` is ``i // s``: an integer scale
        with floor on asymmetric coordinates, or half-pixel ones rounded to nearest
        (their coordinates are never within ``1 / 2s`` of a tie)."""
        s = scales[d]
        if s != int(s) or s < 1 or out_shape[d] != x.shape[d] * int(s):
            return None
        cm = coordinate_transformation_mode
        if (cm == "asymmetric" and nearest_mode == "floor") or (
            cm in ("half_pixel", "pytorch_half_pixel", "half_pixel_symmetric")
            and nearest_mode in ("round_prefer_floor", "round_prefer_ceil")
        ):
            return int(s)
        return None

    def nearest_body(*idx):
        src = list(idx)
        for d in moving:
            k = integer_factor(d)
            if k is not None:  # integer arithmetic, no float coordinates
                src[d] = _op.floordiv(idx[d], k) if k != 1 else idx[d]
            else:
                src[d] = _clamp(_nearest(coord(d, idx[d]), nearest_mode), x.shape[d])
        return x[tuple(src)]

    def linear_body(*idx):
        taps: list[tuple[list[PrimExpr], PrimExpr | None]] = [(list(idx), None)]
        for d in moving:
            n = x.shape[d]
            c = _op.min(
                _op.max(coord(d, idx[d]), const(0.0, "float32")), const(float(n - 1), "float32")
            )
            lo = cast("int32", _op.floor(c))
            hi = _op.min(lo + 1, const(n - 1, "int32"))
            w1 = c - _op.floor(c)
            w0 = const(1.0, "float32") - w1
            if x.dtype != "float32":
                w0, w1 = cast(x.dtype, w0), cast(x.dtype, w1)
            nxt = []
            for src, w in taps:
                for j, wj in ((lo, w0), (hi, w1)):
                    s2 = list(src)
                    s2[d] = j
                    nxt.append((s2, wj if w is None else w * wj))
            taps = nxt
        acc = None
        for src, w in taps:
            term = x[tuple(src)] if w is None else x[tuple(src)] * w
            acc = term if acc is None else acc + term
        return acc

    body = nearest_body if mode == "nearest" else linear_body
    return compute(out_shape, body, name=name, tag="injective,resize")
