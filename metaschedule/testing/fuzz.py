"""Random valid te programs and a check of the default design space on each.

:func:`random_program` builds a chain of stages from a :class:`Draw` (a source of
choices: hypothesis in ``tests/fuzz``, a seeded numpy generator in
``benchmarks/fuzz_campaign.py``): element-wise maps, broadcasts against a new input,
reductions, paddings, strided and dilated windows, matmuls and transposes, on small
shapes that include primes and 1s. Each program comes with its numpy reference.

:func:`check_program` runs the default ``llvm`` design space on a program
(post-order-apply with the default rules, postprocessors; ``TuneContext`` +
``generate_design_space``), samples schedules by replaying the design-space traces
with fresh decisions and runs the postprocessors. Every sampled schedule must either
be rejected by a postprocessor (the reason is counted) or verify, interpret to the
numpy result and, for the first few, build to C that computes it too. Anything else
(an exception escaping, a wrong result) is a :class:`Failure`.
"""

from __future__ import annotations

import dataclasses
import traceback
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np

from .. import codegen, te
from ..runtime.pack import pack_weights
from ..schedule import Schedule, Trace
from ..schedule.error import ScheduleError
from ..space_generator import PostOrderApply
from ..tir import verify
from ..tir.interpreter import interpret
from ..tune_context import TuneContext

__all__ = [
    "Draw",
    "Failure",
    "FuzzStats",
    "NumpyDraw",
    "Program",
    "check_program",
    "random_program",
]

DIMS = (1, 2, 3, 4, 5, 7, 8, 11, 13, 16)  # primes and 1s on purpose
MAX_ELEMS = 2048  # keeps the interpreter fast


class Draw(Protocol):
    """A source of choices: ``integer(lo, hi)`` (inclusive) and ``pick(options)``."""

    def integer(self, lo: int, hi: int) -> int: ...

    def pick(self, options: Sequence[Any]) -> Any: ...


class NumpyDraw:
    """Choices from a seeded numpy generator."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)

    def integer(self, lo: int, hi: int) -> int:
        return int(self.rng.integers(lo, hi + 1))

    def pick(self, options: Sequence[Any]) -> Any:
        return options[int(self.rng.integers(len(options)))]


@dataclasses.dataclass
class Program:
    """A te program: its PrimFunc arguments, how to compute them in numpy, a description."""

    args: list[te.Tensor]  # inputs, then the output
    inputs: list[np.ndarray]
    reference: np.ndarray
    steps: list[str]

    def describe(self) -> str:
        shapes = ", ".join(f"{t.name}{tuple(t.shape)}" for t in self.args[:-1])
        return f"inputs {shapes}: " + " -> ".join(self.steps)

    def func(self):
        return te.create_prim_func(self.args)


# ----------------------------------------------------------------------------- programs


class _Builder:
    def __init__(self, draw: Draw):
        self.draw = draw
        self.args: list[te.Tensor] = []
        self.inputs: list[np.ndarray] = []
        self.steps: list[str] = []
        self.rng = np.random.default_rng(draw.integer(0, 2**16))

    def placeholder(self, shape: tuple[int, ...]) -> tuple[te.Tensor, np.ndarray]:
        t = te.placeholder(shape, "float32", name=f"in{len(self.args)}")
        a = self.rng.uniform(-1.0, 1.0, size=shape).astype("float32")
        self.args.append(t)
        self.inputs.append(a)
        return t, a

    def shape(self, rank: int) -> tuple[int, ...]:
        while True:
            s = tuple(self.draw.pick(DIMS) for _ in range(rank))
            if int(np.prod(s)) <= MAX_ELEMS:
                return s

    def name(self) -> str:
        return f"T{len(self.steps)}"


def random_program(draw: Draw, max_stages: int = 3) -> Program:
    """A random valid te program of 1 to ``max_stages`` stages (see the module docstring)."""
    b = _Builder(draw)
    x, xa = b.placeholder(b.shape(draw.integer(1, 3)))
    for _ in range(draw.integer(1, max_stages)):
        stages = [
            _elementwise,
            _broadcast,
            _reduce,
            _pad,
            _window,
            _transpose,
            _softmax,
            _gather,
            _masked_reduce,
        ]
        if len(x.shape) == 2:
            stages.append(_matmul)
        if len(x.shape) >= 2:
            stages.append(_conv2d)
        stage = draw.pick(stages)
        x, xa = stage(b, x, xa)
    return Program([*b.args, x], b.inputs, xa, b.steps)


def _elementwise(b: _Builder, x, xa):
    kind = b.draw.pick(["scale", "relu", "square", "tanh"])
    c = float(b.draw.pick([0.5, 2.0, -1.5]))
    fns = {
        "scale": (lambda v: v * c + 1.0, lambda a: a * np.float32(c) + np.float32(1)),
        "relu": (lambda v: te.max(v, 0.0), lambda a: np.maximum(a, 0)),
        "square": (lambda v: v * v, lambda a: a * a),
        "tanh": (lambda v: te.tanh(v), np.tanh),
    }
    f, g = fns[kind]
    y = te.compute(x.shape, lambda *i: f(x[i]), name=b.name())
    b.steps.append(f"{kind}")
    return y, g(xa).astype("float32")


def _broadcast(b: _Builder, x, xa):
    # the other operand has 1s (or misses leading axes) where x does not
    rank = len(x.shape)
    keep = [b.draw.integer(0, 1) for _ in range(rank)]
    drop = b.draw.integer(0, rank - 1)
    oshape = tuple(s if k else 1 for s, k in zip(x.shape, keep))[drop:]
    w, wa = b.placeholder(oshape)

    def f(*i):
        idx = tuple(i[drop + d] if keep[drop + d] else 0 for d in range(len(oshape)))
        return x[i] + w[idx]

    y = te.compute(x.shape, f, name=b.name())
    b.steps.append(f"add broadcast {oshape}")
    return y, (xa + wa).astype("float32")


def _reduce(b: _Builder, x, xa):
    rank = len(x.shape)
    axis = b.draw.integer(0, rank - 1)
    kind = b.draw.pick(["sum", "max"])
    r = te.reduce_axis((0, x.shape[axis]), name="r")
    oshape = x.shape[:axis] + x.shape[axis + 1 :] or (1,)
    red = te.sum if kind == "sum" else te.max

    def f(*i):
        i = i[: rank - 1]
        return red(x[(*i[:axis], r, *i[axis:])], axis=r)

    y = te.compute(oshape, f, name=b.name())
    ref = xa.sum(axis=axis) if kind == "sum" else xa.max(axis=axis)
    b.steps.append(f"{kind} over axis {axis}")
    return y, np.asarray(ref, "float32").reshape(oshape)


def _pad(b: _Builder, x, xa):
    rank = len(x.shape)
    pads = [b.draw.integer(0, 2) for _ in range(rank)]
    oshape = tuple(s + 2 * p for s, p in zip(x.shape, pads))
    if int(np.prod(oshape)) > MAX_ELEMS:
        pads, oshape = [0] * rank, x.shape

    def f(*i):
        conds = [
            c
            for d in range(rank)
            if pads[d]
            for c in (i[d] >= pads[d], i[d] < x.shape[d] + pads[d])
        ]
        value = x[tuple(i[d] - pads[d] for d in range(rank))]
        return te.if_then_else(te.all(*conds), value, 0.0) if conds else value

    y = te.compute(oshape, f, name=b.name())
    b.steps.append(f"pad {pads}")
    return y, np.pad(xa, [(p, p) for p in pads]).astype("float32")


def _window(b: _Builder, x, xa):
    """A pooling-like sum or max over a window of the last axis, strided and dilated."""
    n = x.shape[-1]
    k, stride, dil = b.draw.integer(1, 3), b.draw.integer(1, 3), b.draw.integer(1, 2)
    span = (k - 1) * dil + 1
    if span > n:
        k, dil, span = 1, 1, 1
    out = (n - span) // stride + 1
    kind = b.draw.pick(["sum", "max"])
    r = te.reduce_axis((0, k), name="rw")
    red = te.sum if kind == "sum" else te.max
    oshape = x.shape[:-1] + (out,)
    y = te.compute(
        oshape, lambda *i: red(x[(*i[:-1], i[-1] * stride + r * dil)], axis=r), name=b.name()
    )
    windows = np.stack(
        [xa[..., j * dil : j * dil + (out - 1) * stride + 1 : stride] for j in range(k)]
    )
    ref = windows.sum(axis=0) if kind == "sum" else windows.max(axis=0)
    b.steps.append(f"window {kind} k={k} stride={stride} dilation={dil}")
    return y, ref.astype("float32")


def _conv2d(b: _Builder, x, xa):
    """A 2-d convolution (one channel) over the last two axes, strided and dilated."""
    h, w = x.shape[-2:]
    kh, kw = b.draw.integer(1, 3), b.draw.integer(1, 3)
    stride, dil = b.draw.integer(1, 2), b.draw.integer(1, 2)
    if (kh - 1) * dil + 1 > h or (kw - 1) * dil + 1 > w:
        kh = kw = dil = 1
    oh, ow = (h - (kh - 1) * dil - 1) // stride + 1, (w - (kw - 1) * dil - 1) // stride + 1
    wt, wa = b.placeholder((kh, kw))
    rh, rw = te.reduce_axis((0, kh), name="rh"), te.reduce_axis((0, kw), name="rw")
    oshape = x.shape[:-2] + (oh, ow)

    def f(*i):
        lead, y0, x0 = i[:-2], i[-2], i[-1]
        return te.sum(
            x[(*lead, y0 * stride + rh * dil, x0 * stride + rw * dil)] * wt[rh, rw], axis=[rh, rw]
        )

    y = te.compute(oshape, f, name=b.name())
    ref = np.zeros(oshape, "float64")
    for r in range(kh):
        for c in range(kw):
            win = xa[
                ...,
                r * dil : r * dil + (oh - 1) * stride + 1 : stride,
                c * dil : c * dil + (ow - 1) * stride + 1 : stride,
            ]
            ref += win.astype("float64") * float(wa[r, c])
    b.steps.append(f"conv2d {kh}x{kw} stride={stride} dilation={dil}")
    return y, ref.astype("float32")


def _softmax(b: _Builder, x, xa):
    """``exp(x - max(x))`` over the last axis, normalised: x has several consumers."""
    lead, n = x.shape[:-1], x.shape[-1]
    r1, r2 = te.reduce_axis((0, n), name="r1"), te.reduce_axis((0, n), name="r2")
    m = te.compute(
        lead or (1,), lambda *i: te.max(x[(*i[: len(lead)], r1)], axis=r1), name=b.name() + "_max"
    )
    e = te.compute(x.shape, lambda *i: te.exp(x[i] - m[i[:-1] or (0,)]), name=b.name() + "_exp")
    s = te.compute(
        lead or (1,), lambda *i: te.sum(e[(*i[: len(lead)], r2)], axis=r2), name=b.name() + "_sum"
    )
    y = te.compute(x.shape, lambda *i: e[i] / s[i[:-1] or (0,)], name=b.name())
    ea = np.exp(xa.astype("float64") - xa.max(axis=-1, keepdims=True))
    b.steps.append("softmax")
    return y, (ea / ea.sum(axis=-1, keepdims=True)).astype("float32")


def _gather(b: _Builder, x, xa):
    """``y[..., j] = x[..., idx[j]]``: a data-dependent index (in range)."""
    n = x.shape[-1]
    m = b.draw.pick(DIMS)
    idx = te.placeholder((m,), "int32", name=f"idx{len(b.args)}")
    ia = b.rng.integers(0, n, size=(m,)).astype("int32")
    b.args.append(idx)
    b.inputs.append(ia)
    y = te.compute(x.shape[:-1] + (m,), lambda *i: x[(*i[:-1], idx[i[-1]])], name=b.name())
    b.steps.append(f"gather {m} of {n}")
    return y, np.ascontiguousarray(xa[..., ia])


def _masked_reduce(b: _Builder, x, xa):
    """A sum over the last axis of the even positions only (a reduction ``where``)."""
    n = x.shape[-1]
    r = te.reduce_axis((0, n), name="rm")
    oshape = x.shape[:-1] or (1,)
    lead = len(x.shape) - 1
    y = te.compute(
        oshape, lambda *i: te.sum(x[(*i[:lead], r)], axis=r, where=r % 2 == 0), name=b.name()
    )
    b.steps.append("sum of even positions")
    return y, xa[..., ::2].sum(axis=-1).astype("float32").reshape(oshape)


def _transpose(b: _Builder, x, xa):
    rank = len(x.shape)
    perm = list(range(rank))[::-1]
    oshape = tuple(x.shape[p] for p in perm)

    def f(*i):
        idx = [None] * rank
        for d, p in enumerate(perm):
            idx[p] = i[d]
        return x[tuple(idx)]

    y = te.compute(oshape, f, name=b.name())
    b.steps.append("transpose")
    return y, np.ascontiguousarray(xa.transpose(perm))


def _matmul(b: _Builder, x, xa):
    m, k = x.shape
    n = b.draw.pick(DIMS)
    w, wa = b.placeholder((k, n))
    r = te.reduce_axis((0, k), name="k")
    y = te.compute((m, n), lambda i, j: te.sum(x[i, r] * w[r, j], axis=r), name=b.name())
    b.steps.append(f"matmul with ({k}, {n})")
    return y, (xa.astype("float64") @ wa.astype("float64")).astype("float32")


# ----------------------------------------------------------------------------- checking


@dataclasses.dataclass
class Failure:
    """Something the tuner must never do on a valid program."""

    kind: str  # "death" (an exception escaped) or "wrong result"
    stage: str  # where: "design space", "replay", "postproc", "verify", "interpret", "build"
    program: str
    message: str

    def signature(self) -> str:
        first = self.message.strip().splitlines()[0] if self.message.strip() else ""
        return f"{self.kind} in {self.stage}: {first[:120]}"


@dataclasses.dataclass
class FuzzStats:
    """Counts over a fuzz run (see :func:`check_program`)."""

    programs: int = 0
    design_spaces: int = 0
    schedules: int = 0
    mutants: int = 0
    interpreted: int = 0
    built: int = 0
    rejected: Counter = dataclasses.field(default_factory=Counter)
    failures: list[Failure] = dataclasses.field(default_factory=list)

    @property
    def deaths(self) -> int:
        return sum(f.kind == "death" for f in self.failures)

    @property
    def wrong_results(self) -> int:
        return sum(f.kind == "wrong result" for f in self.failures)

    def as_json(self) -> dict:
        return {
            "programs": self.programs,
            "design_spaces": self.design_spaces,
            "schedules": self.schedules,
            "interpreted": self.interpreted,
            "built": self.built,
            "rejected_by_postproc": dict(self.rejected),
            "tuner_deaths": self.deaths,
            "wrong_results": self.wrong_results,
            "distinct_failures": sorted({f.signature() for f in self.failures}),
            "failures": [dataclasses.asdict(f) for f in self.failures],
        }


def _close(out: np.ndarray, ref: np.ndarray) -> bool:
    return out.shape == ref.shape and bool(np.allclose(out, ref, rtol=1e-4, atol=1e-4))


def check_program(
    program: Program,
    stats: FuzzStats,
    *,
    num_schedules: int = 4,
    num_builds: int = 1,
    seed: int = 0,
    mutate: bool = True,
    debug_builds: bool = False,
    build: Callable[..., Any] | None = None,
) -> None:
    """Run the default design space on ``program``; record what happens in ``stats``.

    Args:
        num_schedules: schedules sampled (traces replayed with fresh decisions).
        num_builds: how many of the accepted ones are also compiled and run.
        mutate: also mutate each accepted schedule once with a random mutator of the
            design space (as the evolutionary search does) and check the mutant.
        debug_builds: also build each compiled schedule in the bounds-checked debug
            mode, which must run (no false out-of-bounds report) to the same result.
        build: the build function (default ``metaschedule.build``).
    """
    desc = program.describe()
    stats.programs += 1

    def fail(kind: str, stage: str, err: BaseException | str) -> None:
        msg = (
            err
            if isinstance(err, str)
            else "".join(traceback.format_exception_only(type(err), err))
            + "".join(traceback.format_tb(err.__traceback__)[-3:])
        )
        stats.failures.append(Failure(kind, stage, desc, msg))

    def run(mod) -> np.ndarray:
        out = np.zeros(program.reference.shape, "float32")
        interpret(mod, *pack_weights(mod, [*(a.copy() for a in program.inputs), out]))
        return out

    try:
        func = program.func()
        base = run(func)
    except Exception as err:  # noqa: BLE001 - the program itself is the failure
        fail("death", "create_prim_func", err)
        return
    if not _close(base, program.reference):
        fail(
            "wrong result", "unscheduled", f"max abs error {np.abs(base - program.reference).max()}"
        )
        return
    try:
        ctx = TuneContext(func, target="llvm", space_generator=PostOrderApply(), rand_state=seed)
        spaces = ctx.generate_design_space()
        postprocs = ctx.space_generator.postprocs
    except Exception as err:  # noqa: BLE001
        fail("death", "design space", err)
        return
    stats.design_spaces += len(spaces)
    rng = np.random.default_rng(seed)
    mutators = list(getattr(ctx.space_generator, "mutator_probs", {}) or {})
    builds_left = [num_builds]

    def postprocess(sch) -> bool:
        sch.enter_postproc()
        for postproc in postprocs:
            try:
                ok = postproc.apply(sch)
            except ScheduleError as err:
                stats.rejected[f"{postproc}: {type(err).__name__}"] += 1
                return False
            except Exception as err:  # noqa: BLE001
                fail("death", f"postproc {postproc}", err)
                return False
            if not ok:
                stats.rejected[str(postproc)] += 1
                return False
        return True

    def check(sch, what: str) -> bool:
        try:
            verify(sch.mod)
            out = run(sch.mod)
        except Exception as err:  # noqa: BLE001
            fail("death", f"verify/interpret ({what})", err)
            return False
        stats.interpreted += 1
        if not _close(out, program.reference):
            err_abs = float(np.nanmax(np.abs(out - program.reference)))
            fail("wrong result", f"interpret ({what})", f"max abs error {err_abs}\n{sch.trace}")
            return False
        if builds_left[0] > 0:
            builds_left[0] -= 1
            for debug in (False, True) if debug_builds else (False,):
                label = f"{what}, debug build" if debug else what
                try:
                    if debug:
                        mod = _default_build(sch.mod, debug=True)
                    else:
                        mod = (build or _default_build)(sch.mod)
                    arrays = [a.copy() for a in program.inputs]
                    out = np.zeros(program.reference.shape, "float32")
                    mod(*pack_weights(sch.mod, [*arrays, out]))
                except Exception as err:  # noqa: BLE001
                    fail("death", f"build/run ({label})", err)
                    return False
                stats.built += 1
                if not _close(out, program.reference):
                    err_abs = float(np.nanmax(np.abs(out - program.reference)))
                    fail(
                        "wrong result",
                        f"compiled ({label})",
                        f"max abs error {err_abs}\n{sch.trace}",
                    )
                    return False
        return True

    for _ in range(num_schedules):
        space = spaces[int(rng.integers(len(spaces)))]
        trace = Trace(space.trace.insts, {})
        sch = Schedule(ctx.mod, seed=int(rng.integers(2**31)), error_render_level="none")
        stats.schedules += 1
        try:
            trace.apply_to_schedule(sch, remove_postproc=True)
        except Exception as err:  # noqa: BLE001 - a fresh replay of a valid space must work
            fail("death", "replay", err)
            continue
        if not postprocess(sch) or not check(sch, "sampled"):
            continue
        if not mutate or not mutators:
            continue
        # as the evolutionary search does: mutate the trace, replay it, post-process
        mutator = mutators[int(rng.integers(len(mutators)))]
        try:
            mutated = mutator.apply(sch.trace, rng)
        except ValueError:
            mutated = None
        except Exception as err:  # noqa: BLE001
            fail("death", f"mutator {mutator}", err)
            continue
        if mutated is None:
            continue
        child = Schedule(ctx.mod, seed=int(rng.integers(2**31)), error_render_level="none")
        stats.mutants += 1
        try:
            mutated.apply_to_schedule(child, remove_postproc=True)
        except ValueError:
            stats.rejected[f"{mutator}: replay"] += 1
            continue
        except Exception as err:  # noqa: BLE001
            fail("death", f"replay of a {mutator} mutant", err)
            continue
        if postprocess(child):
            check(child, f"{mutator} mutant")


def _default_build(mod, debug: bool = False):
    return codegen.build(mod, "llvm", debug=debug)
