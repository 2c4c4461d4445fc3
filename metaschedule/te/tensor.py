"""Tensor expressions: ``placeholder``, ``compute``, ``reduce_axis`` and reducers.

A :class:`Tensor` is the output of an :class:`Operation` (a placeholder or a compute)
and owns a :class:`~metaschedule.tir.Buffer` created when it is defined. Indexing a
tensor (``A[i, j]``) builds a ``BufferLoad`` of that buffer, so a compute body is
already TIR; :func:`~metaschedule.te.create_prim_func` only arranges the bodies into
blocks and loops.

Differences from TVM on purpose: shapes are static (a symbolic dimension is a
``ValueError``), ``Tensor.shape`` is a tuple of Python ints, and an operation has a
single output.
"""

from __future__ import annotations

import inspect
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..tir import op as _op
from ..tir.buffer import Buffer
from ..tir.dtype import SUPPORTED_DTYPES
from ..tir.expr import (
    BufferLoad,
    CommReducer,
    ExprLike,
    IntImm,
    PrimExpr,
    Reduce,
    Var,
    cast,
    const,
    convert,
)
from ..tir.functor import Visitor
from ..tir.stmt import IterType, IterVar, Range

# Maps each tensor's buffer back to its tensor, so that compute() can find the input
# tensors of a body from its BufferLoads. Values are weak: the entry lives exactly as
# long as the tensor does, so this is a lookup table, not state that changes behaviour.
_TENSOR_OF_BUFFER: weakref.WeakValueDictionary[Buffer, Tensor] = weakref.WeakValueDictionary()

# Neutral elements of reducers made with a custom ``init`` (whose CommReducer carries the
# init value as its identity); keyed weakly by the CommReducer, immutable once set.
_NEUTRAL: weakref.WeakKeyDictionary[CommReducer, PrimExpr] = weakref.WeakKeyDictionary()


def neutral_element(combiner: CommReducer) -> PrimExpr:
    """The value that leaves a reduction unchanged (differs from ``identity`` after init=)."""
    return _NEUTRAL.get(combiner, combiner.identity)


# ----------------------------------------------------------------------------- operations


class Operation:
    """The operation producing a tensor. Treated as immutable once built."""

    def __init__(self, name: str, tag: str, attrs: dict[str, Any] | None):
        self.name = name
        self.tag = tag
        self.attrs = dict(attrs or {})
        self._output: Tensor | None = None

    @property
    def num_outputs(self) -> int:
        return 1

    def output(self, index: int = 0) -> Tensor:
        if index != 0 or self._output is None:
            raise IndexError(f"operation {self.name} has one output, asked for output {index}")
        return self._output

    @property
    def input_tensors(self) -> tuple[Tensor, ...]:
        return ()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


class PlaceholderOp(Operation):
    """An input tensor: no body, its data comes from the caller."""

    def __init__(self, name: str, shape: tuple[int, ...], dtype: str):
        super().__init__(name, "", None)
        self.shape = shape
        self.dtype = dtype


class ComputeOp(Operation):
    """A tensor defined elementwise by ``body`` over the spatial ``axis``.

    ``body`` is a one-element tuple, as in TVM (``op.body[0]``); when it is a
    :class:`~metaschedule.tir.Reduce`, ``reduce_axis`` holds its reduction axes.
    """

    def __init__(
        self,
        name: str,
        tag: str,
        attrs: dict[str, Any] | None,
        axis: tuple[IterVar, ...],
        body: PrimExpr,
        inputs: tuple[Tensor, ...],
    ):
        super().__init__(name, tag, attrs)
        self.axis = axis
        self.body = (body,)
        self.reduce_axis: tuple[IterVar, ...] = body.axis if isinstance(body, Reduce) else ()
        self._inputs = inputs

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(int(iv.dom.extent) for iv in self.axis)

    @property
    def input_tensors(self) -> tuple[Tensor, ...]:
        return self._inputs


# ----------------------------------------------------------------------------- tensors


class Tensor:
    """The output of an operation; ``A[i, j]`` reads it inside a compute body."""

    __slots__ = ("op", "buffer", "value_index", "__weakref__")

    def __init__(self, op: Operation, buffer: Buffer, value_index: int = 0):
        self.op = op
        self.buffer = buffer
        self.value_index = value_index

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(int(s) for s in self.buffer.shape)

    @property
    def dtype(self) -> str:
        return self.buffer.dtype

    @property
    def name(self) -> str:
        return self.op.name

    @property
    def ndim(self) -> int:
        return len(self.buffer.shape)

    def __getitem__(self, indices) -> BufferLoad:
        if not isinstance(indices, tuple):
            indices = (indices,)
        if any(isinstance(i, slice) for i in indices):
            raise TypeError(
                f"tensor {self.name} cannot be sliced; index it with one expression per dimension"
            )
        if len(indices) != self.ndim:
            raise IndexError(
                f"tensor {self.name} has {self.ndim} dimensions {self.shape}, indexed with "
                f"{len(indices)} indices"
            )
        return BufferLoad(self.buffer, tuple(_index(i) for i in indices))

    def __iter__(self):
        # without this, Python would iterate by calling __getitem__(0), (1), ... forever
        raise TypeError(f"tensor {self.name} is not iterable; index it inside te.compute")

    def __call__(self, *indices) -> BufferLoad:
        return self[indices]

    def as_expr(self) -> BufferLoad:
        """A rank-0 tensor used as a scalar expression."""
        if self.ndim != 0:
            raise TypeError(f"tensor {self.name} of shape {self.shape} is not a scalar; index it")
        return self[()]

    def __repr__(self) -> str:
        return f"Tensor(name={self.name!r}, shape={self.shape}, dtype={self.dtype!r})"

    __hash__ = object.__hash__


def _index(i: Any) -> PrimExpr:
    e = convert(i.item() if isinstance(i, np.generic) else i)
    return e


def tensor_of_buffer(buffer: Buffer) -> Tensor | None:
    """The te tensor that owns ``buffer`` (None for a buffer made outside te)."""
    return _TENSOR_OF_BUFFER.get(buffer)


def _make_tensor(op: Operation, shape: tuple[int, ...], dtype: str) -> Tensor:
    buffer = Buffer(op.name, shape, dtype)
    tensor = Tensor(op, buffer)
    op._output = tensor
    _TENSOR_OF_BUFFER[buffer] = tensor
    return tensor


# ----------------------------------------------------------------------------- checks


def _check_shape(shape: Any, name: str) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer, IntImm, Var, str, PrimExpr)):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)):
        raise TypeError(f"shape of tensor {name} must be a tuple of ints, got {shape!r}")
    out = []
    for dim in shape:
        symbolic = isinstance(dim, PrimExpr) and not isinstance(dim, IntImm)
        if symbolic or isinstance(dim, str):
            raise ValueError(
                f"dynamic shapes are not supported yet: tensor {name} has the symbolic dimension "
                f"{dim!r} in shape {tuple(shape)}; use a static int"
            )
        if isinstance(dim, bool) or not isinstance(dim, (int, np.integer, IntImm)):
            raise TypeError(f"dimension {dim!r} of tensor {name} is not an int")
        value = int(dim)
        if value <= 0:
            raise ValueError(f"dimensions must be positive: tensor {name} has shape {tuple(shape)}")
        out.append(value)
    return tuple(out)


def _check_dtype(dtype: Any, name: str) -> str:
    if isinstance(dtype, np.dtype) or (isinstance(dtype, type) and issubclass(dtype, np.generic)):
        dtype = np.dtype(dtype).name
    if not isinstance(dtype, str) or dtype not in SUPPORTED_DTYPES:
        raise TypeError(
            f"unsupported dtype {dtype!r} for tensor {name}; expected one of: "
            f"{', '.join(SUPPORTED_DTYPES)}"
        )
    return dtype


# ----------------------------------------------------------------------------- placeholder


def placeholder(shape: Any, dtype: str = "float32", name: str = "placeholder") -> Tensor:
    """An input tensor of static ``shape`` and ``dtype``.

    Raises:
        ValueError: a symbolic or non-positive dimension.
        TypeError: an unsupported dtype.
    """
    shape = _check_shape(shape, name)
    dtype = _check_dtype(dtype, name)
    return _make_tensor(PlaceholderOp(name, shape, dtype), shape, dtype)


# ----------------------------------------------------------------------------- compute


def _axis_names(fcompute: Callable, ndim: int, name: str) -> tuple[list[str], bool]:
    """Names for the axes of ``fcompute`` and whether it takes them as one tuple."""
    try:
        params = list(inspect.signature(fcompute).parameters.values())
    except (TypeError, ValueError):
        return [f"i{d}" for d in range(ndim)], False
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return [f"i{d}" for d in range(ndim)], False
    positional = [
        p
        for p in params
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
    ]
    if len(positional) == ndim:
        return [p.name for p in positional], False
    if len(positional) == 1 and ndim != 1:
        return [f"i{d}" for d in range(ndim)], True
    raise ValueError(
        f"fcompute of {name} takes {len(positional)} arguments but the shape has {ndim} "
        "dimensions; give one argument per dimension (or *indices)"
    )


class _ReduceFinder(Visitor):
    def __init__(self):
        self.found: Reduce | None = None

    def visit_Reduce(self, node: Reduce) -> None:
        self.found = node


class _LoadCollector(Visitor):
    def __init__(self):
        # dicts keyed by identity, used as ordered sets (``in`` on a list would build EQ nodes)
        self.buffers: dict[Buffer, None] = {}
        self.vars: dict[Var, None] = {}

    def visit_BufferLoad(self, node: BufferLoad) -> None:
        self.buffers.setdefault(node.buffer)
        self.generic_visit(node)

    def visit_Var(self, node: Var) -> None:
        self.vars.setdefault(node)


def _check_no_nested_reduce(expr: Any, name: str, where: str) -> None:
    finder = _ReduceFinder()
    finder.visit(expr)
    if finder.found is not None:
        raise ValueError(
            f"compute {name}: a reduction may only be the whole body (as in TVM), found one "
            f"nested in {where}; compute the reduction as its own tensor and use that"
        )


def compute(
    shape: Any,
    fcompute: Callable[..., ExprLike],
    name: str = "compute",
    tag: str = "",
    attrs: dict[str, Any] | None = None,
) -> Tensor:
    """A tensor whose element at ``(i, j, ...)`` is ``fcompute(i, j, ...)``.

    ``fcompute`` receives one index variable per dimension (named after its
    parameters) and returns an expression; a reduction (``te.sum(...)``) may only be
    the whole body.

    Raises:
        ValueError: symbolic shape, wrong arity, nested reduction, or a body that uses
            variables that are neither its axes nor its reduction axes.
    """
    shape = _check_shape(shape, name)
    names, as_tuple = _axis_names(fcompute, len(shape), name)
    axis = tuple(
        IterVar(Var(n, "int32"), Range(const(0), const(s)), IterType.DATA_PAR)
        for n, s in zip(names, shape)
    )
    index_vars = [iv.var for iv in axis]
    body = fcompute(tuple(index_vars)) if as_tuple else fcompute(*index_vars)
    if isinstance(body, (list, tuple)):
        if len(body) != 1:
            raise ValueError(
                f"compute {name} returned {len(body)} values; only one output "
                "per compute is supported"
            )
        body = body[0]
    body = convert(body)

    bound = set(index_vars)
    if isinstance(body, Reduce):
        for iv in body.axis:
            if iv.var in bound:
                raise ValueError(f"compute {name}: axis {iv.var.name} is reduced twice")
            bound.add(iv.var)
        _check_no_nested_reduce((body.source, body.condition), name, "the reduced expression")
        _check_no_nested_reduce(body.combiner.identity, name, "the reduction's init")
    else:
        _check_no_nested_reduce(body, name, "the body")

    collector = _LoadCollector()
    collector.visit(body)
    free = [v for v in collector.vars if v not in bound and not _is_combiner_var(body, v)]
    if free:
        raise ValueError(
            f"compute {name} uses the variable(s) {', '.join(v.name for v in free)}, which are "
            "neither its axes nor the axes it reduces over"
        )
    inputs = []
    for buf in collector.buffers:
        tensor = tensor_of_buffer(buf)
        if tensor is None:
            raise ValueError(
                f"compute {name} reads buffer {buf.name}, which is not a te tensor; make it "
                "with te.placeholder or te.compute"
            )
        inputs.append(tensor)
    dtype = _check_dtype(body.dtype, name)
    op = ComputeOp(name, tag, attrs, axis, body, tuple(inputs))
    return _make_tensor(op, shape, dtype)


def _is_combiner_var(body: PrimExpr, v: Var) -> bool:
    return isinstance(body, Reduce) and (v is body.combiner.lhs or v is body.combiner.rhs)


# ----------------------------------------------------------------------------- reductions


def reduce_axis(dom: Any, name: str = "rv") -> IterVar:
    """A reduction axis over ``dom``: a ``(lo, hi)`` pair (``hi`` exclusive) or a Range."""
    if isinstance(dom, Range):
        lo, extent = dom.min, dom.extent
        if not (isinstance(lo, IntImm) and isinstance(extent, IntImm)):
            raise ValueError(
                f"dynamic shapes are not supported yet: reduce axis {name} has domain {dom}"
            )
        lo, hi = lo.value, lo.value + extent.value
    elif isinstance(dom, (tuple, list)) and len(dom) == 2:
        lo, hi = dom
        for bound in (lo, hi):
            if isinstance(bound, (Var, str)) or (
                isinstance(bound, PrimExpr) and not isinstance(bound, IntImm)
            ):
                raise ValueError(
                    f"dynamic shapes are not supported yet: reduce axis {name} "
                    f"has the symbolic bound {bound!r}"
                )
        lo, hi = int(lo), int(hi)
    else:
        raise TypeError(f"reduce_axis {name}: expected a (lo, hi) pair or a Range, got {dom!r}")
    if hi <= lo:
        raise ValueError(f"reduce_axis {name}: empty domain [{lo}, {hi})")
    return IterVar(Var(name, "int32"), Range(const(lo), const(hi - lo)), IterType.COMM_REDUCE)


class Reducer:
    """A commutative reducer made by :func:`comm_reducer`.

    ``reducer(expr, axis, where=None, init=None)`` builds a Reduce over ``axis`` (an
    IterVar or a list of them); ``reducer(a, b)`` with two expressions combines them.
    ``init`` replaces the identity as the starting value of the reduction.
    """

    def __init__(self, fcombine: Callable, fidentity: Callable[[str], ExprLike], name: str):
        self.fcombine = fcombine
        self.fidentity = fidentity
        self.name = name

    def __call__(
        self, expr: ExprLike, axis: Any, where: ExprLike | None = None, init: ExprLike | None = None
    ) -> PrimExpr:
        if not isinstance(axis, (IterVar, list, tuple)):
            if where is not None or init is not None:
                raise TypeError(f"{self.name}(a, b) combines two values and takes no where/init")
            return convert(self.fcombine(convert(expr), convert(axis)))
        axes = (axis,) if isinstance(axis, IterVar) else tuple(axis)
        if not axes:
            raise ValueError(f"{self.name}: reduce over an empty list of axes")
        for iv in axes:
            if not isinstance(iv, IterVar) or iv.iter_type != IterType.COMM_REDUCE:
                raise TypeError(f"{self.name}: axes must come from te.reduce_axis, got {iv!r}")
        expr = convert(expr)
        if isinstance(expr, Reduce):
            raise ValueError(
                f"{self.name}: cannot reduce a reduction; compute the inner one as its own tensor"
            )
        dtype = expr.dtype
        lhs, rhs = Var("x", dtype), Var("y", dtype)
        result = convert(self.fcombine(lhs, rhs))
        if result.dtype != dtype:
            raise TypeError(f"{self.name}: combining two {dtype} values gave {result.dtype}")
        identity = cast(dtype, convert(self.fidentity(dtype), dtype))
        condition = const(True) if where is None else convert(where)
        if condition.dtype != "bool":
            raise TypeError(f"{self.name}: where= must be a bool condition, got {condition}")
        if init is None:
            return Reduce(CommReducer(lhs, rhs, result, identity), expr, axes, condition)
        # The IR's Reduce has no init field: the init value takes the identity's place
        # (the init statement stores it) and the neutral element is kept aside.
        combiner = CommReducer(lhs, rhs, result, cast(dtype, convert(init, dtype)))
        _NEUTRAL[combiner] = identity
        return Reduce(combiner, expr, axes, condition)

    def __repr__(self) -> str:
        return f"Reducer({self.name!r})"


def comm_reducer(
    fcombine: Callable, fidentity: Callable[[str], ExprLike], name: str = "reduce"
) -> Reducer:
    """Make a reducer from ``fcombine(x, y)`` and ``fidentity(dtype)`` (TVM's comm_reducer)."""
    return Reducer(fcombine, fidentity, name)


sum = comm_reducer(lambda x, y: x + y, lambda t: const(0, t), name="sum")  # noqa: A001
max = comm_reducer(_op.max, _op.min_value, name="max")  # noqa: A001
min = comm_reducer(_op.min, _op.max_value, name="min")  # noqa: A001


def var(name: str = "v", dtype: str = "int32") -> Var:
    """A scalar variable (TVM's ``te.var``); not allowed as a tensor dimension."""
    return Var(name, dtype)


def as_tensor_list(tensors: Sequence[Tensor] | Tensor) -> list[Tensor]:
    if isinstance(tensors, Tensor):
        return [tensors]
    out = list(tensors)
    for t in out:
        if not isinstance(t, Tensor):
            raise TypeError(f"expected te tensors, got {type(t).__name__}: {t!r}")
    return out
