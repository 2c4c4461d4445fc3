"""The numpy reference interpreter: what a PrimFunc means.

``interpret(func, *arrays)`` runs ``func`` on numpy arrays, writing its outputs in
place. The IR is first compiled to nested Python closures (one per node), so running
does not re-dispatch on node types per element.

Semantics (the reference the code generators are tested against):

* Integer and bool expressions compute on Python ints (exact); a value is wrapped
  to its type's width when it is cast to a narrower integer type or stored.
  ``FloorDiv``/``FloorMod`` round toward minus infinity; ``Div`` on integers
  truncates toward zero (as in C).
* Float expressions compute on numpy scalars of their own dtype, so every operation
  rounds to float32 (or float16, ...) as compiled code does; stores round to the
  buffer's dtype. Division by zero, overflow and NaN follow IEEE (no warnings).
  ``round`` rounds half to even (C's ``nearbyint``); ``erf`` uses ``math.erf``.
* ``Select``, ``and``/``or`` evaluate lazily: only the chosen side runs, so a guarded
  out-of-bounds load (padding) is fine.
* Loops of every kind (parallel, vectorized, unrolled) run serially, in order. A function
  with loops bound to ``blockIdx``/``threadIdx`` runs in the GPU emulator
  (:mod:`metaschedule.tir.gpu_emulator`): lowered for the GPU, one coroutine per thread,
  barriers honoured and races reported (a reduction bound to ``threadIdx`` runs as the
  shared-memory tree that :mod:`~metaschedule.tir.transform.cross_thread_reduction`
  lowers it to).
* A BlockRealize whose predicate is false does nothing. Otherwise its iter vars take
  the bound values (which must lie in their domains), its ``alloc_buffers`` are
  allocated afresh, its ``init`` runs when every reduction iter var is at the
  minimum of its domain, then its body runs.
* Freshly allocated float buffers are filled with NaN and integer ones with zeros,
  so a read before the first write shows up in the results.
* An out-of-bounds access raises ``IndexError`` naming the buffer, the index and
  the block; negative indices never wrap around.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from . import expr as E
from .buffer import Buffer
from .dtype import bits, is_bool, is_float, numpy_dtype
from .function import IRModule, PrimFunc
from .stmt import (
    Allocate,
    Block,
    BlockRealize,
    BufferStore,
    Evaluate,
    For,
    IfThenElse,
    IterType,
    SeqStmt,
)
from .tensor_intrin.calls import (
    ADDRESS_OF,
    BUFFER_STRIDE,
    Pointer,
    compact_stride,
    extern_call_reference,
    is_address_of,
    stride_axis,
)

Env = list
ExprFn = Callable[[Env], Any]
StmtFn = Callable[[Env], None]


def interpret(func_or_mod: PrimFunc | IRModule, *arrays: np.ndarray) -> None:
    """Run a PrimFunc (or the ``main`` function of a module) on ``arrays``, in place.

    Raises:
        TypeError: wrong number of arrays, a non-array, or a dtype mismatch.
        ValueError: a shape mismatch, or IR the interpreter cannot run.
        IndexError: an out-of-bounds buffer access or block binding.
    """
    from . import gpu_emulator  # local: a cycle, the emulator builds on this module

    if gpu_emulator.has_gpu_kernels(func_or_mod):
        gpu_emulator.emulate(func_or_mod, *arrays)
        return
    compile_func(func_or_mod)(*arrays)


def compile_func(func_or_mod: PrimFunc | IRModule) -> Callable[..., None]:
    """Compile once, run many times: returns ``run(*arrays)`` with :func:`interpret`'s checks."""
    func, name = _pick(func_or_mod)
    return _Compiler(func, name).compile()


def _pick(func_or_mod: Any) -> tuple[PrimFunc, str]:
    if isinstance(func_or_mod, PrimFunc):
        return func_or_mod, func_or_mod.attrs.get("global_symbol", "main")
    if isinstance(func_or_mod, IRModule):
        if "main" in func_or_mod:
            return func_or_mod["main"], "main"
        if len(func_or_mod) == 1:
            name = next(iter(func_or_mod))
            return func_or_mod[name], name
        raise ValueError(
            f"module has no function 'main' and several functions ({', '.join(func_or_mod)}); "
            "pass the PrimFunc to run"
        )
    raise TypeError(
        f"interpret expects a PrimFunc or an IRModule, got {type(func_or_mod).__name__}"
    )


# ----------------------------------------------------------------------------- helpers


def _wrap_int(dtype: str) -> Callable[[Any], Any]:
    """Convert a Python number to the value range of an integer or bool dtype (two's complement)."""
    if is_bool(dtype):
        return bool
    b = bits(dtype)
    if dtype.startswith("uint"):
        mask = (1 << b) - 1
        return lambda v: int(v) & mask
    lo, hi, mask = -(1 << (b - 1)), (1 << (b - 1)) - 1, (1 << b) - 1

    def wrap(v):
        v = int(v)
        return v if lo <= v <= hi else ((v - lo) & mask) + lo

    return wrap


def _truncdiv(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def intrinsic_functions(dtype: str) -> dict[str, Callable]:
    """The numpy meaning of each math intrinsic (``Call.op``) on scalars of the float ``dtype``."""
    t = numpy_dtype(dtype).type
    one = t(1)
    return {
        "exp": np.exp,
        "log": np.log,
        "sqrt": np.sqrt,
        "tanh": np.tanh,
        "fabs": np.abs,
        "floor": np.floor,
        "ceil": np.ceil,
        "round": np.rint,
        "sin": np.sin,
        "cos": np.cos,
        "exp2": np.exp2,
        "log2": np.log2,
        "trunc": np.trunc,
        "pow": np.power,
        "rsqrt": lambda x: one / np.sqrt(x),
        "sigmoid": lambda x: one / (one + np.exp(-x)),
        "erf": lambda x: t(math.erf(float(x))),
    }


_CMP = {
    E.EQ: operator.eq,
    E.NE: operator.ne,
    E.LT: operator.lt,
    E.LE: operator.le,
    E.GT: operator.gt,
    E.GE: operator.ge,
}


class _Compiler:
    def __init__(self, func: PrimFunc, name: str):
        self.func = func
        self.fname = name
        self.slots: dict[Any, int] = {}
        self.scope: set[E.Var] = set()
        self.buffers: set[Buffer] = set()
        self.where = f"function {name}"

    def slot(self, node: Any) -> int:
        k = self.slots.get(node)
        if k is None:
            k = self.slots[node] = len(self.slots)
        return k

    def error(self, what: str) -> ValueError:
        return ValueError(f"cannot interpret {what} (in {self.where})")

    # ------------------------------------------------------------------ function
    def compile(self) -> Callable[..., None]:
        params = self.func.params
        names = ", ".join(b.name for b in params)
        binders = []
        for b in params:
            self.buffers.add(b)
            for d, e in enumerate(b.shape):
                if isinstance(e, E.Var) and e not in self.scope:
                    self.scope.add(e)
                    binders.append((self.slot(e), params.index(b), d))
        checks = [
            (k, b, [self.expr(e) for e in b.shape], numpy_dtype(b.dtype))
            for k, b in enumerate(params)
        ]
        param_slots = [self.slot(b) for b in params]
        body = self.stmt(self.func.body)
        nslots = len(self.slots)
        fname = self.fname

        def run(*arrays: np.ndarray) -> None:
            if len(arrays) != len(params):
                raise TypeError(
                    f"function {fname} takes {len(params)} arrays ({names}), got {len(arrays)}"
                )
            env: Env = [None] * nslots
            for k, b, _, dt in checks:
                a = arrays[k]
                if not isinstance(a, np.ndarray):
                    raise TypeError(
                        f"argument {k} ({b.name}) must be a numpy.ndarray, got {type(a).__name__}"
                    )
                if a.dtype != dt:
                    raise TypeError(
                        f"argument {k} ({b.name}) has dtype {a.dtype}; buffer "
                        f"{b.name} expects {b.dtype}"
                    )
                if a.ndim != b.ndim:
                    raise ValueError(
                        f"argument {k} ({b.name}) has {a.ndim} dimensions, shape "
                        f"{a.shape}; buffer {b.name} has {b.ndim}"
                    )
            for slot, k, d in binders:
                env[slot] = int(arrays[k].shape[d])
            for k, b, shape_fns, _ in checks:
                expected = tuple(f(env) for f in shape_fns)
                if arrays[k].shape != expected:
                    raise ValueError(
                        f"argument {k} ({b.name}) has shape {arrays[k].shape}; "
                        f"buffer {b.name} expects {expected}"
                    )
            for slot, a in zip(param_slots, arrays):
                env[slot] = a
            with np.errstate(all="ignore"):
                body(env)

        return run

    # ------------------------------------------------------------------ expressions
    def expr(self, e: Any) -> ExprFn:
        method = getattr(self, "expr_" + type(e).__name__, None)
        if method is None:
            for cls in type(e).__mro__[1:]:
                method = getattr(self, "expr_" + cls.__name__, None)
                if method is not None:
                    break
        if method is None:
            raise self.error(f"the expression {e} ({type(e).__name__})")
        return method(e)

    def expr_Var(self, v: E.Var) -> ExprFn:
        if v not in self.scope:
            raise self.error(
                f"variable {v.name}: it is not defined by an enclosing loop, block "
                "or parameter shape"
            )
        k = self.slot(v)
        return lambda env: env[k]

    def expr_IntImm(self, e: E.IntImm) -> ExprFn:
        c = bool(e.value) if is_bool(e.dtype) else e.value
        return lambda env: c

    def expr_FloatImm(self, e: E.FloatImm) -> ExprFn:
        c = numpy_dtype(e.dtype).type(e.value)
        return lambda env: c

    def expr_StringImm(self, e: E.StringImm) -> ExprFn:
        c = e.value
        return lambda env: c

    def expr_Cast(self, e: E.Cast) -> ExprFn:
        f = self.expr(e.value)
        if is_float(e.dtype):
            t = numpy_dtype(e.dtype).type
            return lambda env: t(f(env))
        wrap = _wrap_int(e.dtype)
        return lambda env: wrap(f(env))

    def expr_BinaryOp(self, e: E.BinaryOp) -> ExprFn:
        fa, fb = self.expr(e.a), self.expr(e.b)
        is_int = not is_float(e.a.dtype)
        if isinstance(e, E.CmpOp):
            op = _CMP[next(c for c in _CMP if isinstance(e, c))]
            return lambda env: op(fa(env), fb(env))
        if isinstance(e, E.Add):
            if isinstance(e.b, (E.IntImm, E.FloatImm)):
                c = fb(None)
                return lambda env: fa(env) + c
            return lambda env: fa(env) + fb(env)
        if isinstance(e, E.Sub):
            return lambda env: fa(env) - fb(env)
        if isinstance(e, E.Mul):
            if isinstance(e.b, (E.IntImm, E.FloatImm)):
                c = fb(None)
                return lambda env: fa(env) * c
            return lambda env: fa(env) * fb(env)
        if isinstance(e, E.Div):
            if is_int:
                return lambda env: _truncdiv(fa(env), fb(env))
            return lambda env: fa(env) / fb(env)
        if isinstance(e, E.FloorDiv):
            return lambda env: fa(env) // fb(env)
        if isinstance(e, E.FloorMod):
            return lambda env: fa(env) % fb(env)
        if isinstance(e, E.Min):

            def vmin(env):
                a, b = fa(env), fb(env)
                return b if b < a else a

            return vmin
        if isinstance(e, E.Max):

            def vmax(env):
                a, b = fa(env), fb(env)
                return b if b > a else a

            return vmax
        if isinstance(e, E.And):
            return lambda env: bool(fa(env)) and bool(fb(env))
        if isinstance(e, E.Or):
            return lambda env: bool(fa(env)) or bool(fb(env))
        raise self.error(f"the operator {type(e).__name__}")

    def expr_Not(self, e: E.Not) -> ExprFn:
        f = self.expr(e.a)
        return lambda env: not f(env)

    def expr_Select(self, e: E.Select) -> ExprFn:
        fc, ft, ff = self.expr(e.condition), self.expr(e.true_value), self.expr(e.false_value)
        return lambda env: ft(env) if fc(env) else ff(env)

    def expr_Call(self, e: E.Call) -> ExprFn:
        reference = extern_call_reference(e.op)
        if reference is not None or e.op in (ADDRESS_OF, BUFFER_STRIDE):
            return self.extern_call(e, reference)
        table = intrinsic_functions(e.dtype) if is_float(e.dtype) else {}
        fn = table.get(e.op)
        if fn is None:
            raise self.error(
                f"a call to {e.op!r} with dtype {e.dtype}; known float "
                f"intrinsics: {', '.join(sorted(intrinsic_functions('float32')))}"
            )
        args = [self.expr(a) for a in e.args]
        if len(args) == 1:
            (f,) = args
            return lambda env: fn(f(env))
        return lambda env: fn(*[f(env) for f in args])

    def extern_call(self, e: E.Call, reference) -> ExprFn:
        """A tensor intrinsic's C function, run by its Python reference on Pointers."""
        if e.op == BUFFER_STRIDE:
            stride = compact_stride(*stride_axis(e))
            return lambda env: stride
        if reference is None:
            raise self.error(f"{e} outside the arguments of a tensor intrinsic's call")
        args = [self.pointer(a) if is_address_of(a) else self.expr(a) for a in e.args]
        return lambda env: reference(*[f(env) for f in args])

    def pointer(self, e: E.Call) -> ExprFn:
        (load,) = e.args
        k, fidx, oob = self.access(load.buffer, load.indices, "address_of")

        def run(env):
            a, idx = env[k], tuple([f(env) for f in fidx])
            if not all(0 <= i < n for i, n in zip(idx, a.shape)):
                raise oob(idx, a.shape)
            flat = a.reshape(-1)
            if not np.shares_memory(flat, a):
                raise ValueError(f"address_of {load.buffer.name}: the array is not contiguous")
            return Pointer(flat, int(np.ravel_multi_index(idx, a.shape)) if idx else 0)

        return run

    def expr_Reduce(self, e: E.Reduce) -> ExprFn:
        raise self.error("a Reduce expression; lower te.compute with te.create_prim_func first")

    def expr_BufferLoad(self, e: E.BufferLoad) -> ExprFn:
        k, fidx, oob = self.access(e.buffer, e.indices, "load")
        as_py = not is_float(e.buffer.dtype)
        if len(fidx) == 1:
            (f0,) = fidx

            def load1(env):
                i = f0(env)
                a = env[k]
                if not 0 <= i < a.shape[0]:
                    raise oob((i,), a.shape)
                return a.item(i) if as_py else a[i]

            return load1
        if len(fidx) == 2:
            f0, f1 = fidx

            def load2(env):
                i, j = f0(env), f1(env)
                a = env[k]
                s = a.shape
                if not (0 <= i < s[0] and 0 <= j < s[1]):
                    raise oob((i, j), s)
                return a.item(i, j) if as_py else a[i, j]

            return load2

        def load(env):
            idx = tuple([f(env) for f in fidx])
            a = env[k]
            if not all(0 <= i < n for i, n in zip(idx, a.shape)):
                raise oob(idx, a.shape)
            return a[idx].item() if as_py else a[idx]

        return load

    def access(self, buf: Buffer, indices: tuple, kind: str):
        if buf not in self.buffers:
            raise self.error(
                f"a {kind} of buffer {buf.name}: it is neither a parameter nor "
                "allocated by an enclosing block or Allocate"
            )
        if len(indices) != buf.ndim:
            raise self.error(
                f"a {kind} of {buf.ndim}-d buffer {buf.name} with {len(indices)} indices"
            )
        where, name = self.where, buf.name

        def oob(idx, shape) -> IndexError:
            text = ", ".join(str(i) for i in idx)
            return IndexError(
                f"{kind} {name}[{text}] is out of bounds for buffer {name} of "
                f"shape {tuple(shape)} (in {where})"
            )

        return self.slot(buf), [self.expr(i) for i in indices], oob

    # ------------------------------------------------------------------ statements
    def stmt(self, s: Any) -> StmtFn:
        method = getattr(self, "stmt_" + type(s).__name__, None)
        if method is None:
            raise self.error(f"the statement type {type(s).__name__}")
        return method(s)

    def stmt_SeqStmt(self, s: SeqStmt) -> StmtFn:
        fs = [self.stmt(x) for x in s.seq]

        def run(env):
            for f in fs:
                f(env)

        return run

    def stmt_Evaluate(self, s: Evaluate) -> StmtFn:
        f = self.expr(E.convert(s.value))

        def run(env):
            f(env)

        return run

    def stmt_IfThenElse(self, s: IfThenElse) -> StmtFn:
        fc, ft = self.expr(s.condition), self.stmt(s.then_case)
        fe = self.stmt(s.else_case) if s.else_case is not None else None

        def run(env):
            if fc(env):
                ft(env)
            elif fe is not None:
                fe(env)

        return run

    def stmt_BufferStore(self, s: BufferStore) -> StmtFn:
        k, fidx, oob = self.access(s.buffer, s.indices, "store")
        fv = self.expr(s.value)
        if not is_float(s.buffer.dtype):
            wrap, raw = _wrap_int(s.buffer.dtype), fv
            fv = lambda env: wrap(raw(env))  # noqa: E731
        if len(fidx) == 1:
            (f0,) = fidx

            def store1(env):
                i = f0(env)
                a = env[k]
                if not 0 <= i < a.shape[0]:
                    raise oob((i,), a.shape)
                a[i] = fv(env)

            return store1

        def store(env):
            idx = tuple([f(env) for f in fidx])
            a = env[k]
            if not all(0 <= i < n for i, n in zip(idx, a.shape)):
                raise oob(idx, a.shape)
            a[idx] = fv(env)

        return store

    def stmt_For(self, s: For) -> StmtFn:
        fmin, fext = self.expr(s.min), self.expr(s.extent)
        k = self.slot(s.loop_var)
        self.scope.add(s.loop_var)
        body = self.stmt(s.body)
        self.scope.discard(s.loop_var)

        def run(env):
            lo = fmin(env)
            for v in range(lo, lo + fext(env)):
                env[k] = v
                body(env)

        return run

    def alloc(self, buf: Buffer) -> Callable[[Env], np.ndarray]:
        shape_fns = [self.expr(e) for e in buf.shape]
        dt = numpy_dtype(buf.dtype)
        fill = np.nan if is_float(buf.dtype) else 0
        self.buffers.add(buf)
        return lambda env: np.full(tuple([f(env) for f in shape_fns]), fill, dtype=dt)

    def stmt_Allocate(self, s: Allocate) -> StmtFn:
        k, make = self.slot(s.buffer), self.alloc(s.buffer)
        body = self.stmt(s.body)
        self.buffers.discard(s.buffer)

        def run(env):
            env[k] = make(env)
            body(env)

        return run

    def stmt_Block(self, b: Block) -> StmtFn:
        if b.iter_vars:
            raise self.error(f"block {b.name_hint}: it has iter vars but no BlockRealize")
        return self.block(b, None)

    def stmt_BlockRealize(self, s: BlockRealize) -> StmtFn:
        return self.block(s.block, s)

    def block(self, b: Block, realize: BlockRealize | None) -> StmtFn:
        outer_where = self.where
        bindings = []
        pred = None
        if realize is not None:
            bindings = [self.expr(v) for v in realize.iter_values]
            if not (isinstance(realize.predicate, E.IntImm) and realize.predicate.value):
                pred = self.expr(realize.predicate)
        self.where = f'block "{b.name_hint}" of function {self.fname}'
        doms = [(self.expr(iv.dom.min), self.expr(iv.dom.extent)) for iv in b.iter_vars]
        slots = [self.slot(iv.var) for iv in b.iter_vars]
        names = [iv.var.name for iv in b.iter_vars]
        self.scope.update(iv.var for iv in b.iter_vars)
        allocs = [(self.slot(buf), self.alloc(buf)) for buf in b.alloc_buffers]
        reduce_at = [
            (self.slot(iv.var), lo)
            for iv, (lo, _) in zip(b.iter_vars, doms)
            if iv.iter_type is IterType.COMM_REDUCE
        ]
        init = self.stmt(b.init) if b.init is not None else None
        body = self.stmt(b.body)
        self.scope.difference_update(iv.var for iv in b.iter_vars)
        self.buffers.difference_update(b.alloc_buffers)
        where, self.where = self.where, outer_where
        bind = list(zip(slots, bindings, doms, names))

        def run(env):
            if pred is not None and not pred(env):
                return
            for k, f, (flo, fext), name in bind:
                v = f(env)
                lo = flo(env)
                if not lo <= v < lo + fext(env):
                    raise IndexError(
                        f"iter var {name} is bound to {v}, outside its domain "
                        f"[{lo}, {lo + fext(env)}) (in {where})"
                    )
                env[k] = v
            for k, make in allocs:
                env[k] = make(env)
            if init is not None and all(env[k] == lo(env) for k, lo in reduce_at):
                init(env)
            body(env)

        return run
