"""C functions that tensor intrinsics call (:mod:`metaschedule.tir.tensor_intrin`).

An implementation's ``Call("int32", "<name>", args)`` is emitted as a call of the
``static inline`` function registered here under that name; its definition (with the
``#include`` it needs) goes into the source file once, and only when it is used.
``address_of(B[i, j])`` arguments become ``&B[<flat index>]``. Each function carries a
``target`` attribute naming the extensions it uses, so it compiles whatever ``-march``
the file gets; the ISA record of the build's target must have them (or the build is a
:class:`~.c_expr.CodegenError`, not a kernel that dies of an illegal instruction).
:func:`usable_tensor_intrins` lists the registered intrinsics a target can run.

The dot products' functions take ``(int32_t* c, const a_t* a, const b_t* b, int32_t ldb)``
(:mod:`metaschedule.tir.tensor_intrin.dot_product`): ``B``'s rows ``ldb`` elements apart,
one vector load when they are packed (``ldb`` equals the row length; the call passes a
constant, so the test folds away).

Each dot product also has a *register form*, ``<name>_acc(acc, a, b, ldb)``, that takes the
``lanes`` int32 accumulators as a vector value and returns them updated: a register tile
of such calls (:mod:`.c_accumulate`) keeps its accumulators in vector variables across the
reduction loops and calls the register form (``C_acc3 = ms_dot_16x4_vnni_acc(C_acc3, &A[..],
&B[..], 4)``), where the pointer form would load and store ``c`` on every call.
:func:`accumulating_call` recognises such a call in a loop body.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..target import Target
from ..tir import expr as E
from ..tir.stmt import Evaluate, Stmt
from ..tir.tensor_intrin import TensorIntrin
from ..tir.tensor_intrin.calls import ADDRESS_OF, BUFFER_STRIDE, compact_stride, stride_axis
from .isa import CpuIsa, isa_of

__all__ = [
    "C_INTRINSICS",
    "CIntrinsic",
    "accumulating_call",
    "register_c_intrinsic",
    "usable_tensor_intrins",
]


@dataclass(frozen=True)
class CIntrinsic:
    """A C function implementations may call.

    Attributes:
        name: the function's name (the ``Call.op`` that calls it).
        arch: ``"x86_64"`` or ``"aarch64"``.
        extensions: what the target's ISA record must have (:meth:`.isa.CpuIsa.has`).
        code: the definition, with the ``#include`` lines it needs.
        lanes: the int32 accumulators the first argument points to (a dot product's
            outputs), 0 for other functions.
        register_form: the registered function that updates those accumulators as a
            vector value (``acc = f(acc, <the other arguments>)``), if any.
    """

    name: str
    arch: str
    extensions: tuple[str, ...]
    code: str
    lanes: int = 0
    register_form: str | None = None

    def missing(self, isa: CpuIsa) -> str | None:
        """Why ``isa`` cannot run the function (None: it can)."""
        if isa.arch != self.arch:
            return f"it is {self.arch} code and the target is {isa.arch}"
        lacking = [x for x in self.extensions if not isa.has(x)]
        if lacking:
            return f"the target ({isa.cpu}, {isa.name}) lacks {', '.join(lacking)}"
        return None


C_INTRINSICS: dict[str, CIntrinsic] = {}


def register_c_intrinsic(intrin: CIntrinsic, *, override: bool = False) -> None:
    if intrin.name in C_INTRINSICS and not override:
        raise ValueError(f"C intrinsic {intrin.name!r} is already registered")
    C_INTRINSICS[intrin.name] = intrin


def usable_tensor_intrins(target: Target | str) -> list[str]:
    """The registered tensor intrinsics whose C functions ``target`` can run."""
    isa = isa_of(target if isinstance(target, Target) else Target(target))
    out = []
    for name in TensorIntrin.names():
        intrin = TensorIntrin.get(name)  # registered: not None
        calls = intrin.calls if intrin is not None else ()
        if calls and all(c in C_INTRINSICS and C_INTRINSICS[c].missing(isa) is None for c in calls):
            out.append(name)
    return out


def accumulating_call(s: Stmt) -> tuple[CIntrinsic, E.BufferLoad] | None:
    """``(intrinsic, C[i])`` when ``s`` evaluates a call of a registered function with a
    register form whose first argument is ``address_of(C[i])``: the call updates the
    ``intrinsic.lanes`` elements of ``C`` from ``C[i]`` on and reads only its other
    arguments. None for any other statement."""
    if not isinstance(s, Evaluate) or not isinstance(s.value, E.Call):
        return None
    intrin = C_INTRINSICS.get(s.value.op)
    if intrin is None or intrin.register_form not in C_INTRINSICS or not s.value.args:
        return None
    first = s.value.args[0]
    if not (isinstance(first, E.Call) and first.op == ADDRESS_OF):
        return None
    load = first.args[0]
    return (intrin, load) if isinstance(load, E.BufferLoad) else None


def intrinsic_call(writer, e: E.Call, error: type[Exception]) -> str:
    """C for a call of a registered function (``writer`` is the expression writer); the
    register form's update of a variable when the code generator keeps the accumulators
    the call points to in one (:func:`accumulating_call`)."""
    intrin = C_INTRINSICS[e.op]
    target = getattr(writer, "target", None)
    if target is not None:
        why = (
            f"it is CPU code and the target is {target.kind}"
            if target.kind != "cpu"
            else intrin.missing(writer.isa)
        )
        if why is not None:
            raise error(f"cannot call {e.op} in {writer.name}: {why}")
    found = accumulating_call(Evaluate(e))
    acc = writer.accumulator(found[1].buffer, found[1].indices) if found is not None else None
    if acc is not None and intrin.register_form is not None:
        # the accumulators live in a variable: the register form updates it
        reg = C_INTRINSICS[intrin.register_form]
        writer.helpers.need(reg.name, reg.code)
        rest = ", ".join(_argument(writer, a, error) for a in e.args[1:])
        return f"{acc} = {reg.name}({acc}, {rest})"
    writer.helpers.need(e.op, intrin.code)
    return f"{e.op}({', '.join(_argument(writer, a, error) for a in e.args)})"


def _argument(writer, a: E.PrimExpr, error: type[Exception]) -> str:
    if isinstance(a, E.Call) and a.op == ADDRESS_OF:
        load = a.args[0]
        assert isinstance(load, E.BufferLoad), f"address_of takes a load, got {load}"
        if writer.accumulator(load.buffer, load.indices) is not None:
            raise error(
                f"{writer.name}: the address of {load} is taken, but the code generator keeps "
                "that element in a variable"
            )
        return f"&{writer.buf_names[load.buffer]}[{writer.index(load.buffer, load.indices)}]"
    if isinstance(a, E.Call) and a.op == BUFFER_STRIDE:
        return str(compact_stride(*stride_axis(a)))
    text = writer.expr(a)
    return text[1:-1] if text.startswith("(") and text.endswith(")") else text


# ----------------------------------------------------------------------------- dot products


def _register_dot(name: str, arch: str, extensions: tuple[str, ...], lanes: int, make) -> None:
    """Register a dot product's pointer form ``name`` and its register form ``name_acc``;
    ``make(typedef, head, start, end)`` writes the definition around the update of ``vc``."""
    bits = lanes * 32
    vt = f"{name}_v"  # the type of the accumulators' variables (a generic vector)
    pointer = make(
        "",
        f"static inline int32_t {name}(int32_t* c, ",
        "__builtin_memcpy(&vc, c, sizeof vc);",
        "__builtin_memcpy(c, &vc, sizeof vc);\n  return 0;",
    )
    register = make(
        f"typedef int32_t {vt} __attribute__((vector_size({bits // 8})));\n",
        f"static inline {vt} {name}_acc({vt} acc, ",
        "vc = acc;",
        f"return ({vt})vc;",
    )
    register_c_intrinsic(CIntrinsic(name, arch, extensions, pointer, lanes, f"{name}_acc"))
    register_c_intrinsic(CIntrinsic(f"{name}_acc", arch, extensions, register, lanes=lanes))


# ----------------------------------------------------------------------------- x86


def _x86_dot(features: str, lanes: int, update: str):
    """A dot product of ``lanes`` outputs and 4 products each (u8 x s8), in 256/512-bit
    code: the ``make`` of :func:`_register_dot`."""
    bits = lanes * 32
    vt = {256: "__m256i", 512: "__m512i"}[bits]
    mm = {256: "_mm256", 512: "_mm512"}[bits]
    load = f"{mm}_loadu_si{bits}" if bits == 512 else "_mm256_loadu_si256"
    cast = "(const void*)" if bits == 512 else f"(const {vt}*)"

    def make(typedef: str, head: str, start: str, end: str) -> str:
        return f"""#include <immintrin.h>
{typedef}__attribute__((target("{features}")))
{head}const uint8_t* a, const int8_t* b, int32_t ldb) {{
  int32_t a4;
  __builtin_memcpy(&a4, a, 4);
  {vt} va = {mm}_set1_epi32(a4), vb, vc;
  if (ldb == 4) {{
    vb = {load}({cast}b);
  }} else {{
    int32_t rows[{lanes}];
    for (int i = 0; i < {lanes}; ++i) __builtin_memcpy(&rows[i], b + (int64_t)i * ldb, 4);
    vb = {load}({cast}rows);
  }}
  {start.replace("vc = acc", f"vc = ({vt})acc")}
  {update}
  {end}
}}
"""

    return make


_PAIRS = "{mm}_add_epi32(vc, {mm}_madd_epi16({mm}_maddubs_epi16(va, vb), {mm}_set1_epi16(1)))"
for _name, _feat, _ext, _lanes, _update in (
    (
        "ms_dot_16x4_vnni",
        "avx512f,avx512bw,avx512vnni",
        ("avx512f", "avx512bw", "avx512vnni"),
        16,
        "vc = _mm512_dpbusd_epi32(vc, va, vb);",
    ),
    (
        "ms_dot_16x4_avx512",
        "avx512f,avx512bw",
        ("avx512f", "avx512bw"),
        16,
        f"vc = {_PAIRS.format(mm='_mm512')};",
    ),
    (
        "ms_dot_8x4_avxvnni",
        "avx2,avxvnni",
        ("avx2", "avxvnni"),
        8,
        "vc = _mm256_dpbusd_avx_epi32(vc, va, vb);",
    ),
    ("ms_dot_8x4_avx2", "avx2", ("avx2",), 8, f"vc = {_PAIRS.format(mm='_mm256')};"),
):
    _register_dot(_name, "x86_64", _ext, _lanes, _x86_dot(_feat, _lanes, _update))


# exact u8 x s8 on AVX2 / AVX512-BW: the bytes split into even and odd int16 halves (u8
# zero-extended, s8 sign-extended), two vpmaddwd of exact int16 products, no saturation
_EXACT_PAIRS = """const {vt} lo = {mm}_set1_epi16(0xFF);
  {vt} ae = {mm}_and_si{bits}(va, lo), ao = {mm}_srli_epi16(va, 8);
  {vt} be = {mm}_srai_epi16({mm}_slli_epi16(vb, 8), 8), bo = {mm}_srai_epi16(vb, 8);
  vc = {mm}_add_epi32(vc, {mm}_add_epi32({mm}_madd_epi16(ae, be), {mm}_madd_epi16(ao, bo)));"""
for _name, _feat, _ext, _lanes, _mm in (
    ("ms_dot_16x4_avx512_exact", "avx512f,avx512bw", ("avx512f", "avx512bw"), 16, "_mm512"),
    ("ms_dot_8x4_avx2_exact", "avx2", ("avx2",), 8, "_mm256"),
):
    _vt = "__m512i" if _lanes == 16 else "__m256i"
    _update = _EXACT_PAIRS.format(vt=_vt, mm=_mm, bits=_lanes * 32)
    _register_dot(_name, "x86_64", _ext, _lanes, _x86_dot(_feat, _lanes, _update))


# ----------------------------------------------------------------------------- aarch64


def _arm_dot(attr: str, t: str, s: str, update: str):
    """A dot product of 4 outputs and 4 products each (``t`` x ``t``): the ``make`` of
    :func:`_register_dot`."""
    vb_t = f"{'u' if s == 'u' else ''}int8x16_t"

    def make(typedef: str, head: str, start: str, end: str) -> str:
        return f"""#include <arm_neon.h>
{typedef}{attr}{head}const {t}* a, const {t}* b, int32_t ldb) {{
  int32_t a4;
  __builtin_memcpy(&a4, a, 4);
  {vb_t} vb;
  if (ldb == 4) {{
    vb = vld1q_{s}8(b);
  }} else {{
    {t} rows[16];
    for (int i = 0; i < 4; ++i) __builtin_memcpy(rows + 4 * i, b + (int64_t)i * ldb, 4);
    vb = vld1q_{s}8(rows);
  }}
  int32x4_t vc;
  {start.replace("vc = acc", "vc = (int32x4_t)acc")}
{update}  {end}
}}
"""

    return make


_DOTPROD = '__attribute__((target("+dotprod")))\n'
_register_dot(
    "ms_dot_4x4_i8i8s32_sdot",
    "aarch64",
    ("dotprod",),
    4,
    _arm_dot(
        _DOTPROD,
        "int8_t",
        "s",
        "  int8x16_t va = vreinterpretq_s8_s32(vdupq_n_s32(a4));\n  vc = vdotq_s32(vc, va, vb);\n",
    ),
)
_register_dot(
    "ms_dot_4x4_u8u8s32_udot",
    "aarch64",
    ("dotprod",),
    4,
    _arm_dot(
        _DOTPROD,
        "uint8_t",
        "u",
        "  uint8x16_t va = vreinterpretq_u8_s32(vdupq_n_s32(a4));\n"
        "  vc = vreinterpretq_s32_u32(vdotq_u32(vreinterpretq_u32_s32(vc), va, vb));\n",
    ),
)
# plain NEON (TVM's smull / saddlp / addp sequence): rows 0-1 and 2-3 multiplied into
# int16 (exact for int8), pairs widened and added into int32, then the halves paired up
_register_dot(
    "ms_dot_4x4_i8i8s32_neon",
    "aarch64",
    ("neon",),
    4,
    _arm_dot(
        "",
        "int8_t",
        "s",
        "  int8x8_t va = vreinterpret_s8_s32(vdup_n_s32(a4));\n"
        "  int32x4_t lo = vpaddlq_s16(vmull_s8(va, vget_low_s8(vb)));\n"
        "  int32x4_t hi = vpaddlq_s16(vmull_s8(va, vget_high_s8(vb)));\n"
        "  vc = vaddq_s32(vc, vpaddq_s32(lo, hi));\n",
    ),
)
