"""The operator suite: named float32 workloads shared by the CLI and the benchmarks.

Each workload is a te computation turned into a PrimFunc (inputs first, the output last),
with a numpy reference to check and time against. Names (Ansor's benchmark suite):

========  =============================================================================
``gmm``   matmul ``A[1024,1024] @ B[1024,1024]``; ``gmm:N`` is the N x N x N variant
``c2d``   conv2d NHWC 1x56x56x64 -> 64, 3x3 kernel (HWIO), pad 1
``dep``   depthwise conv2d NHWC 1x112x112x32, 3x3, pad 1
``cbr``   conv2d 1x28x28x128 -> 128, 3x3, pad 1, then bias and relu (one function)
``tbg``   batch matmul ``Q[12,128,64] @ K[12,128,64]^T`` (attention scores)
``sfm``   softmax of ``[128,1024]`` along the last axis
``dns``   dense ``X[128,768] @ W[3072,768]^T`` + bias, then GELU (tanh form)
``pool``  max pool 3x3, stride 2, pad 1 on NHWC 1x112x112x64
========  =============================================================================

Example::

    from metaschedule.workloads import get_workload
    wl = get_workload("gmm:64")
    func = wl.func()                      # the PrimFunc to tune
    args = wl.inputs()                    # numpy inputs
    expected = wl.reference(*args)        # numpy result
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import te
from .te import ops

__all__ = ["SUITE", "SuiteWorkload", "get_workload", "suite_names"]


@dataclass(frozen=True)
class SuiteWorkload:
    """One workload of the suite.

    Attributes:
        name: the suite name (``gmm``, ``gmm:64``, ``c2d``, ...).
        description: one line for people.
        input_shapes: the shapes of the float32 inputs, in parameter order.
        output_shape: the shape of the output (the last parameter).
        build: makes the te tensors and returns the PrimFunc.
        reference: the numpy computation of the output from the inputs.
    """

    name: str
    description: str
    input_shapes: tuple[tuple[int, ...], ...]
    output_shape: tuple[int, ...]
    build: Callable[[], Any]
    reference: Callable[..., np.ndarray]

    def func(self):
        """The workload as a :class:`~metaschedule.tir.PrimFunc`."""
        return self.build()

    def inputs(self, seed: int = 0) -> list[np.ndarray]:
        """Random float32 inputs (standard normal), deterministic in ``seed``."""
        rng = np.random.default_rng(seed)
        return [rng.standard_normal(s, dtype=np.float32) for s in self.input_shapes]


# ----------------------------------------------------------------------------- te builders
def _placeholders(shapes, names):
    return [te.placeholder(s, "float32", n) for s, n in zip(shapes, names)]


def _prim_func(tensors):
    return te.create_prim_func(list(tensors))


def _gmm(n: int):
    def build():
        a, b = _placeholders([(n, n), (n, n)], "AB")
        return _prim_func([a, b, ops.matmul(a, b)])

    return build


def _c2d():
    x, w = _placeholders([(1, 56, 56, 64), (3, 3, 64, 64)], ["data", "kernel"])
    return _prim_func([x, w, ops.conv2d_nhwc(x, w, stride=1, padding=1)])


def _dep():
    x, w = _placeholders([(1, 112, 112, 32), (3, 3, 32, 1)], ["data", "kernel"])
    return _prim_func([x, w, ops.depthwise_conv2d_nhwc(x, w, stride=1, padding=1)])


def _cbr():
    x, w, b = _placeholders(
        [(1, 28, 28, 128), (3, 3, 128, 128), (128,)], ["data", "kernel", "bias"]
    )
    out = ops.relu(ops.bias_add(ops.conv2d_nhwc(x, w, stride=1, padding=1), b, axis=-1))
    return _prim_func([x, w, b, out])


def _tbg():
    q, k = _placeholders([(12, 128, 64), (12, 128, 64)], ["Q", "K"])
    return _prim_func([q, k, ops.batch_matmul(q, k, transpose_b=True)])


def _sfm():
    (x,) = _placeholders([(128, 1024)], ["X"])
    return _prim_func([x, ops.softmax(x, axis=-1)])


def _dns():
    x, w, b = _placeholders([(128, 768), (3072, 768), (3072,)], ["X", "W", "bias"])
    return _prim_func([x, w, b, ops.gelu(ops.dense(x, w, bias=b))])


def _pool():
    (x,) = _placeholders([(1, 112, 112, 64)], ["data"])
    return _prim_func([x, ops.max_pool2d(x, kernel=3, stride=2, padding=1)])


# ----------------------------------------------------------------------------- references
def _conv_ref(x: np.ndarray, w: np.ndarray, pad: int) -> np.ndarray:
    """NHWC x HWIO, stride 1, as im2col + one matmul."""
    kh, kw, c, f = w.shape
    xp = np.pad(x, ((0, 0), (pad, pad), (pad, pad), (0, 0)))
    n, h, ww = x.shape[0], xp.shape[1] - kh + 1, xp.shape[2] - kw + 1
    cols = np.stack([xp[:, i : i + h, j : j + ww, :] for i in range(kh) for j in range(kw)], axis=3)
    return (cols.reshape(n * h * ww, kh * kw * c) @ w.reshape(kh * kw * c, f)).reshape(n, h, ww, f)


def _dep_ref(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    xp = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    h, ww = x.shape[1], x.shape[2]
    out = np.zeros_like(x)
    for i in range(3):
        for j in range(3):
            out += xp[:, i : i + h, j : j + ww, :] * w[i, j, :, 0]
    return out


def _softmax_ref(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _gelu_ref(v: np.ndarray) -> np.ndarray:
    c = np.float32(np.sqrt(2.0 / np.pi))
    return v * 0.5 * (np.tanh((v + 0.044715 * v**3) * c) + 1.0)


def _pool_ref(x: np.ndarray) -> np.ndarray:
    xp = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)), constant_values=-np.inf)
    oh, ow = (x.shape[1] + 2 - 3) // 2 + 1, (x.shape[2] + 2 - 3) // 2 + 1
    taps = [xp[:, i : i + 2 * oh : 2, j : j + 2 * ow : 2, :] for i in range(3) for j in range(3)]
    return np.max(np.stack(taps), axis=0)


def _gmm_entry(n: int, name: str) -> SuiteWorkload:
    return SuiteWorkload(
        name, f"matmul {n}x{n}x{n}", ((n, n), (n, n)), (n, n), _gmm(n), lambda a, b: a @ b
    )


SUITE: dict[str, SuiteWorkload] = {
    "gmm": _gmm_entry(1024, "gmm"),
    "c2d": SuiteWorkload(
        "c2d",
        "conv2d NHWC 1x56x56x64 -> 64, 3x3, pad 1",
        ((1, 56, 56, 64), (3, 3, 64, 64)),
        (1, 56, 56, 64),
        _c2d,
        lambda x, w: _conv_ref(x, w, 1),
    ),
    "dep": SuiteWorkload(
        "dep",
        "depthwise conv2d NHWC 1x112x112x32, 3x3, pad 1",
        ((1, 112, 112, 32), (3, 3, 32, 1)),
        (1, 112, 112, 32),
        _dep,
        _dep_ref,
    ),
    "cbr": SuiteWorkload(
        "cbr",
        "conv2d 1x28x28x128 -> 128, 3x3, pad 1 + bias + relu",
        ((1, 28, 28, 128), (3, 3, 128, 128), (128,)),
        (1, 28, 28, 128),
        _cbr,
        lambda x, w, b: np.maximum(_conv_ref(x, w, 1) + b, 0),
    ),
    "tbg": SuiteWorkload(
        "tbg",
        "batch matmul Q[12,128,64] x K[12,128,64]^T",
        ((12, 128, 64), (12, 128, 64)),
        (12, 128, 128),
        _tbg,
        lambda q, k: q @ k.transpose(0, 2, 1),
    ),
    "sfm": SuiteWorkload(
        "sfm",
        "softmax [128,1024] along the last axis",
        ((128, 1024),),
        (128, 1024),
        _sfm,
        _softmax_ref,
    ),
    "dns": SuiteWorkload(
        "dns",
        "dense 128x768 by 3072x768 (x @ W^T) + bias + GELU",
        ((128, 768), (3072, 768), (3072,)),
        (128, 3072),
        _dns,
        lambda x, w, b: _gelu_ref(x @ w.T + b),
    ),
    "pool": SuiteWorkload(
        "pool",
        "max pool 3x3 stride 2 pad 1 on NHWC 1x112x112x64",
        ((1, 112, 112, 64),),
        (1, 56, 56, 64),
        _pool,
        _pool_ref,
    ),
}


def suite_names() -> list[str]:
    """The names of the suite, in order."""
    return list(SUITE)


def get_workload(name: str) -> SuiteWorkload:
    """The suite workload ``name`` (``gmm:N`` for an N x N x N matmul).

    Raises:
        ValueError: an unknown name; the message lists the suite.
    """
    base, _, size = name.partition(":")
    if base == "gmm" and size:
        if not size.isdigit() or int(size) < 1:
            raise ValueError(
                f"workload {name!r}: the size after 'gmm:' must be a positive integer, e.g. gmm:64"
            )
        return _gmm_entry(int(size), name)
    if name in SUITE:
        return SUITE[name]
    raise ValueError(
        f"unknown workload {name!r}; the suite has: {', '.join(SUITE)} "
        "(and gmm:N for an N x N x N matmul)"
    )
