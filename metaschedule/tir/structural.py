"""Structural equality and hashing of IR nodes, up to renaming of defined variables.

Both are built on one canonical form: a flat list of string tokens that spells a node
with every *defined* variable and buffer replaced by its definition number (de Bruijn
style). Definitions are loop variables (``For``), block iteration variables, ``Reduce``
axes, ``CommReducer`` lhs/rhs, function parameter buffers (and the variables first
met in their shapes), ``Block.alloc_buffers`` and ``Allocate`` buffers. Two nodes are
structurally equal exactly when their token lists are equal, and the hash is a digest
of that list, so hash and equality always agree.

Free variables and buffers (used but not defined) must be the same object unless
``map_free_vars=True``, which numbers them by first occurrence instead. The hash
always numbers them, so it is consistent with both modes.

Where we differ from TVM: ``EqualOp``/``NotEqualOp`` (what Python's ``==``/``!=``
build) are the same IR operators as ``EQ``/``NE``; lists and tuples inside
annotations compare equal when their items do; floats compare by exact value (so
``-0.0 != 0.0`` and NaN equals NaN).

The traversal uses an explicit stack, so arbitrarily deep expressions are fine.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
from typing import Any

import numpy as np

from .buffer import Buffer
from .expr import CommReducer, EqualOp, Node, NotEqualOp, Reduce, Var
from .function import PrimFunc
from .stmt import Allocate, Block, For, IterVar

__all__ = ["structural_equal", "assert_structural_equal", "structural_hash"]

# ----------------------------------------------------------------------------- plans
#
# A plan says in which order a node's fields are spelled and where definitions and
# scopes begin and end. Nodes without a plan spell their init fields in order.

_VALUE, _PUSH, _POP, _DEF_VAR, _DEF_BUF, _DEF_BUFS, _ITER_DOMS, _DEF_ITERS, _PARAMS = range(9)
_FREE_ON, _FREE_OFF = range(9, 11)
_FIELD = _VALUE  # a field is spelled as its value

_PLANS: dict[type, list[tuple[int, str]]] = {
    For: [
        (_FIELD, "min"),
        (_FIELD, "extent"),
        (_FIELD, "kind"),
        (_FIELD, "thread_binding"),
        (_FIELD, "annotations"),
        (_PUSH, ""),
        (_DEF_VAR, "loop_var"),
        (_FIELD, "body"),
        (_POP, ""),
    ],
    Block: [
        (_ITER_DOMS, "iter_vars"),
        (_PUSH, ""),
        (_DEF_ITERS, "iter_vars"),
        (_DEF_BUFS, "alloc_buffers"),
        (_FIELD, "reads"),
        (_FIELD, "writes"),
        (_FIELD, "name_hint"),
        (_FIELD, "init"),
        (_FIELD, "body"),
        (_FIELD, "annotations"),
        (_POP, ""),
    ],
    Allocate: [(_PUSH, ""), (_DEF_BUF, "buffer"), (_FIELD, "body"), (_POP, "")],
    CommReducer: [
        (_PUSH, ""),
        (_DEF_VAR, "lhs"),
        (_DEF_VAR, "rhs"),
        (_FIELD, "result"),
        (_FIELD, "identity"),
        (_POP, ""),
    ],
    Reduce: [
        (_FIELD, "combiner"),
        (_ITER_DOMS, "axis"),
        (_PUSH, ""),
        (_DEF_ITERS, "axis"),
        (_FIELD, "source"),
        (_FIELD, "condition"),
        (_POP, ""),
    ],
    PrimFunc: [(_PUSH, ""), (_PARAMS, "params"), (_FIELD, "body"), (_FIELD, "attrs"), (_POP, "")],
}

# Python-level conveniences that are the same IR operator.
_ALIASES: dict[type, str] = {EqualOp: "EQ", NotEqualOp: "NE"}


def _plan_for(cls: type) -> list[tuple[int, str]]:
    plan = _PLANS.get(cls)
    if plan is None:
        for base in cls.__mro__[1:]:
            if base in _PLANS and dataclasses.fields(base) == dataclasses.fields(cls):
                plan = _PLANS[base]
                break
        else:
            plan = [(_FIELD, f.name) for f in dataclasses.fields(cls) if f.init]
        _PLANS[cls] = plan
    return plan


#: node class (not a Var or Buffer) -> (its token, its plan reversed), for _value_fast
_RPLANS: dict[type, tuple[str, tuple[tuple[int, str], ...]]] = {}


def _type_name(cls: type) -> str:
    return _ALIASES.get(cls) or cls.__name__


# ----------------------------------------------------------------------------- canonical form


class _Canon:
    """Spells one node as a token list. ``free_by_identity`` spells free vars by object id."""

    def __init__(self, free_by_identity: bool, track: bool):
        self.free_by_identity = free_by_identity
        self.track = track
        self.tokens: list[str] = []
        self.where: list[tuple[Any, Any]] = []  # (path, object) per token when tracking
        self.bound: dict[int, str] = {}  # id(var or buffer) -> token of a use
        self.undo: list[tuple[int, str | None]] = []
        self.marks: list[int] = []
        self.free: dict[int, int] = {}
        self.ndef = 0
        self.define_free = False

    # -- helpers
    def _emit(self, tok: str, path: Any, obj: Any) -> None:
        self.tokens.append(tok)
        if self.track:
            self.where.append((path, obj))

    def _step(self, path: Any, step: str) -> Any:
        return (path, step) if self.track else None

    def _bind(self, obj: Any, prefix: str) -> None:
        key = id(obj)
        self.undo.append((key, self.bound.get(key)))
        self.bound[key] = f"{prefix}#{self.ndef}"
        self.ndef += 1

    def _free_token(self, obj: Any, kind: str) -> tuple[str, bool]:
        """Token for a free var/buffer and whether this is its first occurrence."""
        if self.free_by_identity:
            return f"free {kind} {obj.name}@{id(obj):x}", False
        key = id(obj)
        n = self.free.get(key)
        if n is None:
            self.free[key] = len(self.free)
            return f"free {kind}#{len(self.free) - 1}", True
        return f"free {kind}#{n}", False

    # -- main loop
    def run(self, root: Any) -> _Canon:
        stack: list[tuple[int, Any, Any]] = [(_VALUE, root, "root" if self.track else None)]
        value = self._value if self.track else self._value_fast
        while stack:
            op, x, path = stack.pop()
            if op == _VALUE:
                value(x, path, stack)
            elif op == _PUSH:
                self.marks.append(len(self.undo))
            elif op == _POP:
                mark = self.marks.pop()
                while len(self.undo) > mark:
                    key, old = self.undo.pop()
                    if old is None:
                        del self.bound[key]
                    else:
                        self.bound[key] = old
            elif op == _DEF_VAR:
                self._def_var(x, path)
            elif op == _DEF_BUF:
                self._def_buf(x, path, stack)
            elif op == _DEF_BUFS or op == _PARAMS:
                bufs = self._tuple(x, path, "buffers")
                if op == _PARAMS:
                    stack.append((_FREE_OFF, None, None))
                for i in range(len(bufs) - 1, -1, -1):
                    stack.append((_DEF_BUF, bufs[i], self._step(path, f"[{i}]")))
                if op == _PARAMS:
                    stack.append((_FREE_ON, None, None))
            elif op == _ITER_DOMS:
                ivs = self._tuple(x, path, "IterVars")
                for i in range(len(ivs) - 1, -1, -1):
                    iv = ivs[i]
                    if not isinstance(iv, IterVar):
                        raise TypeError(f"expected an IterVar at {_render(path)}[{i}], got {iv!r}")
                    p = self._step(path, f"[{i}]")
                    stack.append((_VALUE, iv.thread_tag, self._step(p, ".thread_tag")))
                    stack.append((_VALUE, iv.iter_type, self._step(p, ".iter_type")))
                    stack.append((_VALUE, iv.dom, self._step(p, ".dom")))
            elif op == _DEF_ITERS:
                for i, iv in enumerate(x):
                    self._def_var(iv.var, self._step(path, f"[{i}].var"))
            elif op == _FREE_ON:
                self.define_free = True
            elif op == _FREE_OFF:
                self.define_free = False
        return self

    def _tuple(self, x: Any, path: Any, what: str) -> tuple:
        if not isinstance(x, (tuple, list)):
            raise TypeError(f"expected a tuple of {what} at {_render(path)}, got {x!r}")
        self._emit(f"[{len(x)}]", path, x)
        return x

    def _def_var(self, v: Any, path: Any) -> None:
        if not isinstance(v, Var):
            raise TypeError(f"expected a Var in a binding position at {_render(path)}, got {v!r}")
        self._emit(f"def {type(v).__name__} {v.dtype}", path, v)
        self._bind(v, "var")

    def _def_buf(self, b: Any, path: Any, stack: list) -> None:
        if not isinstance(b, Buffer):
            raise TypeError(f"expected a Buffer at {_render(path)}, got {b!r}")
        self._emit(f"def {type(b).__name__} {b.dtype} {b.scope!r}", path, b)
        self._bind(b, "buffer")
        stack.append((_VALUE, b.shape, self._step(path, ".shape")))

    def _value_fast(self, x: Any, path: Any, stack: list) -> None:
        """:meth:`_value` without tracking paths (the same tokens), for hashing and
        equality, which the search calls on every schedule it makes."""
        cls = type(x)
        rplan = _RPLANS.get(cls)
        if rplan is not None:  # a node class seen before, not a Var or Buffer
            self.tokens.append(rplan[0])
            for op, name in rplan[1]:
                stack.append((op, getattr(x, name) if name else None, None))
            return
        if cls is int or cls is str or x is None or cls is bool:
            self.tokens.append(repr(x))
            return
        if isinstance(x, Node) and not isinstance(x, (Var, Buffer)):
            _RPLANS[cls] = (_type_name(cls), tuple(reversed(_plan_for(cls))))
            self._value_fast(x, path, stack)
            return
        self._value(x, path, stack)

    def _value(self, x: Any, path: Any, stack: list) -> None:
        if isinstance(x, Node):
            if isinstance(x, Var):
                tok = self.bound.get(id(x))
                if tok is not None:
                    self._emit(tok, path, x)
                elif self.define_free:  # first use in a parameter's shape defines it
                    self._def_var(x, path)
                else:
                    tok, _ = self._free_token(x, "var")
                    self._emit(f"{tok} {type(x).__name__} {x.dtype}", path, x)
                return
            if isinstance(x, Buffer):
                tok = self.bound.get(id(x))
                if tok is not None:
                    self._emit(tok, path, x)
                    return
                tok, first = self._free_token(x, "buffer")
                if first:  # spell its properties once, as a definition would
                    tok = f"{tok} {type(x).__name__} {x.dtype} {x.scope!r}"
                    stack.append((_VALUE, x.shape, self._step(path, ".shape")))
                self._emit(tok, path, x)
                return
            cls = type(x)
            self._emit(_type_name(cls), path, x)
            plan = _plan_for(cls)
            for i in range(len(plan) - 1, -1, -1):
                op, name = plan[i]
                if name:
                    stack.append((op, getattr(x, name), self._step(path, "." + name)))
                else:
                    stack.append((op, None, None))
            return
        t = type(x)
        if x is None or t is bool or t is int or t is str:
            self._emit(repr(x), path, x)
        elif t is float:
            self._emit(repr(x), path, x)  # exact, shortest round-trip form; all NaNs alike
        elif isinstance(x, enum.Enum):
            self._emit(f"{t.__name__}.{x.name}", path, x)
        elif t is tuple or t is list:
            self._emit(f"[{len(x)}]", path, x)
            for i in range(len(x) - 1, -1, -1):
                stack.append((_VALUE, x[i], self._step(path, f"[{i}]")))
        elif t is dict:
            self._emit(f"{{{len(x)}}}", path, x)
            items = sorted(x.items(), key=_key_order)
            for k, v in reversed(items):
                p = self._step(path, f"[{k!r}]")
                stack.append((_VALUE, v, p))
                stack.append((_VALUE, k, p))
        elif isinstance(x, np.generic):
            self._value(x.item(), path, stack)
        elif isinstance(x, (bool, int, str, float)):  # subclasses of the plain types
            base = next(c for c in (bool, int, float, str) if isinstance(x, c))
            self._value(base(x), path, stack)
        else:
            raise TypeError(
                f"structural equality/hash does not support a {t.__name__} value "
                f"({x!r}) at {_render(path)}; use numbers, strings, lists, dicts or IR nodes"
            )


def _key_order(item: tuple[Any, Any]) -> tuple[str, str]:
    k = item[0]
    return (type(k).__name__, repr(k))


def _render(path: Any) -> str:
    if path is None:
        return "<untracked path>"
    steps = []
    while isinstance(path, tuple):
        path, step = path
        steps.append(step)
    steps.append(path)
    return "".join(reversed(steps))


# ----------------------------------------------------------------------------- public API


def structural_equal(a: Any, b: Any, map_free_vars: bool = False) -> bool:
    """True if ``a`` and ``b`` are equal up to a consistent renaming of defined variables.

    Args:
        a, b: IR nodes (or lists/dicts of them and of plain values).
        map_free_vars: also allow free variables and buffers to be renamed
            (bijectively); otherwise they must be the same objects.
    """
    ta = _Canon(not map_free_vars, track=False).run(a).tokens
    tb = _Canon(not map_free_vars, track=False).run(b).tokens
    return ta == tb


def assert_structural_equal(a: Any, b: Any, map_free_vars: bool = False) -> None:
    """Raise ``ValueError`` naming the path of the first difference, with both sides printed."""
    ca = _Canon(not map_free_vars, track=True).run(a)
    cb = _Canon(not map_free_vars, track=True).run(b)
    if ca.tokens == cb.tokens:
        return
    n = min(len(ca.tokens), len(cb.tokens))
    i = next((k for k in range(n) if ca.tokens[k] != cb.tokens[k]), n)
    tok_a = ca.tokens[i] if i < len(ca.tokens) else "<end>"
    tok_b = cb.tokens[i] if i < len(cb.tokens) else "<end>"
    path_a, obj_a = ca.where[i] if i < len(ca.where) else ca.where[-1]
    _, obj_b = cb.where[i] if i < len(cb.where) else cb.where[-1]
    raise ValueError(
        f"structural mismatch at {_render(path_a)}: {tok_a} vs {tok_b}\n"
        f"  lhs: {_show(obj_a)}\n  rhs: {_show(obj_b)}\n"
        f"full lhs:\n{_show(a)}\nfull rhs:\n{_show(b)}"
    )


def structural_hash(node: Any) -> int:
    """A 63-bit non-negative hash consistent with :func:`structural_equal`.

    Deterministic across processes and machines (a BLAKE2b digest of the canonical form).
    Free variables are numbered by first occurrence, so the hash also agrees with
    ``structural_equal(..., map_free_vars=True)``.
    """
    tokens = _Canon(free_by_identity=False, track=False).run(node).tokens
    digest = hashlib.blake2b("\x00".join(tokens).encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1


def _show(x: Any) -> str:
    if not isinstance(x, Node):
        return repr(x)
    try:
        return str(x)
    except Exception as err:  # noqa: BLE001 - a broken printer must not hide the mismatch
        return f"<{type(x).__name__}: printer failed with {type(err).__name__}: {err}>"
