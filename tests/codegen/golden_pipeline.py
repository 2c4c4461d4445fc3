"""Golden hashes of the C (and CUDA C) generated for a broad set of schedules.

A refactoring of the code generator must not change the code it writes. This script
records, once, the lowered IR of many schedules (the suite workloads' design spaces with
sampled decisions, hand-written schedules, random programs, on four CPU targets, a few
CUDA schedules) and the SHA-256 of the code generated for each; ``check`` regenerates the
code from the recorded IR and names the cases whose code changed::

    python tests/codegen/golden_pipeline.py record [--out /tmp/ms_golden] [--quick]
    python tests/codegen/golden_pipeline.py check [--out /tmp/ms_golden]

The record is a work file (kept out of the repository: it pins every decision of the
code generator, which ``tests/codegen/test_golden.py`` does for three kernels); record it
before a refactoring, check after each step. A case whose code cannot be generated
records its error, which must stay the same too.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

#: the CPU targets, every field that could come from the host given
TARGETS = {
    "avx512": "llvm -mcpu=x86-64-v4 -num-cores=2",
    "avx2": "llvm -mcpu=haswell -num-cores=2",
    "sse2": "llvm -mcpu=x86-64 -num-cores=2",
    "neon": "llvm -mtriple=aarch64-linux-gnu -mcpu=neoverse-n1 -num-cores=2",
}
CUDA_TARGET = "cuda -arch=sm_80"
#: options that switch code generator paths off, each tried on a subset of the cases
VARIANTS: dict[str, dict] = {
    "noauto": {"auto_vectorize": False, "version_guards": False},
    "noshare": {"shared_regions": False, "fuse_init": False, "merge_contiguous": False},
    "nojam": {
        "jam_small_tiles": False,
        "split_large_tiles": False,
        "hoist_invariant_loads": False,
        "order_updates": False,
        "share_broadcasts": False,
        "vectorize_outputs": False,
    },
}


def _suite_funcs(quick: bool) -> Iterator[tuple[str, object]]:
    from metaschedule.workloads import get_workload, suite_names

    for name in suite_names():
        yield name, get_workload(name).func()
    if not quick:
        yield "gmm127", _odd_matmul()


def _odd_matmul():
    from metaschedule import te
    from metaschedule.te import ops

    a = te.placeholder((127, 255), "float32", "A")
    b = te.placeholder((255, 511), "float32", "B")
    return te.create_prim_func([a, b, ops.matmul(a, b)])


def _space_schedules(func, target: str, n_samples: int, seed: int) -> Iterator[tuple[str, object]]:
    from metaschedule.schedule.trace import Trace
    from metaschedule.search_strategy.base import TraceReplayer
    from metaschedule.tune_context import TuneContext

    ctx = TuneContext(
        func, target=target, space_generator="post-order-apply", rand_state=seed, task_name="g"
    )
    spaces = ctx.generate_design_space()
    replay = TraceReplayer(ctx.mod, ctx.space_generator.postprocs)
    got, tries = 0, 0
    while got < n_samples and tries < 8 * n_samples:
        space = spaces[tries % len(spaces)]
        sch = replay(Trace(space.trace.insts, {}), seed * 7919 + tries)
        tries += 1
        if sch is not None:
            yield f"sample{tries}", sch.mod
            got += 1


def _cases(quick: bool) -> Iterator[tuple[str, str, Callable[[], object]]]:
    """(case name, target, a thunk giving the scheduled module)."""
    from metaschedule import te, tir
    from metaschedule.target import Target
    from metaschedule.te import ops
    from metaschedule.testing.fuzz import NumpyDraw, random_program
    from metaschedule.testing.schedules import matmul_schedule

    n_samples = 3 if quick else 6
    for tname, target in TARGETS.items():
        for wname, func in _suite_funcs(quick):
            for sname, mod in _space_schedules(func, target, n_samples, seed=1):
                yield f"{tname}/{wname}/{sname}", target, (lambda m=mod: m)
        for n in (64, 256) if not quick else (64,):
            a = te.placeholder((n, n), "float32", "A")
            b = te.placeholder((n, n), "float32", "B")
            sch = tir.Schedule(te.create_prim_func([a, b, ops.matmul(a, b)]))
            mod = matmul_schedule(sch, Target(target), row_block=32, col_block=32).mod
            yield f"{tname}/matmul_schedule{n}", target, (lambda m=mod: m)
        for seed in range(4 if quick else 12):
            prog = random_program(NumpyDraw(seed))
            try:
                func = prog.func()
            except Exception:  # noqa: BLE001 - a program te cannot build is no case
                continue
            yield f"{tname}/fuzz{seed}/unscheduled", target, (lambda f=func: f)
            for sname, mod in _space_schedules(func, target, 2, seed=seed):
                yield f"{tname}/fuzz{seed}/{sname}", target, (lambda m=mod: m)


def _cuda_cases(quick: bool) -> Iterator[tuple[str, Callable[[], object]]]:
    from metaschedule.testing.gpu_schedules import (
        sample_cuda_schedules,
        shared_memory_matmul,
        vectorized_fetch_matmul,
    )
    from metaschedule.workloads import get_workload

    yield "shared_memory_matmul", shared_memory_matmul().mod
    yield "vectorized_fetch_matmul", vectorized_fetch_matmul().mod
    for wname in ("gmm:128", "c2d", "sfm", "tbg") if not quick else ("gmm:128",):
        func = get_workload(wname).func()
        for i, sch in enumerate(sample_cuda_schedules(func, 3, CUDA_TARGET, seed=2)):
            yield f"{wname}/sample{i}", sch.mod


def _c_text(lowered, target: str, variant: str | None, debug: bool) -> str:
    from metaschedule.codegen import CodegenOptions, codegen_c
    from metaschedule.codegen.debug import DebugSites

    sites = DebugSites() if debug else None
    if variant is None:
        return codegen_c(lowered, target, debug=sites).code
    with CodegenOptions(**VARIANTS[variant]).applied():
        return codegen_c(lowered, target, debug=sites).code


def _cuda_text(lowered) -> str:
    from metaschedule.codegen.cuda_codegen import codegen_cuda

    return codegen_cuda(lowered, CUDA_TARGET).code


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _renderings(name: str, index: int) -> list[tuple[str | None, bool]]:
    """The (variant, debug) pairs a CPU case is generated with."""
    out: list[tuple[str | None, bool]] = [(None, False)]
    variants = list(VARIANTS)
    out.append((variants[index % len(variants)], False))
    if index % 5 == 0:
        out.append((None, True))
    return out


def record(out: Path, quick: bool) -> None:
    from metaschedule.tir import IRModule
    from metaschedule.tir.serialize import load_json, save_json
    from metaschedule.tir.transform import GPU_LOWER_PASSES, lower

    out.mkdir(parents=True, exist_ok=True)
    rows = []
    t0 = time.time()
    for index, (name, target, thunk) in enumerate(_cases(quick)):
        mod = thunk()
        if not isinstance(mod, IRModule):
            mod = IRModule({"main": mod})
        lowered = IRModule({k: lower(f) for k, f in mod.items()})
        text = save_json(lowered)
        again = load_json(text)
        for variant, debug in _renderings(name, index):
            try:
                code = _c_text(lowered, target, variant, debug)
            except Exception as err:  # noqa: BLE001 - an error is a recorded outcome too
                code = f"error: {type(err).__name__}: {err}"
            reloaded = _safe(_c_text, again, target, variant, debug)
            rows.append(
                {
                    "name": name,
                    "target": target,
                    "variant": variant,
                    "debug": debug,
                    "ir": text,
                    "sha": _digest(code),
                    "stable": _digest(reloaded) == _digest(code),
                }
            )
        if index % 20 == 0:
            print(f"{index} cases, {len(rows)} programs, {time.time() - t0:.0f} s", flush=True)
    for name, mod in _cuda_cases(quick):
        lowered = IRModule({k: lower(f, GPU_LOWER_PASSES) for k, f in mod.items()})
        text = save_json(lowered)
        code = _safe(_cuda_text, lowered)
        again = load_json(text)
        rows.append(
            {
                "name": f"cuda/{name}",
                "target": CUDA_TARGET,
                "variant": None,
                "debug": False,
                "ir": text,
                "sha": _digest(code),
                "stable": _digest(_safe(_cuda_text, again)) == _digest(code),
            }
        )
    (out / "cases.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    unstable = sum(not r["stable"] for r in rows)
    print(f"recorded {len(rows)} programs in {time.time() - t0:.0f} s; {unstable} not stable")


def _safe(fn: Callable[..., str], *args) -> str:
    """``fn(*args)``, or the error it raised as text."""
    try:
        return fn(*args)
    except Exception as err:  # noqa: BLE001
        return f"error: {type(err).__name__}: {err}"


def check(out: Path, dump: Path | None = None) -> list[str]:
    """The names of the recorded programs whose code changed (each also printed)."""
    from metaschedule.tir.serialize import load_json

    changed = []
    rows = [json.loads(line) for line in (out / "cases.jsonl").read_text().splitlines()]
    compared = 0
    for r in rows:
        if not r["stable"]:
            continue
        mod = load_json(r["ir"])
        if r["target"].startswith("cuda"):
            code = _safe(_cuda_text, mod)
        else:
            code = _safe(_c_text, mod, r["target"], r["variant"], r["debug"])
        compared += 1
        if _digest(code) != r["sha"]:
            label = f"{r['name']} [{r['target']}] variant={r['variant']} debug={r['debug']}"
            changed.append(label)
            print("CHANGED:", label)
            if dump is not None:
                dump.mkdir(parents=True, exist_ok=True)
                (dump / f"{len(changed)}.c").write_text(code)
    print(f"compared {compared} programs: {len(changed)} changed")
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=("record", "check"))
    parser.add_argument("--out", type=Path, default=Path("/tmp/ms_golden"))
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--dump", type=Path, default=None, help="write changed code here")
    args = parser.parse_args(argv)
    if args.command == "record":
        record(args.out, args.quick)
        return 0
    return 1 if check(args.out, args.dump) else 0


if __name__ == "__main__":
    sys.exit(main())
