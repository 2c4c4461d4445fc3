"""Small C building blocks shared by the scalar and the vector code generators.

``Helpers`` collects the ``static inline`` functions and vector typedefs a source
file needs, each emitted once, in first-use order. ``c_literal`` spells constants;
``scalar_call`` spells math intrinsics for one value. A :class:`Dialect` says how the
source spells what differs between C and CUDA C (an inline function, float16), so each
back end writes its own spelling and no text is re-edited afterwards.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..tir.dtype import c_type, nbytes
from .c_vmath import VECTOR_MATH

#: Short names used in helper and vector type names.
SHORT = {
    "bool": "b8",
    "int8": "i8",
    "int16": "i16",
    "int32": "i32",
    "int64": "i64",
    "uint8": "u8",
    "float16": "f16",
    "float32": "f32",
    "float64": "f64",
}
_INT_OF_BITS = {8: "int8", 16: "int16", 32: "int32", 64: "int64"}

HEADER = """\
#include <stdint.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
"""


@dataclass(frozen=True)
class Dialect:
    """How a back end spells an inline helper function and the float16 type."""

    inline: str = "static inline"
    float16: str = "_Float16"

    def ctype(self, dtype: str) -> str:
        """The C type of ``dtype`` in this dialect."""
        return self.float16 if dtype == "float16" else c_type(dtype)


#: GCC's C (the CPU back end)
C_DIALECT = Dialect()
#: CUDA C (device helpers, ``half`` from cuda_fp16.h)
CUDA_DIALECT = Dialect(inline="static __device__ __forceinline__", float16="half")


class Helpers:
    """An ordered set of named C snippets (typedefs and ``static inline`` functions),
    spelled in ``dialect``."""

    def __init__(self, dialect: Dialect = C_DIALECT) -> None:
        self._code: dict[str, str] = {}
        self.dialect = dialect

    def ctype(self, dtype: str) -> str:
        """The C type of ``dtype`` in this source's dialect."""
        return self.dialect.ctype(dtype)

    def need(self, name: str, code: str) -> str:
        self._code.setdefault(name, code)
        return name

    def snapshot(self) -> dict[str, str]:
        return dict(self._code)

    def restore(self, snap: dict[str, str]) -> None:
        self._code = dict(snap)

    def source(self) -> str:
        return "\n".join(self._code.values())

    # scalar helpers -----------------------------------------------------------------
    def minmax(self, which: str, dtype: str) -> str:
        t, s = self.ctype(dtype), SHORT[dtype]
        op = "<" if which == "min" else ">"
        return self.need(
            f"ms_{which}_{s}",
            f"{self.dialect.inline} {t} ms_{which}_{s}({t} a, {t} b) "
            f"{{ return a {op} b ? a : b; }}\n",
        )

    def floordiv(self, which: str, dtype: str) -> str:
        t, s = self.ctype(dtype), SHORT[dtype]
        fix = "q - 1" if which == "div" else "r + b"
        ret = "q" if which == "div" else "r"
        return self.need(
            f"ms_floor{which}_{s}",
            f"{self.dialect.inline} {t} ms_floor{which}_{s}({t} a, {t} b) {{\n"
            f"  {t} q = a / b, r = a % b;\n"
            f"  return (r != 0 && ((r < 0) != (b < 0))) ? {fix} : {ret};\n}}\n",
        )

    # vector types and helpers ------------------------------------------------------------
    def vtype(self, dtype: str, lanes: int) -> str:
        name = f"ms_{SHORT[dtype]}x{lanes}"
        return self.need(
            name,
            f"typedef {self.ctype(dtype)} {name} "
            f"__attribute__((vector_size({nbytes(dtype) * lanes})));\n",
        )

    def mask_type(self, bits: int, lanes: int) -> str:
        return self.vtype(_INT_OF_BITS[bits], lanes)

    def vload(self, dtype: str, lanes: int) -> str:
        vt, t = self.vtype(dtype, lanes), self.ctype(dtype)
        name = f"ms_load_{SHORT[dtype]}x{lanes}"
        return self.need(
            name,
            f"{self.dialect.inline} {vt} {name}(const {t}* p) {{\n"
            f"  {vt} r;\n  __builtin_memcpy(&r, p, sizeof r);\n  return r;\n}}\n",
        )

    def vstore(self, dtype: str, lanes: int) -> str:
        vt, t = self.vtype(dtype, lanes), self.ctype(dtype)
        name = f"ms_store_{SHORT[dtype]}x{lanes}"
        return self.need(
            name,
            f"{self.dialect.inline} void {name}({t}* p, {vt} v) "
            "{ __builtin_memcpy(p, &v, sizeof v); }\n",
        )

    def vbroadcast(self, dtype: str, lanes: int) -> str:
        vt, t = self.vtype(dtype, lanes), self.ctype(dtype)
        name = f"ms_bcast_{SHORT[dtype]}x{lanes}"
        # an initializer list: GCC turns it into one vbroadcast, whereas a lane-by-lane
        # loop into a vector variable becomes one masked insert per lane
        xs = ", ".join(["x"] * lanes)
        inline = self.dialect.inline
        return self.need(name, f"{inline} {vt} {name}({t} x) {{ return ({vt}){{{xs}}}; }}\n")

    def vhsum(self, dtype: str, lanes: int) -> str:
        """The sum of a vector's lanes, added pairwise (halves, then quarters, ...)."""
        vt, t = self.vtype(dtype, lanes), self.ctype(dtype)
        name = f"ms_hsum_{SHORT[dtype]}x{lanes}"
        if lanes == 2:
            body = "return v[0] + v[1];"
        else:
            half, ht = self.vhsum(dtype, lanes // 2), self.vtype(dtype, lanes // 2)
            body = (
                f"{ht} lo, hi;\n  __builtin_memcpy(&lo, &v, sizeof lo);\n"
                f"  __builtin_memcpy(&hi, (const char*)&v + sizeof lo, sizeof hi);\n"
                f"  return {half}(lo + hi);"
            )
        return self.need(name, f"{self.dialect.inline} {t} {name}({vt} v) {{\n  {body}\n}}\n")

    def viota(self, dtype: str, lanes: int) -> str:
        vt = self.vtype(dtype, lanes)
        name = f"ms_iota_{SHORT[dtype]}x{lanes}"
        values = ", ".join(str(i) for i in range(lanes))
        return self.need(
            name, f"{self.dialect.inline} {vt} {name}(void) {{ return ({vt}){{{values}}}; }}\n"
        )

    def vselect(self, dtype: str, lanes: int) -> str:
        """``select(mask, t, f)`` lane-wise; the mask has the width of ``dtype``."""
        vt = self.vtype(dtype, lanes)
        mt = self.mask_type(nbytes(dtype) * 8, lanes)
        name = f"ms_select_{SHORT[dtype]}x{lanes}"
        return self.need(
            name,
            f"{self.dialect.inline} {vt} {name}({mt} m, {vt} t, {vt} f) {{\n"
            f"  return ({vt})((m & ({mt})t) | (~m & ({mt})f));\n}}\n",
        )

    def vminmax(self, which: str, dtype: str, lanes: int) -> str:
        """``a < b ? a : b`` (``>`` for max) lane-wise: one x86 ``vminps``/``vmaxps``
        where the compiler targets it (:func:`_x86_minmax`), else a compare and select
        (which GCC does not turn into the instruction: measured 1.5x slower in a pool)."""
        vt, sel = self.vtype(dtype, lanes), self.vselect(dtype, lanes)
        op = "<" if which == "min" else ">"
        name = f"ms_{which}_{SHORT[dtype]}x{lanes}"
        generic = f"return {sel}(a {op} b, a, b);"
        native = _x86_minmax(which, dtype, lanes)
        if not native:
            body = f" {generic} "
        else:
            body = "\n" + "".join(
                f"#{'if' if k == 0 else 'elif'} {guard}\n  return {call};\n"
                for k, (guard, call) in enumerate(native)
            )
            body += f"#else\n  {generic}\n#endif\n"
        return self.need(name, f"{self.dialect.inline} {vt} {name}({vt} a, {vt} b) {{{body}}}\n")

    def vcall(self, op: str, dtype: str, lanes: int, nargs: int) -> str:
        """A math call on a vector: vector code for float32 ``exp``, ``tanh`` and
        ``sigmoid`` (:mod:`.c_vmath`), else lane by lane (the C library has no portable
        vector math)."""
        if dtype == "float32" and op in VECTOR_MATH:
            return VECTOR_MATH[op](self, lanes)
        vt = self.vtype(dtype, lanes)
        name = f"ms_{op}_{SHORT[dtype]}x{lanes}"
        params = ", ".join(f"{vt} x{i}" for i in range(nargs))
        lane_args = [f"x{i}[l]" for i in range(nargs)]
        lane = scalar_call(op, dtype, lane_args, self.dialect)
        return self.need(
            name,
            f"{self.dialect.inline} {vt} {name}({params}) {{\n  {vt} r;\n"
            f"  for (int l = 0; l < {lanes}; ++l) r[l] = {lane};\n"
            f"  return r;\n}}\n",
        )


# ----------------------------------------------------------------------------- scalars

_MATH = {
    "exp": "exp",
    "log": "log",
    "sqrt": "sqrt",
    "tanh": "tanh",
    "erf": "erf",
    "fabs": "fabs",
    "floor": "floor",
    "ceil": "ceil",
    "round": "nearbyint",
    "sin": "sin",
    "cos": "cos",
    "exp2": "exp2",
    "log2": "log2",
    "trunc": "trunc",
    "pow": "pow",
}


def scalar_call(op: str, dtype: str, args: list[str], dialect: Dialect = C_DIALECT) -> str:
    """C for the math intrinsic ``op`` on already-spelled arguments of float ``dtype``."""
    if dtype == "float16":  # compute in float, round once
        inner = scalar_call(op, "float32", [f"(float)({a})" for a in args])
        return f"({dialect.float16})({inner})"
    suffix = "f" if dtype == "float32" else ""
    one = "1.0f" if dtype == "float32" else "1.0"
    if op == "rsqrt":
        return f"({one} / sqrt{suffix}({args[0]}))"
    if op == "sigmoid":
        return f"({one} / ({one} + exp{suffix}(-({args[0]}))))"
    if op not in _MATH:
        raise ValueError(
            f"unknown intrinsic {op!r}; the C code generator supports: "
            f"{', '.join(sorted([*_MATH, 'rsqrt', 'sigmoid']))}"
        )
    return f"{_MATH[op]}{suffix}({', '.join(args)})"


def c_literal(value: float | bool, dtype: str, dialect: Dialect = C_DIALECT) -> str:
    """A C constant of ``dtype``; float32 constants are rounded like ``np.float32``."""
    if dtype == "bool":
        return "1" if value else "0"
    if dtype.startswith("float"):
        v = float(value)
        if dtype != "float64":
            v = float(np.float32(v)) if dtype == "float32" else float(np.float16(v))
        if math.isnan(v):
            text = "NAN"
        elif math.isinf(v):
            text = "INFINITY" if v > 0 else "-INFINITY"
        else:
            text = repr(v)
            if "e" not in text and "." not in text:
                text += ".0"
            text += "f" if dtype in ("float32", "float16") else ""
        if dtype == "float16":
            return f"(({dialect.float16}){text})"
        if dtype == "float64" and text in ("NAN", "INFINITY", "-INFINITY"):
            return f"((double){text})"
        return text if not text.startswith("-") else f"({text})"
    v = int(value)
    if dtype == "int64":
        if v == -(2**63):
            return "(-9223372036854775807LL - 1)"
        return f"{v}LL" if v >= 0 else f"({v}LL)"
    if dtype == "int32" and v == -(2**31):
        return "(-2147483647 - 1)"
    text = str(v) if v >= 0 else f"({v})"
    if dtype == "int32":
        return text
    return f"(({c_type(dtype)}){text})"


def c_comment_text(text: object) -> str:
    """``text`` made safe inside a C or CUDA comment (``//`` or ``/* */``) or string
    literal: each character outside printable ASCII (newlines, NUL and other control
    characters, non-ASCII such as bidirectional overrides), each backslash and double
    quote, the second ``?`` of ``??`` (a trigraph) and the ``/`` of ``*/`` is written
    ``<U+XXXX>``; other text is returned unchanged.

    Every comment the code generators write with a name in it goes through here: names
    come from IR that may have been loaded from a file, and a newline in one would end the
    comment and have the rest compiled.
    """
    out, prev = [], ""
    for ch in str(text):
        code = ord(ch)
        unsafe = not 0x20 <= code < 0x7F or ch in '\\"'
        if unsafe or (ch == "?" and prev == "?") or (ch == "/" and prev == "*"):
            out.append(f"<U+{code:04X}>")
        else:
            out.append(ch)
        prev = ch
    return "".join(out)


def _x86_minmax(which: str, dtype: str, lanes: int) -> list[tuple[str, str]]:
    """Preprocessor guards and compiler builtins of x86's packed min/max for ``dtype`` x
    ``lanes`` (empty: none). ``MAXPS a, b`` is exactly ``a > b ? a : b`` (a NaN or equal
    lanes give ``b``; ``MINPS`` likewise with ``<``), the meaning of TIR's max/min here, so
    the instruction needs no fast-math assumption."""
    suffix = {"float32": "ps", "float64": "pd"}.get(dtype)
    if suffix is None:
        return []
    bits, op = lanes * nbytes(dtype) * 8, f"{which}{suffix}"
    if bits == 128:
        feature = "__SSE__" if dtype == "float32" else "__SSE2__"
        return [(f"defined({feature})", f"__builtin_ia32_{op}(a, b)")]
    if bits == 256:
        return [("defined(__AVX__)", f"__builtin_ia32_{op}256(a, b)")]
    if bits == 512:  # GCC's builtin takes a pass-through vector and a mask, clang's not
        return [
            ("defined(__AVX512F__) && defined(__clang__)", f"__builtin_ia32_{op}512(a, b, 4)"),
            (
                "defined(__AVX512F__) && defined(__GNUC__)",
                f"__builtin_ia32_{op}512_mask(a, b, a, -1, 4)",
            ),
        ]
    return []
