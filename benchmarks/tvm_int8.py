"""TVM MetaSchedule 0.27 tuning the int8 kernels of ``int8.py``, for a side-by-side run.

TVM gets its own auto-tensorization where the target has a dot-product instruction: its
``llvm`` schedule rules with ``MultiLevelTilingWithIntrin`` of ``dot_16x4_vnni``
(AVX512-VNNI) or ``dot_16x4_avx512`` (AVX512-BW) put before the plain multi-level tiling
(what TVM's own x86 defaults did), and ``RewriteTensorize(vectorize_init_loop=True)``
after its ``llvm`` postprocessors. Its intrinsics read the weights as 16x4 blocks, so TVM
is given them pre-packed (``[N/16, K/4, 16, 4]``; convolution ``[KH, KW, F/16, C/4, 16,
4]``), the layout of TVM's own VNNI tests; the packing is not timed (ours is not either:
``pack_weights``). A target without those instructions (``-mcpu=haswell``) gets TVM's
plain ``llvm`` rules.

The tuning runs in a child interpreter (``python tvm_int8.py SPEC``) that checks TVM's
best kernel against numpy (integers equal) and exports it; :func:`timer` loads it in the
caller's process to time it beside ours. A benchmark helper, not a test.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # the benchmarks' shared helpers, beside this file  # noqa: E402

#: TVM's dot-product intrinsic per ISA extension, best first (tvm.s_tir.tensor_intrin.x86)
INTRINSICS = (("avx512vnni", "dot_16x4_vnni"), ("avx512bw", "dot_16x4_avx512"))


def pack_weights(name: str, w: np.ndarray) -> np.ndarray:
    """``int8.py``'s weight ``w`` in the 16x4 blocks TVM's intrinsics read."""
    if name == "dense":  # W[N, K] -> [N/16, K/4, 16, 4]
        n, k = w.shape
        return np.ascontiguousarray(w.reshape(n // 16, 16, k // 4, 4).transpose(0, 2, 1, 3))
    kh, kw, c, f = w.shape  # HWIO -> [KH, KW, F/16, C/4, 16, 4]
    return np.ascontiguousarray(
        w.reshape(kh, kw, c // 4, 4, f // 16, 16).transpose(0, 1, 4, 2, 5, 3)
    )


def _module(name: str, x_shape: tuple[int, ...], w_shape: tuple[int, ...]):
    """The int8 computation in ``tvm.te`` over the packed weights."""
    import tvm
    from tvm import te

    x = te.placeholder(x_shape, "uint8", name="X")
    w = te.placeholder(w_shape, "int8", name="W")
    i32 = "int32"
    if name == "dense":
        k = te.reduce_axis((0, x_shape[1]), "k")
        out = te.compute(
            (x_shape[0], w_shape[0] * 16),
            lambda i, j: te.sum(
                x[i, k].astype(i32) * w[j // 16, k // 4, j % 16, k % 4].astype(i32), axis=k
            ),
            name="compute",
        )
    else:
        n, h, wd, c = x_shape
        kh, kw, fo = w_shape[:3]
        pad = te.compute(
            (n, h + kh - 1, wd + kw - 1, c),
            lambda b, y, xx, ch: te.if_then_else(
                te.all(y >= kh // 2, y < h + kh // 2, xx >= kw // 2, xx < wd + kw // 2),
                x[b, y - kh // 2, xx - kw // 2, ch],
                tvm.tirx.const(0, "uint8"),
            ),
            name="PaddedInput",
        )
        ry, rx, rc = (te.reduce_axis((0, e), nm) for e, nm in ((kh, "ry"), (kw, "rx"), (c, "rc")))
        out = te.compute(
            (n, h, wd, fo * 16),
            lambda b, y, xx, f: te.sum(
                pad[b, y + ry, xx + rx, rc].astype(i32)
                * w[ry, rx, f // 16, rc // 4, f % 16, rc % 4].astype(i32),
                axis=[ry, rx, rc],
            ),
            name="conv2d_nhwc",
        )
    return tvm.IRModule({"main": te.create_prim_func([x, w, out])})


def tune(
    name: str,
    args: list[np.ndarray],
    ref: np.ndarray,
    mcpu: str | None,
    trials: int,
    cores: int,
    work_dir: str,
    timeout: float = 3600.0,
) -> dict[str, Any]:
    """Tune workload ``name`` with TVM in a child interpreter: its result (``library``,
    ``intrin``, ``wall_secs``, ``ok``) or ``{"error": ...}``."""
    os.makedirs(work_dir, exist_ok=True)
    x, w = args
    np.save(os.path.join(work_dir, "x.npy"), x)
    np.save(os.path.join(work_dir, "w.npy"), pack_weights(name, w))
    np.save(os.path.join(work_dir, "ref.npy"), ref.astype(np.int32))
    spec = {"name": name, "mcpu": mcpu, "trials": trials, "cores": cores, "work_dir": work_dir}
    argv = [os.path.abspath(__file__), json.dumps(spec)]
    return common.run_tvm_child(argv, work_dir, os.path.join(work_dir, "tvm_result.json"), timeout)


def timer(result: dict[str, Any], work_dir: str, cores: int):
    """A callable timing TVM's exported kernel once (the best of 3 repeats of at least
    100 ms, as ``int8.py`` times ours), in this process with ``cores`` threads."""
    os.environ.setdefault("TVM_NUM_THREADS", str(cores))  # before TVM's pool starts
    import tvm

    lib = tvm.runtime.load_module(result["library"])
    dev = tvm.cpu()
    x = np.load(os.path.join(work_dir, "x.npy"))
    w = np.load(os.path.join(work_dir, "w.npy"))
    ref = np.load(os.path.join(work_dir, "ref.npy"))
    arrays = [tvm.runtime.tensor(a, dev) for a in (x, w, np.zeros(ref.shape, np.int32))]
    evaluator = lib.time_evaluator("main", dev, number=1, repeat=3, min_repeat_ms=100)

    def run() -> float:
        lib["main"](*arrays)
        return min(float(s) for s in evaluator(*arrays).results)

    return run


def _builds(intrin: str, target) -> bool:
    """Whether TVM builds a tensorized 16x4 dot product with ``intrin`` for ``target``
    (TVM 0.27's ``dot_16x4_vnni`` calls ``llvm.x86.avx512.vpdpbusd.512`` with the operand
    types of an older LLVM, which its own LLVM rejects)."""
    import tvm
    import tvm.s_tir as s_tir

    mod = _module("dense", (16, 4), (1, 1, 16, 4))
    sch = s_tir.Schedule(mod)
    block = sch.get_sblock("compute")
    i, j, k = sch.get_loops(block)
    sch.decompose_reduction(block, j)
    sch.tensorize(j, intrin)
    try:
        tvm.compile(sch.mod, target=target)
    except Exception as err:  # noqa: BLE001  (TVM raises its own errors)
        print(f"TVM cannot build {intrin}: {str(err).splitlines()[0]}", flush=True)
        return False
    return True


def _child(spec: dict[str, Any]) -> None:
    """Tune with TVM MetaSchedule, check, export (see the module docstring)."""
    import tvm
    import tvm.s_tir.meta_schedule as tms
    import tvm.s_tir.tensor_intrin  # noqa: F401  (registers the x86 intrinsics)
    from tvm.target import codegen

    work = spec["work_dir"]
    x = np.load(os.path.join(work, "x.npy"))
    w = np.load(os.path.join(work, "w.npy"))
    ref = np.load(os.path.join(work, "ref.npy"))
    cores = int(spec["cores"])
    mcpu = spec.get("mcpu") or codegen.llvm_get_system_cpu()
    target = tvm.target.Target({"kind": "llvm", "num-cores": cores, "mcpu": mcpu})
    present = {str(f) for f in codegen.llvm_get_cpu_features(target)}
    usable = [i for flag, i in INTRINSICS if flag in present and _builds(i, target)]
    intrin = usable[0] if usable else None
    rules = list(tms.schedule_rule.ScheduleRule.create("llvm"))
    if intrin is not None:
        # vectorizing a loop around a tensorized block fails in TVM 0.27's VectorizeLoop
        # ("Cannot broadcast lanes=16 to 1024"): the innermost-loop vectorization of
        # ParallelizeVectorizeUnroll is kept off where the tile loops would be taken
        at = next(
            i for i, r in enumerate(rules) if type(r).__name__ == "ParallelizeVectorizeUnroll"
        )
        rules[at] = tms.schedule_rule.ParallelizeVectorizeUnroll(
            max_jobs_per_core=16,
            max_vectorize_extent=spec.get("max_vectorize_extent", 64),
            unroll_max_steps=[0, 16, 64, 512],
            unroll_explicit=True,
        )
    postprocs = list(tms.postproc.Postproc.create("llvm"))
    if intrin is not None:
        at = next(i for i, r in enumerate(rules) if type(r).__name__ == "MultiLevelTiling")
        rules.insert(
            at,
            tms.schedule_rule.MultiLevelTilingWithIntrin(
                intrin,
                structure="SSRSRS",
                tile_binds=None,
                max_innermost_factor=64,
                vector_load_lens=None,
                reuse_read=None,
                reuse_write=tms.schedule_rule.ReuseType(req="may", levels=[1, 2], scope="global"),
            ),
        )
        postprocs.append(tms.postproc.RewriteTensorize(vectorize_init_loop=True))
    mod = _module(spec["name"], x.shape, w.shape)

    def runner_threads() -> None:
        os.environ["TVM_NUM_THREADS"] = str(cores)

    start = time.perf_counter()
    db = tms.tune_tir(
        mod,
        target,
        work,
        spec["trials"],
        num_trials_per_iter=min(spec["trials"], 32),
        space=tms.space_generator.PostOrderApply(sch_rules=rules, postprocs=postprocs),
        builder=tms.builder.LocalBuilder(timeout_sec=120),
        runner=tms.runner.LocalRunner(initializer=runner_threads),
    )
    wall = time.perf_counter() - start
    records = list(db.get_all_tuning_records())
    sch = tms.tir_integration.compile_tir(db, mod, target)
    result: dict[str, Any] = {
        "version": tvm.__version__,
        "target": str(target),
        "intrin": intrin or "",
        "wall_secs": wall,
        "trials": len(records),
    }
    if sch is None:
        result["error"] = "no valid schedule"
    else:
        lib = tvm.compile(sch.mod, target=target)
        dev = tvm.cpu()
        arrays = [tvm.runtime.tensor(a, dev) for a in (x, w, np.zeros(ref.shape, np.int32))]
        lib["main"](*arrays)
        result["ok"] = bool(np.array_equal(arrays[-1].numpy(), ref))
        result["tensorized"] = bool(intrin) and intrin in str(sch.trace)
        result["library"] = os.path.join(work, "tvm_best.so")
        lib.export_library(result["library"])
    with open(os.path.join(work, "tvm_result.json"), "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    _child(json.loads(sys.argv[1]))
