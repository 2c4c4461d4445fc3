"""JSON round trip of IR nodes, generic over the node dataclasses.

The format is a node table in children-first order::

    {"version": 1, "root": 7, "nodes": [{"type": "Var", "fields": {"name": "i", ...}}, ...]}

Each field holds an encoded value: JSON null/bool/int/str and finite floats as
themselves, lists as arrays, and tagged objects for the rest:
``{"node": k}`` (a reference to an earlier entry), ``{"tuple": [...]}``,
``{"dict": {...}}`` (string keys), ``{"items": [[k, v], ...]}`` (other keys),
``{"float": "nan" | "inf" | "-inf"}`` and ``{"enum": "ForKind", "name": "SERIAL"}``.

A node object used in several places is stored once, so sharing (the same ``Var``
or ``Buffer`` at every use) survives the round trip. Node classes and enums opt in
with :func:`register_node`; every node class of the tir core is registered here.

Loading checks what a file could plant (IR JSON comes from databases and other files):
a name (every string field of a node but a ``StringImm``'s value, and the function names
of an ``IRModule``) holding a control character (below U+0020, U+007F) is rejected; a
loop's ``thread_binding`` must be a GPU thread axis (``threadIdx.x``, ...); and a table
whose nodes, counted at every use of a shared one, exceed :data:`MAX_TREE_SIZE` is
rejected, since hashing and printing walk that tree (a few lines of doubly shared
``Add`` nodes would take years). Each raises ``ValueError`` naming the node.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
import re
from typing import Any

import numpy as np

from . import buffer as _buffer
from . import expr as _expr
from . import function as _function
from . import stmt as _stmt
from .expr import Node

__all__ = [
    "FORMAT_VERSION",
    "register_node",
    "registered_types",
    "save_json",
    "load_json",
    "to_json_dict",
    "from_json_dict",
]

FORMAT_VERSION = 1

MAX_TREE_SIZE = 1 << 20
"""The most nodes a loaded IR tree may have, counting a shared node at every use."""

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_THREAD_AXIS = re.compile(r"(blockIdx|threadIdx|vthread)\.[xyz]")

_REGISTRY: dict[str, type] = {}
_NAMES: dict[type, str] = {}


def register_node(cls: type, name: str | None = None) -> type:
    """Make a node dataclass (or an enum used in node fields) serializable under ``name``.

    Usable as a decorator. ``name`` defaults to the class name; registering a different
    class under a taken name is a ``ValueError``.
    """
    is_node = isinstance(cls, type) and issubclass(cls, Node) and dataclasses.is_dataclass(cls)
    is_enum = isinstance(cls, type) and issubclass(cls, enum.Enum)
    if not (is_node or is_enum):
        raise TypeError(f"register_node expects a Node dataclass or an Enum class, got {cls!r}")
    name = name or cls.__name__
    other = _REGISTRY.get(name)
    if other is not None and other is not cls:
        raise ValueError(
            f"cannot register {cls.__module__}.{cls.__qualname__} as {name!r}: that name is "
            f"taken by {other.__module__}.{other.__qualname__}; pass another name"
        )
    _REGISTRY[name] = cls
    _NAMES[cls] = name
    return cls


def registered_types() -> dict[str, type]:
    """A copy of the registry: serialized name -> class."""
    return dict(_REGISTRY)


def _register_core() -> None:
    for mod in (_expr, _buffer, _stmt, _function):
        for obj in vars(mod).values():
            if not isinstance(obj, type) or obj.__module__ != mod.__name__:
                continue
            if (issubclass(obj, Node) and dataclasses.is_dataclass(obj)) or (
                issubclass(obj, enum.Enum)
            ):
                register_node(obj)


_register_core()

# ----------------------------------------------------------------------------- saving


def _init_fields(cls: type) -> list[dataclasses.Field]:
    return [f for f in dataclasses.fields(cls) if f.init]


def _children(x: Any, out: list) -> None:
    """Append the nodes directly inside the value ``x`` (looking through containers)."""
    if isinstance(x, Node):
        out.append(x)
    elif isinstance(x, (tuple, list)):
        for item in x:
            _children(item, out)
    elif isinstance(x, dict):
        for k, v in x.items():
            _children(k, out)
            _children(v, out)


def to_json_dict(root: Node) -> dict[str, Any]:
    """The JSON-ready dict of ``root`` (see the module docstring for the format)."""
    if not isinstance(root, Node):
        raise TypeError(f"save_json expects an IR node, got {type(root).__name__}: {root!r}")
    index: dict[int, int] = {}
    order: list[Node] = []
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:  # iterative post-order: children get smaller indices than parents
        node, expanded = stack.pop()
        if id(node) in index:
            continue
        if expanded:
            index[id(node)] = len(order)
            order.append(node)
            continue
        if type(node) not in _NAMES:
            raise ValueError(
                f"cannot serialize a {type(node).__qualname__}: the class is not registered; "
                "call metaschedule.tir.serialize.register_node on it"
            )
        stack.append((node, True))
        kids: list[Node] = []
        for f in _init_fields(type(node)):
            _children(getattr(node, f.name), kids)
        for kid in reversed(kids):
            if id(kid) not in index:
                stack.append((kid, False))
    entries = []
    for node in order:
        cls = type(node)
        where = f"{_NAMES[cls]} node"
        fields = {
            f.name: _encode(getattr(node, f.name), index, f"{where}, field {f.name!r}")
            for f in _init_fields(cls)
        }
        entries.append({"type": _NAMES[cls], "fields": fields})
    return {"version": FORMAT_VERSION, "root": index[id(root)], "nodes": entries}


def _encode(x: Any, index: dict[int, int], where: str) -> Any:
    if isinstance(x, Node):
        return {"node": index[id(x)]}
    t = type(x)
    if x is None or t is bool or t is int or t is str:
        return x
    if t is float:
        if math.isfinite(x):
            return x
        return {"float": "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")}
    if isinstance(x, enum.Enum):
        if t not in _NAMES:
            raise ValueError(f"cannot serialize enum {t.__qualname__} ({where}): not registered")
        return {"enum": _NAMES[t], "name": x.name}
    if t is list:
        return [_encode(v, index, where) for v in x]
    if t is tuple:
        return {"tuple": [_encode(v, index, where) for v in x]}
    if t is dict:
        if all(type(k) is str for k in x):
            return {"dict": {k: _encode(v, index, where) for k, v in x.items()}}
        return {
            "items": [[_encode(k, index, where), _encode(v, index, where)] for k, v in x.items()]
        }
    if isinstance(x, np.generic):
        return _encode(x.item(), index, where)
    raise TypeError(
        f"cannot serialize a {t.__name__} value ({x!r}) in {where}; "
        "expected numbers, strings, lists, tuples, dicts, enums or IR nodes"
    )


def save_json(node: Node, indent: int | None = None) -> str:
    """Serialize ``node`` to a JSON string (strict JSON: no NaN/Infinity literals)."""
    separators = (",", ":") if indent is None else None
    return json.dumps(to_json_dict(node), indent=indent, separators=separators, allow_nan=False)


# ----------------------------------------------------------------------------- loading


def _reject_constant(name: str) -> Any:
    raise ValueError(
        f"invalid JSON literal {name}; non-finite floats are written as tagged objects"
    )


def load_json(text: str) -> Node:
    """Rebuild the node saved by :func:`save_json`; malformed input raises ``ValueError``."""
    if not isinstance(text, (str, bytes, bytearray)):
        raise TypeError(f"load_json expects a JSON string, got {type(text).__name__}")
    try:
        data = json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as err:
        raise ValueError(f"load_json: not valid JSON: {err}") from None
    except RecursionError:
        raise ValueError("load_json: JSON nested too deeply to be IR") from None
    return from_json_dict(data)


def from_json_dict(data: Any) -> Node:
    """Rebuild a node from the dict produced by :func:`to_json_dict`.

    Raises:
        ValueError: malformed input, or input that fails the checks of the module
            docstring (a control character in a name, an unknown thread axis, a tree
            larger than :data:`MAX_TREE_SIZE`).
    """
    if not isinstance(data, dict):
        raise ValueError(f"IR JSON must be an object, got {type(data).__name__}")
    missing = {"version", "root", "nodes"} - set(data)
    if missing:
        raise ValueError(f"IR JSON lacks the keys {sorted(missing)}; has {sorted(data)}")
    if data["version"] != FORMAT_VERSION:
        raise ValueError(
            f"unsupported IR JSON version {data['version']!r}; this reader knows {FORMAT_VERSION}"
        )
    entries = data["nodes"]
    if not isinstance(entries, list):
        raise ValueError(f"IR JSON 'nodes' must be a list, got {type(entries).__name__}")
    nodes: list[Node] = []
    sizes: dict[int, int] = {}  # id(node) -> its tree size
    try:
        for i, entry in enumerate(entries):
            nodes.append(_build(i, entry, nodes, sizes))
    except RecursionError:
        raise ValueError("IR JSON nested too deeply") from None
    root = data["root"]
    if type(root) is not int or not 0 <= root < len(nodes):
        raise ValueError(f"IR JSON 'root' must be a node index in [0, {len(nodes)}), got {root!r}")
    return nodes[root]


def _build(i: int, entry: Any, nodes: list[Node], sizes: dict[int, int]) -> Node:
    if not isinstance(entry, dict) or set(entry) != {"type", "fields"}:
        raise ValueError(f"node {i}: expected an object with 'type' and 'fields', got {entry!r}")
    name, raw = entry["type"], entry["fields"]
    cls = _REGISTRY.get(name) if isinstance(name, str) else None
    if cls is None or not issubclass(cls, Node):
        raise ValueError(
            f"node {i}: unknown node type {name!r}; known types: {', '.join(sorted(_REGISTRY))}"
        )
    if not isinstance(raw, dict):
        raise ValueError(f"node {i} ({name}): 'fields' must be an object, got {raw!r}")
    fields = _init_fields(cls)
    known = {f.name for f in fields}
    unknown = set(raw) - known
    if unknown:
        raise ValueError(
            f"node {i} ({name}): unknown fields {sorted(unknown)}; expected {sorted(known)}"
        )
    kwargs = {}
    for f in fields:
        where = f"node {i} ({name}), field {f.name!r}"
        if f.name in raw:
            kwargs[f.name] = _decode(raw[f.name], nodes, where)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ValueError(f"{where}: missing")
        if f.name in kwargs:
            _check_field(f, kwargs[f.name], where)
            _check_name(cls, f.name, kwargs[f.name], where)
    kids: list[Node] = []
    _children(list(kwargs.values()), kids)
    size = 1 + sum(sizes.get(id(kid), 1) for kid in kids)
    if size > MAX_TREE_SIZE:
        raise ValueError(
            f"node {i} ({name}): its tree has {size} nodes counting every use of a shared "
            f"node, more than MAX_TREE_SIZE = {MAX_TREE_SIZE}; not IR that metaschedule wrote"
        )
    try:
        node = cls(**kwargs)
    except (TypeError, ValueError, IndexError, AttributeError, KeyError) as err:
        raise ValueError(
            f"node {i} ({name}): cannot build it: {type(err).__name__}: {err}"
        ) from err
    sizes[id(node)] = size
    return node


def _check_name(cls: type, field: str, value: Any, where: str) -> None:
    """Reject a name with a control character (it could end a comment of generated C)
    and a thread binding that is not a GPU thread axis (it is spelled into CUDA)."""
    if cls is _function.IRModule and field == "functions" and isinstance(value, dict):
        names = list(value)
    elif isinstance(value, str) and not (cls is _expr.StringImm and field == "value"):
        names = [value]
    else:
        return
    for text in names:
        if isinstance(text, str) and _CONTROL.search(text):
            raise ValueError(
                f"{where}: the name {text!r} holds a control character; names of IR "
                "loaded from JSON must be printable (a damaged or hostile file?)"
            )
    if cls is _stmt.For and field == "thread_binding" and not _THREAD_AXIS.fullmatch(value):
        raise ValueError(
            f"{where}: unknown thread axis {value!r}; expected blockIdx, threadIdx or "
            "vthread with .x, .y or .z"
        )


_PLAIN_TYPES: dict[str, Any] = {
    "str": str,
    "int": int,
    "float": (int, float),
    "bool": bool,
    "tuple": tuple,
    "dict": dict,
    "Node": Node,
    "PrimExpr": _expr.PrimExpr,
    "Stmt": _stmt.Stmt,
}


def _annotation_type(spec: str) -> Any:
    """The class an annotation string names, or None when we cannot check it (``Any``...)."""
    if spec in _PLAIN_TYPES:
        return _PLAIN_TYPES[spec]
    cls = _REGISTRY.get(spec)
    if cls is None:
        cls = next((c for c in _NAMES if c.__name__ == spec), None)
    return cls


def _check_field(f: dataclasses.Field, value: Any, where: str) -> None:
    """Check a decoded field against the simple forms of its annotation.

    Understood: ``X``, ``X | None``, ``tuple[X, ...]`` and ``dict[str, X]`` where X is a
    node class, a core base class or a plain type; anything else is not checked. This
    catches well-formed JSON that wires a node into the wrong place, which the node's
    constructor would not always notice.
    """
    spec = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", "")
    spec = spec.replace(" ", "").replace('"', "").replace("'", "")
    if spec.endswith("|None"):
        if value is None:
            return
        spec = spec[: -len("|None")]
    outer, inner = spec, None
    if spec.startswith("tuple[") and spec.endswith(",...]"):
        outer, inner = "tuple", spec[len("tuple[") : -len(",...]")]
    elif spec.startswith("dict[str,") and spec.endswith("]"):
        outer, inner = "dict", spec[len("dict[str,") : -1]
    expected = _annotation_type(outer)
    if expected is None:
        return
    if not isinstance(value, expected):
        raise ValueError(f"{where}: expected {spec}, got {type(value).__name__}: {value!r}")
    inner_type = _annotation_type(inner) if inner else None
    if inner_type is None:
        return
    items = value.values() if isinstance(value, dict) else value
    for item in items:
        if not isinstance(item, inner_type):
            raise ValueError(
                f"{where}: expected {spec}, got an item {type(item).__name__}: {item!r}"
            )


def _decode(x: Any, nodes: list[Node], where: str) -> Any:
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    if isinstance(x, list):
        return [_decode(v, nodes, where) for v in x]
    if not isinstance(x, dict):  # pragma: no cover - json.loads makes nothing else
        raise ValueError(f"{where}: unexpected value {x!r}")
    keys = set(x)
    if keys == {"node"}:
        k = x["node"]
        if type(k) is not int or not 0 <= k < len(nodes):
            raise ValueError(
                f"{where}: refers to node {k!r}, but only nodes 0..{len(nodes) - 1} come before it"
            )
        return nodes[k]
    if keys == {"tuple"} and isinstance(x["tuple"], list):
        return tuple(_decode(v, nodes, where) for v in x["tuple"])
    if keys == {"dict"} and isinstance(x["dict"], dict):
        return {k: _decode(v, nodes, where) for k, v in x["dict"].items()}
    if keys == {"items"} and isinstance(x["items"], list):
        out = {}
        for pair in x["items"]:
            if not isinstance(pair, list) or len(pair) != 2:
                raise ValueError(f"{where}: dict items must be [key, value] pairs, got {pair!r}")
            key = _decode(pair[0], nodes, where)
            try:
                out[key] = _decode(pair[1], nodes, where)
            except TypeError:
                raise ValueError(f"{where}: unhashable dict key {key!r}") from None
        return out
    if keys == {"float"} and x["float"] in ("nan", "inf", "-inf"):
        return float(x["float"])
    if keys == {"enum", "name"}:
        cls = _REGISTRY.get(x["enum"]) if isinstance(x["enum"], str) else None
        if cls is None or not issubclass(cls, enum.Enum):
            raise ValueError(f"{where}: unknown enum {x['enum']!r}")
        try:
            return cls[x["name"]]
        except (KeyError, TypeError):
            names = ", ".join(m.name for m in cls)
            raise ValueError(
                f"{where}: {x['enum']} has no member {x['name']!r}; members: {names}"
            ) from None
    raise ValueError(
        f"{where}: unrecognized encoded value {x!r}; expected one of the tags "
        "node, tuple, dict, items, float, enum"
    )
