"""``tune_ops.py --target cuda``: the operator suite tuned for a GPU.

Per workload: the cuda design space is sampled and one sample is built with nvcc (the
PTX, cubin and ptxas resource usage; skipped without nvcc), then ``ms.tune_tir`` tunes
on the GPU, and the best schedule is checked against numpy and timed. Without a GPU
(and without a runner that reaches one) tuning fails at once: the run stops there with
one line saying why and exits with status 2.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from typing import Any


def run_cuda(args, workloads, target, root: str) -> int:
    """Tune ``workloads`` for the cuda ``target``; 0 when every workload tuned."""
    import numpy as np

    import metaschedule as ms
    from metaschedule.codegen import build
    from metaschedule.testing.gpu_schedules import sample_cuda_schedules

    results: list[dict[str, Any]] = []
    for wl in workloads:
        func = wl.ms_func()
        res: dict[str, Any] = {"workload": wl.name, "target": str(target)}
        samples = sample_cuda_schedules(func, 1, str(target), seed=args.seed)
        res["design_space_sample"] = bool(samples)
        if samples and (shutil.which("nvcc") or os.environ.get("NVCC")):
            lib = build(samples[0].mod, target)
            res["sample_resources"] = lib.resources
            regs = max((r["registers"] for r in lib.resources.values()), default=0)
            print(f"== {wl.name}: a sampled cuda schedule builds with nvcc ({regs} registers)")
        print(f"== {wl.name}: tuning with metaschedule for {args.target} ({args.trials} trials)")
        start = time.perf_counter()
        try:
            db = ms.tune_tir(
                func,
                target,
                os.path.join(root, wl.name, "metaschedule"),
                args.trials,
                num_trials_per_iter=args.num_trials_per_iter,
                seed=args.seed,
            )
        except RuntimeError as err:
            print(f"tune_ops: {wl.name}: {err}")
            return 2
        res["wall_secs"] = time.perf_counter() - start
        sch = ms.tir_integration.compile_tir(db, func, target)
        if sch is None:
            print(f"tune_ops: {wl.name}: no valid schedule was found on the GPU")
            return 2
        lib = build(sch.mod, target)
        data = wl.inputs()
        expected = wl.reference(data)
        out = np.zeros_like(expected)
        lib(*data, out)
        np.testing.assert_allclose(out, expected, rtol=1e-3, atol=1e-3)
        best = min(_time(lib, data, out) for _ in range(args.rounds))
        res["best_secs"] = best
        res["resources"] = lib.resources
        print(f"== {wl.name}: best {best * 1e6:.1f} us")
        results.append(res)
    path = args.json or os.path.join(os.path.dirname(__file__), "results", "tune_ops_cuda.json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(results, f, indent=1, default=str)
    print(f"wrote {path}")
    return 0


def _time(lib, data, out, repeat: int = 10) -> float:
    lib(*data, out)  # warm-up
    start = time.perf_counter()
    for _ in range(repeat):
        lib(*data, out)
    return (time.perf_counter() - start) / repeat
