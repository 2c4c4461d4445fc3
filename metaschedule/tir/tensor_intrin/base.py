"""``TensorIntrin``: a named pair of PrimFuncs, what a piece of hardware computes and how.

``desc`` describes the computation with ordinary loops and a block (the pattern
:meth:`Schedule.tensorize` looks for); ``impl`` computes the same thing with a call of a
C function over its buffers' addresses (:mod:`.calls`). Their parameters correspond by
position and have the same shapes and dtypes.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..expr import Call
from ..function import PrimFunc
from ..functor import post_order_visit

__all__ = ["TensorIntrin"]


@dataclass(frozen=True, eq=False)
class TensorIntrin:
    """A tensor intrinsic (TVM's ``tir.TensorIntrin``).

    Attributes:
        desc: the computation, a PrimFunc whose body is one loop nest around one block.
        impl: its implementation, with the same parameters (by position, shape and dtype).
        name: the name it is registered under ("" until registered).
    """

    desc: PrimFunc
    impl: PrimFunc
    name: str = ""

    def __post_init__(self):
        _check_params(self.desc, self.impl)

    @property
    def calls(self) -> tuple[str, ...]:
        """The functions the implementation calls (C functions of the code generator's
        registry, :mod:`metaschedule.codegen.c_intrin`), in first-use order."""
        found: list[str] = []

        def visit(node):
            if isinstance(node, Call) and node.op not in found:
                found.append(node.op)

        post_order_visit(self.impl.body, visit)
        return tuple(op for op in found if op not in ("address_of", "buffer_stride"))

    @staticmethod
    def register(name: str, desc: PrimFunc, impl: PrimFunc, override: bool = False) -> None:
        """Register ``desc``/``impl`` under ``name``.

        Raises:
            ValueError: ``name`` is taken (and ``override`` is False), or the two
                functions' parameters differ.
        """
        if not isinstance(name, str) or not name:
            raise ValueError(f"a tensor intrinsic needs a non-empty name, got {name!r}")
        if name in _REGISTRY and not override:
            raise ValueError(
                f"tensor intrinsic {name!r} is already registered; pass override=True to replace it"
            )
        _REGISTRY[name] = TensorIntrin(desc, impl, name)

    @staticmethod
    def get(name: str, allow_missing: bool = False) -> TensorIntrin | None:
        """The intrinsic registered under ``name``.

        Raises:
            ValueError: no such intrinsic (unless ``allow_missing``: then None).
        """
        intrin = _REGISTRY.get(name)
        if intrin is None and not allow_missing:
            raise ValueError(
                f"no tensor intrinsic named {name!r}; registered: {', '.join(sorted(_REGISTRY))}"
            )
        return intrin

    @staticmethod
    def names() -> list[str]:
        """The registered names, sorted."""
        return sorted(_REGISTRY)


_REGISTRY: dict[str, TensorIntrin] = {}


def _check_params(desc: PrimFunc, impl: PrimFunc) -> None:
    if not isinstance(desc, PrimFunc) or not isinstance(impl, PrimFunc):
        raise TypeError(
            f"desc and impl must be PrimFuncs, got {type(desc).__name__} and {type(impl).__name__}"
        )
    if len(desc.params) != len(impl.params):
        raise ValueError(
            f"desc has {len(desc.params)} parameters and impl {len(impl.params)}; they "
            "correspond by position"
        )
    for k, (d, i) in enumerate(zip(desc.params, impl.params)):
        if d.dtype != i.dtype or d.static_shape() != i.static_shape():
            raise ValueError(
                f"parameter {k} is {d.name}: {d.dtype}{list(d.static_shape())} in desc but "
                f"{i.name}: {i.dtype}{list(i.static_shape())} in impl"
            )
