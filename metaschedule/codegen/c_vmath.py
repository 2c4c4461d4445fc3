"""Vector math for float32 lanes: ``exp``, ``tanh`` and ``sigmoid`` as vector code.

The C library computes ``expf``/``tanhf`` one value at a time, so a vectorized softmax or
GELU spends most of its time in lane-by-lane calls. These helpers compute every lane at
once with GCC vector extensions (the compiler emits SIMD instructions for them):

* ``exp(x)``: ``x = n ln2 + r`` with ``n = round(x / ln2)`` and ``|r| <= ln2 / 2`` (``ln2``
  split in two constants so that ``n ln2`` is exact), ``e^r`` by a degree-7 polynomial
  (the coefficients of the Cephes library's ``expf``), times ``2^n`` built from
  exponent bits in two halves (so that results down to the subnormal range stay
  accurate). Beyond the float range: ``inf`` above 88.72, ``0`` below -103.97; NaN stays
  NaN. Error: a few units in the last place.
* ``tanh(x)``: an odd polynomial for ``|x| < 0.625`` (Cephes' ``tanhf``), else
  ``1 - 2 / (e^{2|x|} + 1)`` with the sign of ``x``: relative error near 1e-7 everywhere,
  exactly ``+-1`` for large ``|x|``, NaN for NaN.
* ``sigmoid(x)``: ``1 / (1 + e^{-|x|})`` for ``x >= 0``, else ``e^{-|x|} / (1 + e^{-|x|})``,
  with ``e^{-|x|}`` by the same polynomial but no overflow to handle (``|x|`` clamped
  where the result leaves the normal range, ``0`` below -88, NaN stays NaN).

``tests/codegen/test_vmath.py`` checks them against numpy over the whole float range.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

__all__ = ["VECTOR_MATH"]


class Helpers(Protocol):
    """The part of :class:`.c_helpers.Helpers` these functions use (a protocol, so that
    this module does not import the one that imports it)."""

    def need(self, name: str, code: str) -> str: ...

    def vtype(self, dtype: str, lanes: int) -> str: ...

    def vbroadcast(self, dtype: str, lanes: int) -> str: ...


def _int_type(h: Helpers, lanes: int) -> str:
    return h.vtype("int32", lanes)


def _exp_poly(vt: str, b: str) -> str:
    """C lines computing ``p = e^r`` for ``|r| <= ln2 / 2`` (Cephes' ``expf`` polynomial)."""
    return f"""  {vt} p = {b}(1.9875691500e-4f);
  p = p * r + {b}(1.3981999507e-3f);
  p = p * r + {b}(8.3334519073e-3f);
  p = p * r + {b}(4.1665795894e-2f);
  p = p * r + {b}(1.6666665459e-1f);
  p = p * r + {b}(5.0000001201e-1f);
  p = p * r * r + r + {b}(1.0f);"""


def vexp(h: Helpers, lanes: int) -> str:
    vt, it = h.vtype("float32", lanes), _int_type(h, lanes)
    name = f"ms_vexp_f32x{lanes}"
    b = h.vbroadcast("float32", lanes)
    bi = h.vbroadcast("int32", lanes)
    code = f"""static inline {vt} {name}({vt} x) {{
  {vt} hi = {b}(88.8f), lo = {b}(-104.0f);
  {it} above = ({it})(x > hi), below = ({it})(x < lo);
  {vt} xc = ({vt})((above & ({it})hi) | (~above & ({it})x));
  xc = ({vt})((below & ({it})lo) | (~below & ({it})xc));
  {vt} t = xc * {b}(1.44269504088896341f) + {b}(0.5f);
  {it} n = __builtin_convertvector(t, {it});
  n -= ({it})(__builtin_convertvector(n, {vt}) > t) & {bi}(1);   /* floor */
  {vt} fn = __builtin_convertvector(n, {vt});
  {vt} r = xc - fn * {b}(0.693359375f) - fn * {b}(-2.12194440e-4f);
{_exp_poly(vt, b)}
  {it} n1 = n >> 1, n2 = n - n1;
  {vt} s1 = ({vt})((n1 + {bi}(127)) << 23), s2 = ({vt})((n2 + {bi}(127)) << 23);
  {vt} y = p * s1 * s2;
  {it} over = ({it})(x > {b}(88.7228391f)), under = ({it})(x < {b}(-103.972077f));
  y = ({vt})((over & ({it}){b}(__builtin_inff())) | (~over & ({it})y));
  y = ({vt})(~under & ({it})y);
  {it} nan = ({it})(x != x);
  return ({vt})((nan & ({it})x) | (~nan & ({it})y));
}}
"""
    return h.need(name, code)


def vtanh(h: Helpers, lanes: int) -> str:
    vt, it = h.vtype("float32", lanes), _int_type(h, lanes)
    name = f"ms_vtanh_f32x{lanes}"
    b = h.vbroadcast("float32", lanes)
    exp = vexp(h, lanes)
    code = f"""static inline {vt} {name}({vt} x) {{
  {it} sign = ({it})x & {h.vbroadcast("int32", lanes)}((int32_t)0x80000000u);
  {vt} ax = ({vt})(({it})x & ~{h.vbroadcast("int32", lanes)}((int32_t)0x80000000u));
  {vt} z = x * x;
  {vt} p = {b}(-5.70498872745e-3f);
  p = p * z + {b}(2.06390887954e-2f);
  p = p * z + {b}(-5.37397155531e-2f);
  p = p * z + {b}(1.33314422036e-1f);
  p = p * z + {b}(-3.33332819422e-1f);
  {vt} small = p * z * x + x;
  {vt} big = {b}(1.0f) - {b}(2.0f) / ({exp}(ax + ax) + {b}(1.0f));
  big = ({vt})(({it})big | sign);
  {it} is_small = ({it})(ax < {b}(0.625f));
  return ({vt})((is_small & ({it})small) | (~is_small & ({it})big));
}}
"""
    return h.need(name, code)


def vsigmoid(h: Helpers, lanes: int) -> str:
    """``1 / (1 + e^{-|x|})`` or ``e^{-|x|} / (1 + e^{-|x|})`` by the sign of ``x``: the
    exponential of ``-|x|`` (clamped where the result leaves the normal range) never
    overflows, so it needs none of ``exp``'s edge handling (about half its instructions)."""
    vt, it = h.vtype("float32", lanes), _int_type(h, lanes)
    name = f"ms_vsigmoid_f32x{lanes}"
    b = h.vbroadcast("float32", lanes)
    bi = h.vbroadcast("int32", lanes)
    code = f"""static inline {vt} {name}({vt} x) {{
  {it} neg = ({it})(x < {b}(0.0f)), nan = ({it})(x != x), tiny = ({it})(x < {b}(-88.0f));
  {vt} ax = ({vt})(({it})x & {bi}(0x7fffffff));
  {it} big = ({it})(ax > {b}(87.3365402f));       /* e^-|x| below FLT_MIN: clamp */
  ax = ({vt})((big & ({it}){b}(87.3365402f)) | (~big & ({it})ax));
  {vt} t = ax * {b}(-1.44269504088896341f) + {b}(12582912.0f);  /* rounds: 1.5 * 2^23 */
  {it} n = ({it})t - ({it}){b}(12582912.0f);
  {vt} fn = t - {b}(12582912.0f);
  {vt} r = -ax - fn * {b}(0.693359375f) - fn * {b}(-2.12194440e-4f);
{_exp_poly(vt, b)}
  {vt} e = ({vt})(({it})p + ((n + {bi}(1)) << 23)) * {b}(0.5f);  /* p 2^n, n >= -126 */
  {vt} s = {b}(1.0f) / ({b}(1.0f) + e);
  {vt} y = ({vt})((neg & ({it})(e * s)) | (~neg & ({it})s));
  y = ({vt})(~tiny & ({it})y);
  return ({vt})((nan & ({it})x) | (~nan & ({it})y));
}}
"""
    return h.need(name, code)


#: float32 intrinsics with a vector implementation: op -> emitter of its helper.
VECTOR_MATH: dict[str, Callable[[Helpers, int], str]] = {
    "exp": vexp,
    "tanh": vtanh,
    "sigmoid": vsigmoid,
}
