"""The code generators compared on identical schedules: TVM's samples replayed in ours.

Samples random points of TVM MetaSchedule's default llvm design space for a suite
operator, replays the same sampling decisions (tile sizes, unroll, compute locations)
in our default space (the two spaces have the same instructions in the same order),
builds both, checks both against numpy and times them interleaved, one thread each. A
ratio near 1 means our C back end makes code as fast as TVM's LLVM back end for that
schedule; the spread shows which schedules lose and why (``--dump`` writes both
schedules and our C to ``--out``)::

    python benchmarks/same_decisions.py c2d --samples 24
    python benchmarks/same_decisions.py dep --samples 16 --only 6 --dump
    python benchmarks/same_decisions.py mmodd --tvm-db W/mmodd/tvm --top 4  # TVM's best

(``--tvm-db``: the best records of a TVM tuning folder, e.g. ``tune_ops.py --tvm
--work-dir W``, replayed instead of samples.)

Needs TVM (``pip install -e ".[bench]"``). Timings are single-threaded on purpose: they
compare code quality, not thread pools, and are less disturbed by other processes.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

KINDS = ("SamplePerfectTile", "SampleCategorical", "SampleComputeLocation")


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "workload",
        help="a suite operator (gmm:N, c2d, dep, cbr, tbg, sfm, dns, pool) or an "
        "extra one (extra_ops.py)",
    )
    p.add_argument("--samples", type=int, default=16, help="schedules sampled (default 16)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--only", default="", help="comma-separated sample indices to run")
    p.add_argument("--rounds", type=int, default=4, help="interleaved timing rounds")
    p.add_argument(
        "--decisions",
        default="",
        help='one schedule instead of samples: "SPACE:JSON", e.g. a trace\'s decisions from a '
        "database, '0:[[1,1,1,1],[1,56,2,1],[14,4,2,1],[1,1,2,16],[3,1],[1,3],2,8]'",
    )
    p.add_argument(
        "--tvm-db",
        default="",
        help="replay the best --top records of a TVM tuning folder (tune_ops.py --work-dir "
        "W writes W/<workload>/tvm) instead of samples",
    )
    p.add_argument("--top", type=int, default=1, help="records of --tvm-db replayed")
    p.add_argument("--threads", type=int, default=1, help="threads of both (default 1)")
    p.add_argument("--dump", action="store_true", help="write the schedules and our C")
    p.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results"))
    return p.parse_args(argv)


def _decisions(sch) -> list:
    out = []
    for inst in sch.trace.insts:
        if inst.kind.name in KINDS:
            d = sch.trace.decisions[inst]
            out.append([int(x) for x in d] if inst.kind.name == KINDS[0] else int(d))
    return out


def _without_layout_rewrite(tvm, mod, target, arrays, dev):
    """TVM's schedule built without its weight layout-rewrite block, and arguments of the
    shapes it then takes (random data where a weight was re-laid out): for timing."""
    import numpy as np
    from tvm.s_tir.meta_schedule.arg_info import ArgInfo
    from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock

    stripped = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(mod)
    shapes = [[int(d) for d in a.shape] for a in ArgInfo.from_prim_func(stripped["main"])]
    rng = np.random.default_rng(0)
    out = [
        a
        if list(a.shape) == shape
        else tvm.runtime.tensor(rng.standard_normal(shape).astype("float32"), dev)
        for a, shape in zip(arrays, shapes)
    ]
    return tvm.compile(stripped, target=target).mod, out


def _signature(insts) -> list[str]:
    """The instruction kinds of a design space, without the look-ups (TVM calls blocks
    "sblocks"), each with the positions of the split loops it takes (AddRFactor makes one
    space per loop of a split): the same for the same space in TVM and here."""

    def key(x) -> int:  # TVM makes a new Python object per access: its handle then
        return x.__chandle__() if hasattr(x, "__chandle__") else id(x)

    split_part: dict[int, int] = {}  # a Split's output loop -> its position
    out = []
    for inst in insts:
        kind = inst.kind.name
        if kind == "Split":
            split_part.update({key(lp): j for j, lp in enumerate(inst.outputs)})
        if kind.startswith("Get") or kind == "EnterPostproc":
            continue
        parts = [str(split_part[key(x)]) for x in inst.inputs if key(x) in split_part]
        out.append(kind + (f"@{','.join(parts)}" if parts and kind != "Reorder" else ""))
    return out


def _tvm_best(tms, tmod, tspaces, work_dir: str, top: int) -> list[tuple[int, list]]:
    """(space index, decisions) of the ``top`` fastest records of TVM's database in
    ``work_dir``, for the workload ``tmod`` (space found by instruction signature)."""
    db = tms.database.JSONDatabase(work_dir=work_dir, allow_missing=False)
    recs = db.get_top_k(db.commit_workload(tmod), top)
    sigs = [_signature(sp.trace.insts) for sp in tspaces]
    out = []
    for rec in recs:
        insts = list(rec.trace.insts)
        cut = next((i for i, x in enumerate(insts) if x.kind.name == "EnterPostproc"), len(insts))
        si = sigs.index(_signature(insts[:cut]))
        decisions = []
        for inst in insts[:cut]:
            if inst.kind.name in KINDS:
                d = rec.trace.decisions[inst]
                decisions.append([int(x) for x in d] if inst.kind.name == KINDS[0] else int(d))
        secs = [float(x) for x in rec.run_secs]
        print(f"TVM record: space {si}, {1e6 * sum(secs) / len(secs):.1f} us in tuning")
        out.append((si, decisions))
    return out


def _match_spaces(tspaces, spaces) -> list[int] | None:
    """For each of TVM's design spaces, the index of ours with the same instructions (the
    two generators may list the same spaces in another order; ours may hold more, e.g.
    PackPanel's packed copies, which TVM's space lacks); None if one of TVM's is missing."""
    if len(tspaces) > len(spaces):
        return None
    free = {j: _signature(sp.trace.insts) for j, sp in enumerate(spaces)}
    out = []
    for tsp in tspaces:
        sig = _signature(tsp.trace.insts)
        j = next((j for j, s in free.items() if s == sig), None)
        if j is None:
            return None
        out.append(j)
        del free[j]
    return out


class _ExtraWorkload:
    """An operator of ``extra_ops.py`` with the interface of a suite workload."""

    def __init__(self, name: str) -> None:
        import extra_ops
        import numpy as np

        from metaschedule import te

        self.op = extra_ops.EXTRA[name]
        self._func = te.create_prim_func(extra_ops.tensors(name, te))
        rng = np.random.default_rng(0)
        self._inputs = [rng.standard_normal(s, dtype=np.float32) for s in self.op.shapes]
        self.output_shape = tuple(self.op.reference(self._inputs).shape)

    def func(self):
        return self._func

    def inputs(self):
        return [x.copy() for x in self._inputs]

    def reference(self, *args):
        return self.op.reference(list(args))


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    os.environ["TVM_NUM_THREADS"] = str(args.threads)
    import numpy as np
    import tvm
    import tvm.s_tir.meta_schedule as tms
    from tvm.s_tir.schedule import Schedule as TvmSchedule
    from tvm.s_tir.schedule import Trace as TvmTrace
    from tvm.target import codegen

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import extra_ops
    import suite

    from metaschedule.codegen import build
    from metaschedule.flop_count import estimate_flops
    from metaschedule.schedule import Schedule
    from metaschedule.schedule.trace import Trace
    from metaschedule.space_generator import PostOrderApply
    from metaschedule.target import Target
    from metaschedule.tune_context import TuneContext
    from metaschedule.workloads import get_workload

    name = args.workload
    target = tvm.target.Target(
        {"kind": "llvm", "num-cores": args.threads, "mcpu": codegen.llvm_get_system_cpu()}
    )
    if name in extra_ops.EXTRA:  # an operator beyond the suite (extra_ops.py)
        tensors = extra_ops.tensors(name, tvm.te)
        wl = _ExtraWorkload(name)
    else:
        tensors = suite.tvm_tensors(name)
        wl = get_workload(name)
    tmod = tvm.IRModule({"main": tvm.te.create_prim_func(tensors)})
    tctx = tms.TuneContext(
        mod=tmod, target=target, space_generator="post-order-apply", num_threads=1
    )
    tspaces, tpost = tctx.generate_design_space(), tctx.space_generator.postprocs
    func = wl.func()
    inputs = wl.inputs()
    ref = wl.reference(*inputs)
    flops = estimate_flops(func)
    ctx = TuneContext(func, target="llvm", space_generator=PostOrderApply(), rand_state=0)
    spaces, post = ctx.generate_design_space(), ctx.space_generator.postprocs
    match = _match_spaces(tspaces, spaces)
    if match is None:
        print(
            f"the spaces differ: {len(spaces)} design spaces here, {len(tspaces)} in TVM "
            "(one of TVM's has no counterpart here)"
        )
        return 1
    ours_target = Target({**Target("cpu").as_json(), "num_cores": args.threads})
    only = {int(x) for x in args.only.split(",") if x}
    rng = np.random.default_rng(args.seed)
    dev = tvm.cpu()
    shapes = [tuple(int(d) for d in t.shape) for t in tensors]
    rows = []
    print(
        f"{name}: TVM {tvm.__version__} LLVM vs our C, same decisions, {args.threads} thread(s), "
        "GFLOPS"
    )
    given_list: list[tuple[int, list]] = []
    if args.decisions:
        space_index, _, given = args.decisions.partition(":")
        given_list = [(int(space_index), json.loads(given))]
    elif args.tvm_db:
        given_list = _tvm_best(tms, tmod, tspaces, args.tvm_db, args.top)
    for k in range(len(given_list) if given_list else args.samples):
        si, seed = int(rng.integers(len(tspaces))), int(rng.integers(2**31))
        if only and k not in only:
            continue
        tsch = TvmSchedule(tmod, seed=seed)
        tchosen = {}
        fixed = given_list[k] if given_list else None
        if fixed is not None:
            si, it = fixed[0], iter(fixed[1])
            tchosen = {i: next(it) for i in tspaces[si].trace.insts if i.kind.name in KINDS}
        TvmTrace(tspaces[si].trace.insts, tchosen).apply_to_schedule(tsch, remove_postproc=True)
        tsch.enter_postproc()
        if not all(p.apply(tsch) for p in tpost):
            print(f"{k:3d} rejected by TVM's postprocessors")
            continue
        decisions = _decisions(tsch)
        tlib = tvm.compile(tsch.mod, target=target)
        zeros = np.zeros(wl.output_shape, np.float32)
        tarr = [tvm.runtime.tensor(x.reshape(s), dev) for x, s in zip((*inputs, zeros), shapes)]
        tlib.mod["main"](*tarr)
        tvm_ok = np.allclose(tarr[-1].numpy().reshape(ref.shape), ref, atol=1e-3, rtol=1e-3)
        space, it, chosen = spaces[match[si]], iter(decisions), {}
        for inst in space.trace.insts:
            if inst.kind.name in KINDS:
                chosen[inst] = next(it)
        sch = Schedule(ctx.mod, seed=0, error_render_level="none")
        Trace(space.trace.insts, chosen).apply_to_schedule(sch, remove_postproc=True)
        sch.enter_postproc()
        if not all(p.apply(sch) for p in post):
            print(f"{k:3d} rejected by our postprocessors: {decisions}")
            continue
        lib = build(sch.mod, ours_target)
        out = np.zeros(wl.output_shape, np.float32)
        packed = lib.pack_weights(*inputs, out)[:-1]  # RewriteLayout's weights, packed once
        lib(*packed, out)
        ok = np.allclose(out, ref, atol=1e-3, rtol=1e-3)
        # TVM timed without its weight re-layout too (done once ahead, as in its tuning)
        tlib_t, tarr_t = _without_layout_rewrite(tvm, tsch.mod, target, tarr, dev)
        tev = tlib_t.time_evaluator("main", dev, number=3, repeat=1)
        oev = lib.time_evaluator("main", number=3, repeat=1)
        t_tvm, t_ours = [], []
        for _ in range(args.rounds):
            t_tvm.append(min(tev(*tarr_t).results))
            t_ours.append(min(oev(*packed, out).results))
        g_tvm, g_ours = flops / min(t_tvm) / 1e9, flops / min(t_ours) / 1e9
        print(
            f"{k:3d} TVM {g_tvm:7.1f} ours {g_ours:7.1f} ours/TVM {g_ours / g_tvm:5.2f} "
            f"correct {tvm_ok},{ok} space {si} {decisions}",
            flush=True,
        )
        rows.append(
            {
                "sample": k,
                "space": si,
                "decisions": decisions,
                "tvm_gflops": g_tvm,
                "ours_gflops": g_ours,
                "correct": [bool(tvm_ok), bool(ok)],
            }
        )
        if args.dump:
            os.makedirs(args.out, exist_ok=True)
            stem = os.path.join(args.out, f"same_{name}_{k}")
            with open(stem + "_ours.c", "w") as f:
                f.write(lib.get_source())
            with open(stem + "_ours.py", "w") as f:
                f.write(str(sch.mod["main"].script()))
            tlib.export_library(stem + "_tvm.so")
            with open(stem + "_tvm.py", "w") as f:
                f.write(str(tsch.mod["main"].script()))
    if rows:
        ratios = [r["ours_gflops"] / r["tvm_gflops"] for r in rows]
        print(
            f"geomean ours/TVM {float(np.exp(np.mean(np.log(ratios)))):.2f}; best of the samples: "
            f"TVM {max(r['tvm_gflops'] for r in rows):.1f}, "
            f"ours {max(r['ours_gflops'] for r in rows):.1f} GFLOPS; load average "
            f"{os.getloadavg()[0]:.1f}"
        )
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, f"same_decisions_{name}.json"), "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
