"""``metaschedule compile`` (whole models) and ``metaschedule bench`` (a tuned workload or
model against numpy / onnxruntime).

Whole models need ``ms.relax_integration`` and ``ms.graph`` (imported only when a model
is given); a workload needs only the engine.
"""

from __future__ import annotations

import argparse
import os
import time

from .. import graph, relax_integration
from ..arg_info import ArgInfo
from ..codegen import build
from ..flop_count import estimate_flops
from ..runner.local_runner import default_alloc_argument
from ..tir.function import IRModule
from .common import (
    CLIError,
    add_subcommand,
    is_model_file,
    load_workload,
    open_database,
    positive_int,
)

COMPILE_EXAMPLES = """\
  metaschedule compile model.onnx --database runs/model -o model.so
  metaschedule compile model.onnx -o model.so         # untuned: default schedules
"""

BENCH_EXAMPLES = """\
  metaschedule bench gmm:256 --database runs/gmm256   # tuned matmul against numpy
  metaschedule bench my_ops.py:conv                   # untuned, against nothing
  metaschedule bench model.onnx --database runs/model # against onnxruntime
"""


def register(sub, parents) -> None:
    c = add_subcommand(
        sub,
        "compile",
        help="compile a whole model with a tuned database",
        description="Compile an ONNX model with the best schedule of each of "
        "its functions from --database (a default schedule elsewhere).",
        examples=COMPILE_EXAMPLES,
        parents=parents,
    )
    c.add_argument("model", metavar="MODEL", help="an .onnx model file")
    c.add_argument(
        "--database",
        metavar="DIR",
        default=None,
        help="the work folder (or .sqlite file) of a tuning run",
    )
    c.add_argument("--target", default="cpu", help="the target")
    c.add_argument(
        "-o", "--output", required=True, metavar="FILE", help="the compiled library to write (.so)"
    )
    c.set_defaults(func=_compile)
    b = add_subcommand(
        sub,
        "bench",
        help="time a tuned workload or model against numpy or onnxruntime",
        description="Build the best schedule found (or the "
        "untuned program without --database), check it and time it against "
        "numpy (workloads) or onnxruntime (models).",
        examples=BENCH_EXAMPLES,
        parents=parents,
    )
    b.add_argument(
        "workload", metavar="MODEL_OR_WORKLOAD", help="suite name, FILE.py[:NAME] or MODEL.onnx"
    )
    b.add_argument(
        "--database",
        metavar="DIR",
        default=None,
        help="the work folder (or .sqlite file) of a tuning run",
    )
    b.add_argument("--target", default="cpu", help="the target")
    b.add_argument("--number", type=positive_int, default=10, help="calls per timed round")
    b.add_argument(
        "--repeat",
        type=positive_int,
        default=5,
        help="timed rounds, interleaved with the reference; the best counts",
    )
    b.set_defaults(func=_bench)


def _compile(args: argparse.Namespace) -> int:
    if not is_model_file(args.model):
        raise CLIError(
            f"{args.model}: compile takes a whole model (.onnx); for one workload "
            "use 'metaschedule show DIR --c' or 'metaschedule bench'",
            usage=True,
        )
    if not os.path.isfile(args.model):
        raise CLIError(f"{args.model}: no such model file")
    database = open_database(args.database) if args.database else None
    mod = graph.from_onnx(args.model)
    exe = relax_integration.compile_relax(database, mod, args.target, None)
    exe.export_library(args.output)
    print(f"Wrote {args.output}")
    return 0


def _bench(args: argparse.Namespace) -> int:
    if is_model_file(args.workload):
        return _bench_model(args)
    import numpy as np

    wl = load_workload(args.workload)
    mod = IRModule({"main": wl.func})
    tuned = "untuned"
    if args.database:
        database = open_database(args.database)
        sch = database.query_schedule(mod, None)
        if sch is None:
            raise CLIError(
                f"{args.database} has no valid record of {wl.name}; tune it with "
                f"'metaschedule tune {args.workload} --work-dir {args.database}'"
            )
        mod, tuned = sch.mod, "tuned"
    lib = build(mod, args.target)
    flops = estimate_flops(IRModule({"main": wl.func}))
    if wl.suite is not None:
        inputs = wl.suite.inputs()
        out = np.zeros(wl.suite.output_shape, "float32")
        packed = lib.pack_weights(*inputs, out)  # weights the tuned kernel takes re-laid out
        lib(*packed)
        expected = wl.suite.reference(*inputs)
        err = float(np.max(np.abs(out - expected)) / max(1e-30, float(np.max(np.abs(expected)))))
        ok = bool(np.allclose(out, expected, rtol=1e-3, atol=1e-3))
        print(
            f"{wl.name}: {wl.suite.description}; numpy check "
            f"{'OK' if ok else 'MISMATCH'} (max relative error {err:.1e})"
        )
        args_ = packed
        reference = lambda: wl.suite.reference(*inputs)
    else:
        infos = [a.as_json() for a in ArgInfo.from_entry_func(mod)]
        args_ = default_alloc_argument("cpu", infos, 1)[0]
        ok, reference = True, None
        print(f"{wl.name}: no numpy reference for a file workload; timing it alone")
    evaluator = lib.time_evaluator("main", number=args.number, repeat=1)
    ours: list[float] = []
    ref: list[float] = []
    for _ in range(args.repeat):
        ours.extend(evaluator(*args_).results)
        if reference is not None:
            t = time.perf_counter()
            for _ in range(args.number):
                reference()
            ref.append((time.perf_counter() - t) / args.number)
    best = min(ours)
    print(f"metaschedule ({tuned}): {best * 1e6:10.2f} us  {flops / best / 1e9:8.2f} GFLOPS")
    if ref:
        print(
            f"numpy              : {min(ref) * 1e6:10.2f} us  {flops / min(ref) / 1e9:8.2f} "
            f"GFLOPS  (ours is {min(ref) / best:.2f}x its speed)"
        )
    return 0 if ok else 1


def _bench_model(args: argparse.Namespace) -> int:
    if not os.path.isfile(args.workload):
        raise CLIError(f"{args.workload}: no such model file")
    import numpy as np

    try:
        import onnx
    except ImportError:
        raise CLIError("bench of an ONNX model needs the onnx package: pip install onnx") from None
    database = open_database(args.database) if args.database else None
    exe = relax_integration.compile_relax(
        database, graph.from_onnx(args.workload), args.target, None
    )
    model = onnx.load(args.workload)
    initializers = {i.name for i in model.graph.initializer}
    rng = np.random.default_rng(0)
    inputs = {}
    for value in model.graph.input:
        if value.name in initializers:
            continue
        tensor = value.type.tensor_type
        shape = [d.dim_value or 1 for d in tensor.shape.dim]
        dtype = onnx.helper.tensor_dtype_to_np_dtype(tensor.elem_type)
        inputs[value.name] = rng.standard_normal(shape).astype(dtype)
    ours = _best_of(lambda: exe(**inputs), args.number, args.repeat)
    print(f"metaschedule ({'tuned' if database else 'untuned'}): {ours * 1e3:10.3f} ms")
    try:
        import onnxruntime
    except ImportError:
        print("onnxruntime is not installed: no reference timing")
        return 0
    session = onnxruntime.InferenceSession(args.workload, providers=["CPUExecutionProvider"])
    ref = _best_of(lambda: session.run(None, inputs), args.number, args.repeat)
    print(f"onnxruntime       : {ref * 1e3:10.3f} ms  (ours is {ref / ours:.2f}x its speed)")
    return 0


def _best_of(fn, number: int, repeat: int) -> float:
    """The best mean seconds per call over ``repeat`` rounds of ``number`` calls."""
    fn()  # warm up
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - start) / number)
    return best
