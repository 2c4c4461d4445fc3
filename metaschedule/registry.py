"""The one registry behind every component family's ``create(kind, ...)``.

Each family (builder, runner, database, cost model, ...) is a namespace of kinds; a kind
names a factory: a class, or a function returning the component (for ``schedule_rule``,
``postproc``, ``mutator`` and ``measure_callback``, the default list or dict of a target
kind). Implementations register themselves where they are defined::

    from metaschedule.registry import register

    @register("runner", "local")
    class LocalRunner(PyRunner): ...

and the family's ``create`` looks the kind up::

    Runner.create("local", timeout_sec=3)   # == registry.create("runner", "local", ...)

Third-party packages add kinds the same way at import time, or without being imported
first through the entry-point group :data:`ENTRY_POINT_GROUP`; the entry point's name is
``"<family>.<kind>"`` and its value the factory (or a module that registers on import)::

    # pyproject.toml of a plugin
    [project.entry-points."metaschedule.components"]
    "runner.my-cluster" = "my_plugin.runner:ClusterRunner"

Entry points are read lazily, only when a kind is not registered already. An unknown
kind is a ``ValueError`` listing the known ones; nothing returns an empty default.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib import metadata
from typing import Any, TypeVar

__all__ = [
    "ENTRY_POINT_GROUP",
    "FAMILIES",
    "create",
    "factory",
    "kinds",
    "lazy",
    "register",
    "registered",
    "unregister",
]

#: The entry-point group plugins use; names are ``"<family>.<kind>"``.
ENTRY_POINT_GROUP = "metaschedule.components"

#: family -> how errors name it.
FAMILIES: dict[str, str] = {
    "builder": "builder",
    "runner": "runner",
    "database": "database",
    "search_strategy": "search strategy",
    "space_generator": "space generator",
    "task_scheduler": "task scheduler",
    "mutator": "mutator",
    "measure_callback": "measure callback",
    "cost_model": "cost model",
    "feature_extractor": "feature extractor",
    "schedule_rule": "schedule rule",
    "postproc": "postprocessor",
}

F = TypeVar("F", bound=Callable[..., Any])

_REGISTRY: dict[str, dict[str, Callable[..., Any]]] = {family: {} for family in FAMILIES}


def _family(family: str) -> dict[str, Callable[..., Any]]:
    if family not in _REGISTRY:
        raise ValueError(
            f"unknown component family {family!r}; expected one of: {', '.join(FAMILIES)}"
        )
    return _REGISTRY[family]


def register(
    family: str,
    kind: str,
    factory: Callable[..., Any] | None = None,
    *,
    aliases: tuple[str, ...] = (),
    replace: bool = False,
) -> Any:
    """Register ``factory`` as ``kind`` (and ``aliases``) of ``family``.

    Used as a decorator (``@register("runner", "local")``) or called with the factory.

    Args:
        family: one of :data:`FAMILIES`.
        kind: the name ``create`` is called with.
        factory: a class or function; called with ``create``'s arguments after the kind.
        aliases: more names for the same factory (e.g. ``"cpu"`` for ``"llvm"``).
        replace: allow replacing a kind registered by another factory.

    Returns:
        ``factory`` (so the decorator leaves the class as it was).

    Raises:
        ValueError: an unknown family, or ``kind`` already taken and ``replace`` not set.
    """
    table = _family(family)

    def add(fn: F) -> F:
        if not callable(fn):
            raise TypeError(f"a {FAMILIES[family]} factory must be callable, got {fn!r}")
        for name in (kind, *aliases):
            old = table.get(name)
            if old is not None and old is not fn and not replace and not _same(old, fn):
                raise ValueError(
                    f"{FAMILIES[family]} kind {name!r} is already registered to "
                    f"{_describe(old)}; pass replace=True to override it"
                )
            table[name] = fn
        return fn

    return add if factory is None else add(factory)


def unregister(family: str, kind: str) -> None:
    """Forget ``kind`` of ``family`` (no error if it is not registered)."""
    _family(family).pop(kind, None)


@contextmanager
def registered(family: str, kind: str, factory: Callable[..., Any]) -> Iterator[None]:
    """Register ``factory`` as ``kind`` for the duration of a ``with`` block (tests)."""
    table = _family(family)
    old = table.get(kind)
    table[kind] = factory
    try:
        yield
    finally:
        if old is None:
            table.pop(kind, None)
        else:
            table[kind] = old


def kinds(family: str) -> list[str]:
    """The known kinds of ``family``: registered ones and those plugins offer, sorted."""
    known = set(_family(family))
    known.update(kind for kind, _ in _entry_points(family))
    return sorted(known)


def factory(family: str, kind: str) -> Callable[..., Any]:
    """The factory registered as ``kind`` of ``family``, loading a plugin on a miss.

    Raises:
        ValueError: the kind is unknown; the message lists the known kinds.
    """
    table = _family(family)
    if not isinstance(kind, str):
        raise TypeError(f"a {FAMILIES[family]} kind must be a string, got {kind!r}")
    if kind not in table:
        _load_plugin(family, kind)
    if kind not in table:
        raise ValueError(
            f"unknown {FAMILIES[family]} kind {kind!r}; expected one of: "
            f"{', '.join(kinds(family)) or '(none registered)'}"
        )
    return table[kind]


def create(family: str, kind: str, /, *args: Any, **kwargs: Any) -> Any:
    """Build the component ``kind`` of ``family`` with the given arguments.

    Raises:
        ValueError: the kind is unknown (the message lists the known kinds).
        TypeError: the arguments do not fit the kind's factory (the message names both).
    """
    fn = factory(family, kind)
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # some builtins have none: let the call check
        signature = None
    if signature is not None:
        try:
            signature.bind(*args, **kwargs)
        except TypeError as err:
            raise TypeError(
                f"{FAMILIES[family]} kind {kind!r} ({_describe(fn)}) does not take these "
                f"arguments: {err}; its parameters are {signature}"
            ) from None
    return fn(*args, **kwargs)


def lazy(spec: Callable[..., Any] | str) -> Callable[..., Any]:
    """``spec`` itself if callable; for a ``"module:attr"`` string, a factory that imports
    ``attr`` on its first call (so registering does not import the implementation).

    Raises:
        TypeError: ``spec`` is neither.
    """
    if callable(spec):
        return spec
    if not (isinstance(spec, str) and ":" in spec):
        raise TypeError(f"expected a function or a 'module:function' string, got {spec!r}")
    module_name, attr = spec.split(":", 1)

    def load_and_call(*args: Any, **kwargs: Any) -> Any:
        return getattr(importlib.import_module(module_name), attr)(*args, **kwargs)

    load_and_call.__qualname__ = load_and_call.__name__ = f"lazy({spec})"
    return load_and_call


# ----------------------------------------------------------------------------- plugins


def _entry_points(family: str) -> list[tuple[str, metadata.EntryPoint]]:
    out = []
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        fam, _, kind = ep.name.partition(".")
        if fam == family and kind:
            out.append((kind, ep))
    return out


def _load_plugin(family: str, kind: str) -> None:
    for name, ep in _entry_points(family):
        if name != kind:
            continue
        try:
            loaded = ep.load()
        except Exception as err:  # a broken plugin must not hide what went wrong
            raise ImportError(
                f"plugin entry point {ep.name!r} = {ep.value!r} of group "
                f"{ENTRY_POINT_GROUP!r} failed to load: {err}"
            ) from err
        table = _REGISTRY[family]
        if kind not in table and callable(loaded) and not inspect.ismodule(loaded):
            table[kind] = loaded  # the entry point names the factory itself
        return


def _same(a: Callable[..., Any], b: Callable[..., Any]) -> bool:
    """True for one definition seen twice (a module imported again, e.g. by reload)."""
    return (getattr(a, "__module__", None), getattr(a, "__qualname__", None)) == (
        getattr(b, "__module__", None),
        getattr(b, "__qualname__", None),
    )


def _describe(fn: Callable[..., Any]) -> str:
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"
