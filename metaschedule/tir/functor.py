"""Generic traversal of the IR: a visitor, a rewriting mutator, and ``substitute``.

Both dispatch on the node's class name (``visit_For``, ``visit_BufferLoad``, ...)
and fall back to walking the dataclass fields, so a pass only writes the cases it
cares about. The mutator rebuilds a node only when one of its children changed.
Buffers are visited through ``visit_buffer`` (a hook to substitute buffers).

Speed: the tuner walks thousands of trees, so dispatch is resolved once per
(functor class, value type) into a table kept on the class, and each node class's
field names are computed once. A table is rebuilt when a ``visit*`` method is
assigned to or deleted from the class or a base class, and an instance whose
``__init__`` sets a ``visit*`` attribute gets a table of its own (a ``visit*``
attribute set later on an instance is not seen: define handlers on the class).
Unless ``visit`` itself is overridden, fields annotated as plain ``str``, ``int``,
``float`` or ``bool`` (names, dtypes, constant values) are not walked, since they
hold no nodes; an overridden ``visit`` still receives every field value.
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Callable, Mapping
from typing import Any

from .buffer import Buffer
from .expr import Node, PrimExpr, Var, convert

# ----------------------------------------------------------------------------- node fields

_FIELD_NAMES: dict[type, tuple[str, ...]] = {}
_POSITIONAL: dict[type, bool] = {}


def node_fields(cls: type) -> tuple[str, ...]:
    """Names of the init fields of the dataclass ``cls``, in constructor order (cached).

    These are the fields the functors walk and :func:`rebuild` passes back.
    """
    names = _FIELD_NAMES.get(cls)
    if names is None:
        fields = [f for f in dataclasses.fields(cls) if f.init]
        names = tuple(f.name for f in fields)
        _POSITIONAL[cls] = not any(f.kw_only for f in fields)
        _FIELD_NAMES[cls] = names
    return names


_LEAF_ANNOTATIONS = frozenset({"str", "int", "float", "bool", str, int, float, bool})
_WALK_NAMES: dict[type, tuple[str, ...]] = {}


def walked_fields(cls: type) -> tuple[str, ...]:
    """The init fields of node class ``cls`` that may hold nodes (cached).

    A field annotated as a plain ``str``, ``int``, ``float`` or ``bool`` (a name, a
    dtype, a constant's value) never holds one, so the fast walks skip it.
    """
    names = _WALK_NAMES.get(cls)
    if names is None:
        leaf = {f.name for f in dataclasses.fields(cls) if f.type in _LEAF_ANNOTATIONS}
        names = tuple(n for n in node_fields(cls) if n not in leaf)
        _WALK_NAMES[cls] = names
    return names


def rebuild(node: Node, values: list[Any] | tuple[Any, ...]) -> Node:
    """A new node of ``node``'s class from all its init field values, in field order.

    Same as ``dataclasses.replace`` with every field given (``__post_init__`` runs, so
    the new node is validated), without its per-call field introspection.
    """
    cls = type(node)
    names = node_fields(cls)
    if _POSITIONAL[cls]:
        return cls(*values)
    return cls(**dict(zip(names, values)))


def replace_fields(node: Node, **changes: Any) -> Node:
    """``dataclasses.replace(node, **changes)`` without its per-call field introspection.

    ``__post_init__`` runs on the new node, as with ``dataclasses.replace``.
    """
    names = node_fields(type(node))
    values = [changes.pop(n) if n in changes else getattr(node, n) for n in names]
    if changes:  # unknown or init=False fields: let dataclasses raise its usual error
        return dataclasses.replace(node, **dict(zip(names, values)), **changes)
    return rebuild(node, values)


# ----------------------------------------------------------------------------- dispatch tables
#
# A table maps the type of a visited value to a handler ``h(functor, value)``, or to
# None for values that are not walked (numbers, strings, enums, ...). "Fast" tables
# belong to functors whose ``visit`` is the base one: their handlers dispatch the
# children through the table directly. Otherwise handlers call ``self.visit`` on
# every child, exactly as the plain recursive definition does.

_LEAF, _SEQ, _LIST, _DICT, _BUFFER, _NODE = range(6)


def _kind(t: type) -> int:
    if issubclass(t, tuple):
        return _SEQ
    if issubclass(t, list):
        return _LIST
    if issubclass(t, dict):
        return _DICT
    if issubclass(t, Buffer):
        return _BUFFER
    if issubclass(t, Node):
        return _NODE
    return _LEAF


def _lookup_static(cls: type, name: str) -> tuple[bool, Any]:
    """``(found, raw attribute)`` of ``name`` in the class hierarchy, without binding."""
    for klass in cls.__mro__:
        d = klass.__dict__
        if name in d:
            return True, d[name]
    return False, None


def _method_handler(name: str) -> Callable[[Any, Any], Any]:
    """A handler that looks ``name`` up on the functor at every call (exact semantics)."""

    def handler(self, value):
        return getattr(self, name)(value)

    return handler


def _optional_handler(name: str) -> Callable[[Any, Any], Any]:
    """Calls the functor's attribute ``name`` if it resolves to one, else ``generic_visit``."""

    def handler(self, value):
        method = getattr(self, name, None)
        if method is None:
            return self.generic_visit(value)
        return method(value)

    return handler


class _Table(dict):
    """Dispatch table of one functor class; entries are resolved on first use."""

    def __init__(self, owner: type, mutator: bool):
        super().__init__()
        self.owner = owner
        self.mutator = mutator
        base = Mutator if mutator else Visitor
        self.fast = _lookup_static(owner, "visit")[1] is base.__dict__["visit"]
        self.dynamic = _lookup_static(owner, "__getattr__")[0]
        gen = _lookup_static(owner, "generic_visit")[1]
        if gen is base.__dict__["generic_visit"]:
            if self.fast:
                self.generic = _M_FAST if mutator else _V_FAST
            else:
                self.generic = _M_CALL if mutator else _V_CALL
        else:
            self.generic = None  # overridden: call it for nodes without a visit_ method
            self.generic_call = (
                gen if isinstance(gen, types.FunctionType) else _method_handler("generic_visit")
            )

    def __missing__(self, t: type):
        h = self._resolve(t)
        self[t] = h
        return h

    def _resolve(self, t: type):
        kind = _kind(t)
        if kind == _LEAF:
            return None
        if kind == _BUFFER:
            raw = _lookup_static(self.owner, "visit_buffer")[1]
            return raw if isinstance(raw, types.FunctionType) else _method_handler("visit_buffer")
        if kind != _NODE:
            if self.fast:
                return (_M_ITEMS_FAST if self.mutator else _V_ITEMS_FAST)[kind]
            return (_M_ITEMS_CALL if self.mutator else _V_ITEMS_CALL)[kind]
        name = "visit_" + t.__name__
        found, raw = _lookup_static(self.owner, name)
        if found and isinstance(raw, types.FunctionType):
            return raw
        if found or self.dynamic:  # a descriptor or __getattr__: resolve at every call
            return _optional_handler(name)
        if self.generic is None:
            return self.generic_call
        generic = self.generic[t]
        if generic is _v_nothing or generic is _m_nothing:
            return None  # the same as not visiting the node at all
        return generic


class _InstanceTable(dict):
    """Dispatch table of one functor instance that has ``visit*`` instance attributes.

    Every handler resolves through ``getattr`` on the instance, as plain attribute
    lookup would.
    """

    def __init__(self, mutator: bool):
        super().__init__()
        self.mutator = mutator
        self.fast = False
        self.generic = _M_CALL if mutator else _V_CALL

    def __missing__(self, t: type):
        kind = _kind(t)
        if kind == _LEAF:
            h = None
        elif kind == _BUFFER:
            h = _method_handler("visit_buffer")
        elif kind != _NODE:
            h = (_M_ITEMS_CALL if self.mutator else _V_ITEMS_CALL)[kind]
        else:
            h = _optional_handler("visit_" + t.__name__)
        self[t] = h
        return h


def _is_dispatch_name(name: str) -> bool:
    return name == "visit" or name == "generic_visit" or name.startswith("visit_")


class _FunctorMeta(type):
    """Gives each functor class its own dispatch table, rebuilt when the class changes."""

    def __init__(cls, name, bases, ns, **kwargs):
        super().__init__(name, bases, ns, **kwargs)
        if _READY:
            _reset_tables(cls)

    def __setattr__(cls, name: str, value: Any) -> None:
        super().__setattr__(name, value)
        if _is_dispatch_name(name) or name == "__getattr__":
            _reset_tables(cls)

    def __delattr__(cls, name: str) -> None:
        super().__delattr__(name)
        if _is_dispatch_name(name) or name == "__getattr__":
            _reset_tables(cls)

    def __call__(cls, *args, **kwargs):
        self = super().__call__(*args, **kwargs)
        d = getattr(self, "__dict__", None)
        # the join is a cheap pre-test: instances rarely have attributes named visit*
        if d and "visit" in " ".join(d) and any(_is_dispatch_name(k) for k in d):
            d["_ms_table"] = _InstanceTable(issubclass(cls, Mutator))
        return self


def _reset_tables(cls: type) -> None:
    """A fresh table for ``cls`` and every subclass (they may inherit what changed)."""
    type.__setattr__(cls, "_ms_table", _Table(cls, issubclass(cls, Mutator)))
    for sub in type.__subclasses__(cls):
        _reset_tables(sub)


_READY = False  # tables need Visitor and Mutator; both get theirs at the end of the module

# ----------------------------------------------------------------------------- Visitor


class Visitor(metaclass=_FunctorMeta):
    """Walks every node; override ``visit_<ClassName>(node)`` and call ``generic_visit``."""

    _ms_table: Any

    def visit(self, node: Any) -> None:
        h = self._ms_table[type(node)]
        if h is not None:
            h(self, node)

    def generic_visit(self, node: Node) -> None:
        table = self._ms_table
        generic = table.generic
        if generic is None:  # an overridden generic_visit called the base one
            generic = _V_FAST if table.fast else _V_CALL
        generic[type(node)](self, node)

    def visit_buffer(self, buffer: Buffer) -> None:
        """Called for every buffer reference; does not descend into its shape by default."""


def _v_generic_fast(cls: type):
    names = walked_fields(cls)
    if not names:
        return _v_nothing

    def walk(self, node):
        table = self._ms_table
        for name in names:
            v = getattr(node, name)
            h = table[type(v)]
            if h is not None:
                h(self, v)

    return walk


def _v_generic_call(cls: type):
    names = node_fields(cls)

    def walk(self, node):
        visit = self.visit
        for name in names:
            visit(getattr(node, name))

    return walk


def _v_nothing(self, node):
    return None


def _v_items_fast(self, items):
    table = self._ms_table
    for v in items:
        h = table[type(v)]
        if h is not None:
            h(self, v)


def _v_values_fast(self, d):
    _v_items_fast(self, d.values())


def _v_items_call(self, items):
    visit = self.visit
    for v in items:
        visit(v)


def _v_values_call(self, d):
    _v_items_call(self, d.values())


_V_ITEMS_FAST = {_SEQ: _v_items_fast, _LIST: _v_items_fast, _DICT: _v_values_fast}
_V_ITEMS_CALL = {_SEQ: _v_items_call, _LIST: _v_items_call, _DICT: _v_values_call}


class _GenericTable(dict):
    """Node type -> generic walk over its init fields, built by ``factory``."""

    def __init__(self, factory):
        super().__init__()
        self.factory = factory

    def __missing__(self, t: type):
        h = self.factory(t)
        self[t] = h
        return h


_V_FAST = _GenericTable(_v_generic_fast)
_V_CALL = _GenericTable(_v_generic_call)


# ----------------------------------------------------------------------------- Mutator


class Mutator(metaclass=_FunctorMeta):
    """Rebuilds the tree bottom-up; override ``visit_<ClassName>(node)`` to rewrite."""

    _ms_table: Any

    def visit(self, node: Any) -> Any:
        h = self._ms_table[type(node)]
        if h is None:
            return node
        return h(self, node)

    def generic_visit(self, node: Node) -> Node:
        table = self._ms_table
        generic = table.generic
        if generic is None:  # an overridden generic_visit called the base one
            generic = _M_FAST if table.fast else _M_CALL
        return generic[type(node)](self, node)

    def visit_buffer(self, buffer: Buffer) -> Buffer:
        return buffer


def _m_generic_fast(cls: type):
    names = node_fields(cls)
    walked = walked_fields(cls)
    if not walked:
        return _m_nothing

    def walk(self, node):
        table = self._ms_table
        changes = None
        for name in walked:
            old = getattr(node, name)
            h = table[type(old)]
            if h is not None:
                new = h(self, old)
                if new is not old:
                    if changes is None:
                        changes = {}
                    changes[name] = new
        if changes is None:
            return node
        return rebuild(node, [changes[n] if n in changes else getattr(node, n) for n in names])

    return walk


def _m_nothing(self, node):
    return node


def _m_generic_call(cls: type):
    names = node_fields(cls)

    def walk(self, node):
        visit = self.visit
        values = []
        changed = False
        for name in names:
            old = getattr(node, name)
            new = visit(old)
            if new is not old:
                changed = True
            values.append(new)
        return rebuild(node, values) if changed else node

    return walk


def _m_tuple_fast(self, node):
    table = self._ms_table
    out = []
    changed = False
    for x in node:
        h = table[type(x)]
        if h is not None:
            y = h(self, x)
            if y is not x:
                changed = True
            out.append(y)
        else:
            out.append(x)
    return tuple(out) if changed else node


def _m_list_fast(self, node):
    table = self._ms_table
    out = []
    for x in node:
        h = table[type(x)]
        out.append(x if h is None else h(self, x))
    return out


def _m_dict_fast(self, node):
    table = self._ms_table
    out = {}
    changed = False
    for k, v in node.items():
        h = table[type(v)]
        if h is not None:
            w = h(self, v)
            if w is not v:
                changed = True
            out[k] = w
        else:
            out[k] = v
    return out if changed else node


def _m_tuple_call(self, node):
    new = tuple(self.visit(x) for x in node)
    return node if all(a is b for a, b in zip(new, node)) else new


def _m_list_call(self, node):
    return [self.visit(x) for x in node]


def _m_dict_call(self, node):
    new_d = {k: self.visit(v) for k, v in node.items()}
    return node if all(new_d[k] is node[k] for k in node) else new_d


_M_ITEMS_FAST = {_SEQ: _m_tuple_fast, _LIST: _m_list_fast, _DICT: _m_dict_fast}
_M_ITEMS_CALL = {_SEQ: _m_tuple_call, _LIST: _m_list_call, _DICT: _m_dict_call}
_M_FAST = _GenericTable(_m_generic_fast)
_M_CALL = _GenericTable(_m_generic_call)

_READY = True
_reset_tables(Visitor)
_reset_tables(Mutator)


# ----------------------------------------------------------------------------- helpers


class _Kinds(dict):
    """Value type -> _LEAF/_SEQ/_LIST/_DICT/_BUFFER, or the field names of a node type."""

    def __missing__(self, t: type):
        kind = _kind(t)
        out = walked_fields(t) if kind == _NODE else kind
        self[t] = out
        return out


_KINDS = _Kinds()


def post_order_visit(node: Any, fn: Callable[[Node], None]) -> None:
    """Call ``fn`` on every node (children first). Buffers are not descended into."""
    kinds = _KINDS

    def walk(x):
        k = kinds[type(x)]
        if k.__class__ is tuple:
            for name in k:
                walk(getattr(x, name))
            fn(x)
        elif k == _SEQ or k == _LIST:
            for y in x:
                walk(y)
        elif k == _DICT:
            for y in x.values():
                walk(y)

    walk(node)


def any_node(node: Any, pred: Callable[[Node], bool]) -> bool:
    """True if ``pred`` holds for some node in ``node``; stops at the first one.

    Walks what :func:`post_order_visit` walks (parents are tested before children).
    """
    kinds = _KINDS

    def walk(x) -> bool:
        k = kinds[type(x)]
        if k.__class__ is tuple:
            if pred(x):
                return True
            for name in k:
                if walk(getattr(x, name)):
                    return True
        elif k == _SEQ or k == _LIST:
            for y in x:
                if walk(y):
                    return True
        elif k == _DICT:
            for y in x.values():
                if walk(y):
                    return True
        return False

    return walk(node)


def _collect(x: Any, out: set[Var]) -> None:
    k = _KINDS[type(x)]
    if k.__class__ is tuple:
        if isinstance(x, Var):
            out.add(x)
        for name in k:
            _collect(getattr(x, name), out)
    elif k == _SEQ or k == _LIST:
        for y in x:
            _collect(y, out)
    elif k == _DICT:
        for y in x.values():
            _collect(y, out)


class _Substituter(Mutator):
    def __init__(self, vmap: Mapping[Var, PrimExpr], bmap: Mapping[Buffer, Buffer] | None):
        self.vmap = vmap
        self.bmap = bmap or {}

    def visit_Var(self, v: Var) -> PrimExpr:
        return self.vmap.get(v, v)

    def visit_buffer(self, b: Buffer) -> Buffer:
        return self.bmap.get(b, b)


def substitute(node: Any, vmap: Mapping[Var, Any], bmap: Mapping[Buffer, Buffer] | None = None):
    """Replace variables (and optionally buffers) in ``node``; Python numbers are converted."""
    vmap = {k: convert(v) for k, v in vmap.items()}
    if not vmap and not bmap:
        return node
    return _Substituter(vmap, bmap).visit(node)


def has_loop_kind(node: Any, kind: Any) -> bool:
    """Whether a ``For`` loop of ``kind`` (a :class:`~.stmt.ForKind`) is in ``node``; the
    walk stops at the first one."""
    found = False

    class _Finder(Visitor):
        def visit_For(self, loop: Any) -> None:  # a For (the visitor dispatches on it)
            nonlocal found
            found = found or loop.kind is kind
            if not found:
                self.generic_visit(loop)

    _Finder().visit(node)
    return found


def collect_vars(node: Any) -> set[Var]:
    """All variables used in ``node`` (free or bound)."""
    out: set[Var] = set()
    _collect(node, out)
    return out
