"""Whole models end to end: ours (untuned and tuned) against onnxruntime and PyTorch.

ResNet-18, MobileNet-V2 (batch 1, 3x224x224, float32) and a BERT-base encoder layer
(sequence 128, hidden 768, 12 heads), defined here, and ResNet-50, MobileNet-V3 Large,
EfficientNet-B0, a ViT-B/16-style encoder, a GPT-2-style decoder block (sequence 128)
and a U-Net-style encoder-decoder (3x128x128), defined in ``metaschedule.testing.models``
(shared with the tests; ``--small`` takes the tests' reduced sizes), all PyTorch modules
with random weights (no downloads), exported to ONNX in memory (the TorchScript
exporter, opset 17) and imported with ``ms.graph.from_onnx``. For each model it reports
import and compile times, the tuning tasks with their weights, the end-to-end latency of
ours untuned (the default schedule) and, with ``--trials N``, tuned with N trials per
task, against onnxruntime and PyTorch at the same thread count; every output is checked
against PyTorch's (relative error: max abs difference over max abs value, must be under
1e-3).

    python benchmarks/models.py                     # untuned: ResNet-18, MobileNet-V2, BERT
    python benchmarks/models.py --models vit,gpt_block,unet    # any of MODELS, or "all"
    python benchmarks/models.py --models resnet18 --trials 8 --work-dir work/resnet18
    python benchmarks/models.py --models resnet18 --trials 64 --work-dir W --cpu --gap

Timing protocol (the default, ``--timing interleaved``): every framework is timed in
each of ``--rounds`` rounds, in turn (the order rotated each round), after a pause of
``--settle-ms``; latency is the best round, CPU ms the median round, and the same-round
ratios against onnxruntime are printed (median and spread: how steady the comparison
was). No framework spins: our OpenMP threads and PyTorch's wait passively
(``--omp-wait-policy passive``) and onnxruntime's pool does not spin
(``--ort-spinning off``), so none runs against another's spinning threads, and none
burns CPU waiting for a partner thread the scheduler has put aside. Measured at load
4-8 (ResNet-18, tuned/onnxruntime per round, 7 rounds): both passive 0.50 [0.35..0.93],
CPU ms 37.4 against 39.7; libgomp's default bounded spin (``--omp-wait-policy unset``)
with onnxruntime spinning or not 1.2-2.3 [0.5..5.9], our CPU ms 75-161 (spinning threads
waiting for a descheduled partner). On a quiet machine spinning makes each framework a
little faster: ``--omp-wait-policy unset --ort-spinning default`` times each with its own
defaults (fair when interleaved: a bounded spin is over long before the next framework
runs; ``active`` spins for ever and steals the cores of the frameworks timed after us).
``--timing sequential`` is the older protocol (each framework best of ``--repeat``, one
after the other). Under the measurement lock; on a shared machine compare ratios within
one run. ``--cpu`` prints the CPU time per run (all threads); ``--nchw`` also times ours
untuned in the imported NCHW layout (the A/B of ``convert_layout``); ``--gap`` prints the
per-task gap against onnxruntime from both profiles (:mod:`model_gap`: convolutions
matched by shape).
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import tempfile
import time
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common

import metaschedule as ms
from metaschedule import relax_integration as ri
from metaschedule.testing import models as code_models


# ----------------------------------------------------------------------------- models
def resnet18(torch):
    nn = torch.nn

    class Basic(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.down = None
            if stride != 1 or cin != cout:
                self.down = nn.Sequential(
                    nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)
                )

        def forward(self, x):
            y = torch.relu(self.bn1(self.conv1(x)))
            y = self.bn2(self.conv2(y))
            return torch.relu(y + (x if self.down is None else self.down(x)))

    class ResNet18(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(
                nn.Conv2d(3, 64, 7, 2, 3, bias=False),
                nn.BatchNorm2d(64),
                nn.ReLU(),
                nn.MaxPool2d(3, 2, 1),
            )
            layers, cin = [], 64
            for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
                layers += [Basic(cin, cout, stride), Basic(cout, cout, 1)]
                cin = cout
            self.layers = nn.Sequential(*layers)
            self.fc = nn.Linear(512, 1000)

        def forward(self, x):
            x = self.layers(self.stem(x))
            return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))

    return ResNet18(), (1, 3, 224, 224)


def mobilenet_v2(torch):
    nn = torch.nn

    def cbr(cin, cout, k=3, s=1, groups=1, act=True):
        mods = [nn.Conv2d(cin, cout, k, s, k // 2, groups=groups, bias=False), nn.BatchNorm2d(cout)]
        return nn.Sequential(*(mods + [nn.ReLU6()] if act else mods))

    class Inverted(nn.Module):
        def __init__(self, cin, cout, stride, expand):
            super().__init__()
            hidden = cin * expand
            mods = [cbr(cin, hidden, 1)] if expand != 1 else []
            mods += [cbr(hidden, hidden, 3, stride, groups=hidden), cbr(hidden, cout, 1, act=False)]
            self.body = nn.Sequential(*mods)
            self.res = stride == 1 and cin == cout

        def forward(self, x):
            return x + self.body(x) if self.res else self.body(x)

    class MobileNetV2(nn.Module):
        def __init__(self):
            super().__init__()
            cfg = [
                (1, 16, 1, 1),
                (6, 24, 2, 2),
                (6, 32, 3, 2),
                (6, 64, 4, 2),
                (6, 96, 3, 1),
                (6, 160, 3, 2),
                (6, 320, 1, 1),
            ]
            mods, cin = [cbr(3, 32, 3, 2)], 32
            for t, c, n, s in cfg:
                for i in range(n):
                    mods.append(Inverted(cin, c, s if i == 0 else 1, t))
                    cin = c
            mods.append(cbr(cin, 1280, 1))
            self.features = nn.Sequential(*mods)
            self.classifier = nn.Linear(1280, 1000)

        def forward(self, x):
            x = nn.functional.adaptive_avg_pool2d(self.features(x), 1)
            return self.classifier(torch.flatten(x, 1))

    return MobileNetV2(), (1, 3, 224, 224)


def bert_layer(torch, seq=128, hidden=768, heads=12, ffn=3072):
    nn = torch.nn

    class BertLayer(nn.Module):
        def __init__(self):
            super().__init__()
            self.q, self.k, self.v = (nn.Linear(hidden, hidden) for _ in range(3))
            self.o = nn.Linear(hidden, hidden)
            self.ln1 = nn.LayerNorm(hidden, eps=1e-12)
            self.ff1 = nn.Linear(hidden, ffn)
            self.ff2 = nn.Linear(ffn, hidden)
            self.ln2 = nn.LayerNorm(hidden, eps=1e-12)

        def heads(self, t):
            b, s, _ = t.shape
            return t.reshape(b, s, heads, hidden // heads).permute(0, 2, 1, 3)

        def forward(self, x):
            q, k, v = self.heads(self.q(x)), self.heads(self.k(x)), self.heads(self.v(x))
            att = torch.softmax(q @ k.transpose(-1, -2) / (hidden // heads) ** 0.5, dim=-1)
            ctx = (att @ v).permute(0, 2, 1, 3).reshape(x.shape)
            x = self.ln1(x + self.o(ctx))
            return self.ln2(x + self.ff2(nn.functional.gelu(self.ff1(x))))

    return BertLayer(), (1, seq, hidden)


MODELS = {
    "resnet18": resnet18,
    "mobilenet_v2": mobilenet_v2,
    "bert": bert_layer,
    **code_models.MODELS,
}


def _randomize(torch, module) -> None:
    """Random weights and non-trivial batch-norm statistics (seeded)."""
    torch.manual_seed(0)
    for m in module.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.uniform_(-0.2, 0.2)
            m.running_var.uniform_(0.5, 1.5)
            m.weight.data.uniform_(0.5, 1.5)
            m.bias.data.uniform_(-0.2, 0.2)


# ----------------------------------------------------------------------------- one model
def python_overhead(exe, x, calls: int = 2000) -> dict[str, float]:
    """Per inference, the Python around the kernels (us): ``exe(x=x)`` (binding the input,
    writing its address into the prepared calls, the one C call that runs every kernel,
    copying the output) with that C call made a no-op, so the kernels' time and its noise
    are not in it; the median of ``calls``."""
    program = exe._program
    if program is None:  # a library without the step runner: a Python loop
        return {"kernels": float(len(exe._calls))}
    real, ts = program.run, []
    program.run = lambda: (0, -1)
    try:
        for _ in range(calls):
            t0 = time.perf_counter()
            exe(x=x)
            ts.append(time.perf_counter() - t0)
    finally:
        program.run = real
    return {"kernels": float(program.count), "call_us": float(np.median(ts)) * 1e6}


def rel_err(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-30))


def cpu_ms(fn, number: int = 20) -> float:
    """CPU time of the whole process per call of ``fn`` (ms, all threads): on a shared
    machine far steadier than wall time (waiting for a core costs no CPU time), and on a
    quiet one about threads x latency when the work divides evenly."""
    with common.measurement_lock():
        fn()
        start = time.process_time()
        for _ in range(number):
            fn()
        return 1e3 * (time.process_time() - start) / number


def _one_round(fn, min_ms: float) -> tuple[float, float]:
    """(wall ms, CPU ms) per call of ``fn``, the mean over enough calls to last ``min_ms``
    (after one untimed call), under the measurement lock."""
    with common.measurement_lock():
        fn()
        t0 = time.perf_counter()
        fn()
        once = max(time.perf_counter() - t0, 1e-6)
        number = max(1, int(min_ms / 1e3 / once + 0.999))
        w0, c0 = time.perf_counter(), time.process_time()
        for _ in range(number):
            fn()
        w1, c1 = time.perf_counter(), time.process_time()
    return 1e3 * (w1 - w0) / number, 1e3 * (c1 - c0) / number


def time_frameworks(runners: dict[str, Any], args) -> dict[str, dict[str, Any]]:
    """Latency and CPU time of every runner (label -> zero-argument callable).

    ``interleaved`` (the default): ``args.rounds`` rounds, each timing every runner in
    turn (the order rotated by one each round) after a ``args.settle_ms`` pause, so one
    framework's idle threads have gone to sleep before the next one runs (libgomp's
    default wait spins about 300000 iterations, well under a millisecond, then sleeps;
    onnxruntime's pool likewise); per runner the best and the median round, the median
    CPU ms per run, and the rounds themselves. ``sequential``: each runner timed once,
    best of ``args.repeat``, one after the other (the protocol before the interleaved
    one; kept for comparison)."""
    out: dict[str, dict[str, Any]] = {}
    if args.timing == "sequential":
        for name, fn in runners.items():
            ms = [1e3 * t for t in common.time_python(fn, repeat=args.repeat)]
            out[name] = {"best_ms": min(ms), "median_ms": float(np.median(ms)), "wall": ms}
            if args.cpu:
                out[name]["cpu_ms"] = cpu_ms(fn)
        return out
    names = list(runners)
    wall: dict[str, list[float]] = {n: [] for n in names}
    cpu: dict[str, list[float]] = {n: [] for n in names}
    for r in range(args.rounds):
        for k in range(len(names)):
            name = names[(k + r) % len(names)]
            time.sleep(args.settle_ms / 1e3)
            w, c = _one_round(runners[name], args.min_round_ms)
            wall[name].append(w)
            cpu[name].append(c)
    for n in names:
        out[n] = {
            "best_ms": min(wall[n]),
            "median_ms": float(np.median(wall[n])),
            "cpu_ms": float(np.median(cpu[n])),
            "wall": wall[n],
            "cpu": cpu[n],
        }
    return out


def round_ratios(timings: dict[str, dict[str, Any]], a: str, b: str) -> list[float]:
    """Per-round latency ratios a/b (interleaved timing: the same round, the same load)."""
    return [x / y for x, y in zip(timings[a]["wall"], timings[b]["wall"])]


def run_model(name: str, args, torch, onnx, ort) -> dict[str, Any]:
    small = code_models.SMALL.get(name, {}) if args.small else {}
    module, shape = MODELS[name](torch, **small)
    module = module.eval()
    _randomize(torch, module)
    x = np.random.default_rng(0).standard_normal(shape).astype("float32")
    xt = torch.from_numpy(x)
    with torch.no_grad():
        ref = module(xt).numpy()
    buf = io.BytesIO()
    torch.onnx.export(
        module, (xt,), buf, dynamo=False, opset_version=17, input_names=["x"], output_names=["y"]
    )
    model_bytes = buf.getvalue()
    row: dict[str, Any] = {"model": name}

    t0 = time.perf_counter()
    func = ms.graph.from_onnx(onnx.load_from_string(model_bytes))
    row["import_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    tasks = ri.extract_tasks(func, args.target)
    row["extract_s"] = time.perf_counter() - t0
    row["tasks"] = [{"name": t.task_name, "weight": t.weight} for t in tasks]
    t0 = time.perf_counter()
    exe = ri.compile_relax(None, func, args.target, None)
    row["compile_s"] = time.perf_counter() - t0
    row["planned_mib"] = exe.plan.total_bytes / 2**20
    row["intermediates_mib"] = (
        sum(
            int(np.prod(exe.types[st.out].shape)) * np.dtype(exe.types[st.out].dtype).itemsize
            for st in exe.steps
            if st.func is not None
        )
        / 2**20
    )
    runners: dict[str, Any] = {}
    row["err_untuned"] = rel_err(exe(x=x), ref)
    row["python_overhead"] = python_overhead(exe, x)
    runners["untuned"] = lambda: exe(x=x)
    if args.nchw:  # A/B of the layout conversion: the imported NCHW layout
        nchw = ri.compile_relax(None, func, args.target, None, desired_layouts=None)
        row["err_untuned_nchw"] = rel_err(nchw(x=x), ref)
        runners["untuned_nchw"] = lambda: nchw(x=x)
    if args.profile:
        print(f"\n{name}, untuned: per-step profile (slowest first)")
        print("\n".join(str(exe.profile(x=x, number=3)).splitlines()[:16]))

    tuned = None
    if args.trials > 0:
        work_dir = os.path.join(args.work_dir or tempfile.mkdtemp(prefix="ms-models-"), name)
        t0 = time.perf_counter()
        strategy = "evolutionary"
        if args.population:  # a smaller evolutionary search than TVM's defaults
            strategy = ms.search_strategy.EvolutionarySearch(
                population_size=args.population,
                init_min_unmeasured=max(4, args.population // 4),
                genetic_num_iters=2,
            )
        db = ri.tune_relax(
            func,
            None,
            args.target,
            work_dir,
            max_trials_global=args.trials * len(tasks),
            max_trials_per_task=args.trials,
            num_trials_per_iter=min(args.trials, 64),
            strategy=strategy,
            seed=args.seed,
        )
        row["tune_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        tuned = ri.compile_relax(db, func, args.target, None)
        row["compile_tuned_s"] = time.perf_counter() - t0
        row["err_tuned"] = rel_err(tuned(x=x), ref)
        runners["tuned"] = lambda: tuned(x=x)
        if args.profile:
            print(f"\n{name}, tuned: per-step profile (slowest first)")
            print("\n".join(str(tuned.profile(x=x, number=3)).splitlines()[:16]))

    sess = None
    if ort is not None:
        sess = ort.InferenceSession(
            model_bytes, ort_options(ort, args), providers=["CPUExecutionProvider"]
        )
        row["err_ort"] = rel_err(sess.run(None, {"x": x})[0], ref)
        runners["ort"] = lambda: sess.run(None, {"x": x})
    torch.set_num_threads(args.threads)

    def run_torch():
        with torch.no_grad():
            module(xt)

    runners["torch"] = run_torch
    timings = time_frameworks(runners, args)
    row["timing"] = timings
    for key, label in (
        ("untuned", "ms_untuned_ms"),
        ("untuned_nchw", "ms_untuned_nchw_ms"),
        ("tuned", "ms_tuned_ms"),
        ("ort", "ort_ms"),
        ("torch", "torch_ms"),
    ):
        if key in timings:
            row[label] = timings[key]["best_ms"]
            if "cpu_ms" in timings[key]:
                row[f"cpu_{key}_ms"] = timings[key]["cpu_ms"]

    if args.gap and ort is not None:
        import model_gap

        ours = tuned if tuned is not None else exe
        row["gap"] = model_gap.gap_table(
            ours,
            model_bytes,
            {"x": x},
            ort,
            lambda prefix: ort_options(ort, args, prefix),
            number=args.gap_runs,
        )
    return row


def ort_options(ort, args, profile_prefix: str | None = None):
    """onnxruntime session options: ``args.threads`` intra-op threads, one inter-op;
    spinning as ``args.ort_spinning`` says (``default``: onnxruntime's own choice)."""
    so = ort.SessionOptions()
    so.intra_op_num_threads = args.threads
    so.inter_op_num_threads = 1
    if args.ort_spinning != "default":
        so.add_session_config_entry(
            "session.intra_op.allow_spinning", "1" if args.ort_spinning == "on" else "0"
        )
    if profile_prefix:
        so.enable_profiling = True
        so.profile_file_prefix = profile_prefix
    return so


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog="\n".join(__doc__.splitlines()[2:]),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--models",
        default="resnet18,mobilenet_v2,bert",
        help=f"comma-separated, from {', '.join(MODELS)}; or all",
    )
    p.add_argument(
        "--small",
        action="store_true",
        help="the tests' reduced sizes of the models from metaschedule.testing.models",
    )
    p.add_argument("--trials", type=int, default=0, help="trials per task (0: untuned only)")
    p.add_argument("--work-dir", default=None, help="tuning records (kept; resumes)")
    p.add_argument("--target", default="llvm")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--population",
        type=int,
        default=0,
        help="evolutionary population per task (0: the default, 2048); small budgets "
        "on a busy machine want 64",
    )
    p.add_argument(
        "--timing",
        default="interleaved",
        choices=["interleaved", "sequential"],
        help="interleaved (default): --rounds rounds, each timing every framework in turn "
        "after a --settle-ms pause, so none runs against another's spinning threads; "
        "latency is the best round, CPU ms the median; per-round ratios are printed. "
        "sequential: each framework best of --repeat, one after the other (the old protocol)",
    )
    p.add_argument("--rounds", type=int, default=5, help="interleaved rounds")
    p.add_argument(
        "--min-round-ms", type=float, default=300.0, help="each round's calls last at least this"
    )
    p.add_argument(
        "--settle-ms",
        type=float,
        default=50.0,
        help="pause before each framework's round (idle threads go to sleep)",
    )
    p.add_argument(
        "--omp-wait-policy",
        default="passive",
        choices=["passive", "unset", "active", "inherit"],
        help="OpenMP waiting for our kernels and PyTorch. passive (default): threads sleep "
        "between parallel regions, as onnxruntime's with --ort-spinning off (steady "
        "under load); unset: OMP_WAIT_POLICY and GOMP_SPINCOUNT removed, libgomp's "
        "default (a spin of about 300000 iterations, then sleep: faster on a quiet "
        "machine, far slower under load); active: spin for ever (steals the cores of "
        "the frameworks timed after us: unfair to them); inherit: leave the environment",
    )
    p.add_argument(
        "--ort-spinning",
        default="off",
        choices=["off", "on", "default"],
        help="onnxruntime's session.intra_op.allow_spinning (default off, as our passive "
        "waiting; 'default': onnxruntime's own default, on)",
    )
    p.add_argument(
        "--gap",
        action="store_true",
        help="per-task gap: our per-step profile (the tuned executable when --trials) "
        "against onnxruntime's per-node profile, convolutions matched by shape; a table "
        "and the rows in the JSON (row 'gap')",
    )
    p.add_argument("--gap-runs", type=int, default=20, help="profiled runs of each for --gap")
    p.add_argument(
        "--nchw",
        action="store_true",
        help="also time ours untuned in the imported NCHW layout (desired_layouts=None), "
        "interleaved with the default (NHWC convolutions on CPUs)",
    )
    p.add_argument(
        "--cpu",
        action="store_true",
        help="also report CPU ms per run (all threads; steadier than latency on a busy "
        "machine); measured always with --timing interleaved, printed with --cpu",
    )
    p.add_argument("--profile", action="store_true", help="print per-step profiles")
    p.add_argument("--plain", action="store_true")
    p.add_argument("--json", default=None)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    # read once, when libgomp is first loaded (our kernels and PyTorch's)
    if args.omp_wait_policy == "unset":
        os.environ.pop("OMP_WAIT_POLICY", None)
        os.environ.pop("GOMP_SPINCOUNT", None)
    elif args.omp_wait_policy != "inherit":
        os.environ["OMP_WAIT_POLICY"] = args.omp_wait_policy
    import torch

    onnx, why = common.optional_import("onnx")
    if onnx is None:
        raise SystemExit(f"models.py needs onnx: {why}")
    ort, why_ort = common.optional_import("onnxruntime")
    info = common.machine_info()
    for line in common.machine_lines(info):
        print(line)
    names = list(MODELS) if args.models == "all" else args.models.split(",")
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        raise SystemExit(f"unknown models {unknown}; known: {', '.join(MODELS)} (or all)")
    rows = [run_model(n, args, torch, onnx, ort) for n in names]
    cols = [
        "model",
        "import s",
        "compile s",
        "tasks",
        "ms untuned ms",
        *(["untuned NCHW ms"] if args.nchw else []),
        "ms tuned ms",
        "onnxruntime ms",
        "torch ms",
        "max rel err",
    ]
    table = []
    for r in rows:
        errs = [r[k] for k in ("err_untuned", "err_untuned_nchw", "err_tuned", "err_ort") if k in r]
        table.append(
            [
                r["model"],
                r["import_s"],
                r["compile_s"],
                f"{len(r['tasks'])} ({sum(t['weight'] for t in r['tasks'])} calls)",
                r["ms_untuned_ms"],
                *([r.get("ms_untuned_nchw_ms")] if args.nchw else []),
                r.get("ms_tuned_ms"),
                r.get("ort_ms"),
                r["torch_ms"],
                f"{max(errs):.1e}",
            ]
        )
    notes = [
        f"{args.threads} threads each; tuned: {args.trials} trials per task"
        if args.trials
        else f"{args.threads} threads each; untuned only (--trials N to tune)",
        f"timing: {args.timing}"
        + (
            f" ({args.rounds} rounds, best round; {args.settle_ms:g} ms pause before each)"
            if args.timing == "interleaved"
            else f" (best of {args.repeat}, one framework after the other)"
        )
        + f"; OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', '(unset)')}, "
        f"onnxruntime spinning {args.ort_spinning}",
        "load average at the end: " + " ".join(f"{x:.2f}" for x in os.getloadavg()),
    ]
    if ort is None:
        notes.append(f"onnxruntime: {why_ort}")
    common.print_table(
        "Whole models: end-to-end latency (ms, best round)",
        cols,
        table,
        notes,
        plain=args.plain,
    )
    for r in rows:  # how steady the comparison was: the same-round ratios
        tm = r["timing"]
        if args.timing != "interleaved" or "ort" not in tm:
            continue
        parts = []
        for k in ("untuned", "tuned", "torch"):
            if k in tm:
                q = round_ratios(tm, k, "ort")
                parts.append(f"{k} {np.median(q):.3f} [{min(q):.3f}..{max(q):.3f}]")
        print(
            f"{r['model']}: latency / onnxruntime's per round, median [min..max]: "
            + ", ".join(parts)
        )
    if args.cpu:
        keys = ["untuned", "untuned_nchw", "tuned", "ort", "torch"]
        for r in rows:
            got = [f"{k} {r['cpu_' + k + '_ms']:.1f}" for k in keys if "cpu_" + k + "_ms" in r]
            print(f"{r['model']}: CPU ms per run (all threads): " + ", ".join(got))
    for r in rows:
        print(
            f"{r['model']}: import {r['import_s']:.2f} s, extract_tasks {r['extract_s']:.2f} s, "
            f"compile {r['compile_s']:.2f} s; memory plan {r['planned_mib']:.1f} MiB for "
            f"{r['intermediates_mib']:.1f} MiB of intermediates"
        )
    for r in rows:
        o = r["python_overhead"]
        if "call_us" in o:
            print(
                f"{r['model']}: Python per inference {o['call_us']:.1f} us around the one C "
                f"call that runs its {o['kernels']:.0f} kernels"
            )
    for r in rows:
        tasks = ", ".join(f"{t['name']} x{t['weight']}" for t in r["tasks"])
        print(f"{r['model']} tasks: {tasks}")
    for r in rows:
        if "gap" in r:
            import model_gap

            print(f"\n{r['model']}: per-task gap against onnxruntime (ms per run, profiles)")
            print(model_gap.format_gap(r["gap"]))
    path = common.write_json(
        "models", {"machine": info, "args": vars(args), "rows": rows}, args.json
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
