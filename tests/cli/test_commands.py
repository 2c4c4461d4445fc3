"""Each subcommand through the entry point on a tiny tuned work folder."""

from __future__ import annotations

import json
import os
import re

import pytest

from metaschedule.cli import main

pytestmark = [pytest.mark.compiler, pytest.mark.slow]


def test_tune_output_and_files(tuned):
    work_dir, proc = tuned
    assert "Tuning finished: 4 trial(s)" in proc.stderr
    assert re.search(r"progress: task #0 matmul: 4/4 trials, best [\d.]+ GFLOPS", proc.stderr)
    assert "Records: 4 in" in proc.stdout and "matmul: best" in proc.stdout
    for name in (
        "database_workload.json",
        "database_tuning_record.json",
        "logs/measurements.jsonl",
        "logs/profile.json",
        "logs/task_0_matmul.log",
    ):
        assert os.path.isfile(os.path.join(work_dir, name)), name
    with open(os.path.join(work_dir, "logs/measurements.jsonl")) as f:
        lines = [json.loads(x) for x in f]
    assert sum(len(x["latencies"]) for x in lines) == 4
    assert all(x["task"] == "matmul" and x["flop"] == 2 * 32**3 for x in lines)


def test_show(tuned, capsys):
    work_dir, _ = tuned
    assert main(["show", work_dir]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("0  matmul"))
    trials, valid, us, gflops = row.split()[2:6]
    assert trials == "4" and int(valid) >= 1
    assert float(gflops) == pytest.approx(2 * 32**3 / float(us) / 1e3, rel=0.02)
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", row)  # when it was measured


@pytest.mark.parametrize(
    "flag, expect",
    [("--trace", "sch.get_block"), ("--script", "@T.prim_func"), ("--c", "#include <stdint.h>")],
)
def test_show_details(tuned, capsys, flag, expect):
    work_dir, _ = tuned
    assert main(["show", work_dir, flag, "-w", "0"]) == 0
    assert expect in capsys.readouterr().out
    assert main(["show", work_dir, flag, "-w", "5"]) == 2


def test_resume_and_database_best_in_the_statistics(tuned, tmp_path, workload_file, cli):
    work_dir, _ = tuned
    copy = tmp_path / "resumed"
    assert main(["db", "import", work_dir, "--work-dir", str(copy)]) == 0
    # --trials is the whole budget: the 4 imported records count, 2 more are measured
    proc = cli(
        "tune",
        f"{workload_file}:matmul",
        "--trials",
        "6",
        "--trials-per-iter",
        "2",
        "--strategy",
        "replay-func",
        "--seed",
        "1",
        "--final-selection-top-k",
        "0",
        "--work-dir",
        str(copy),
    )
    assert proc.returncode == 0, proc.stderr
    assert "Resuming:" in proc.stdout and "holds 4 record(s)" in proc.stdout
    assert "Records: 6 in" in proc.stdout
    # the statistics table shows the best over the database, not only this run's
    from metaschedule.report import load_run

    best_us = load_run(str(copy)).workloads[0].best_latency * 1e6
    table_row = next(
        line for line in proc.stderr.splitlines() if line.strip().startswith("0 | matmul")
    )
    assert float(table_row.split("|")[5]) == pytest.approx(best_us, rel=1e-3)


def test_db_round_trip_merge_and_prune(tuned, tmp_path, capsys):
    work_dir, _ = tuned
    sqlite = str(tmp_path / "run.sqlite")
    assert main(["db", "export", work_dir, "-o", sqlite]) == 0
    assert "4 record(s) added" in capsys.readouterr().out
    assert main(["db", "import", sqlite, "--work-dir", str(tmp_path / "back")]) == 0
    merged = str(tmp_path / "merged")
    assert main(["db", "merge", merged, work_dir, sqlite, str(tmp_path / "back")]) == 0
    out = capsys.readouterr().out
    assert "4 record(s) added, 8 duplicate(s) skipped; it now holds 4" in out
    assert main(["db", "prune", merged, "--top-k", "1"]) == 0
    assert "kept 1 of 4" in capsys.readouterr().out
    from metaschedule.report import load_run

    pruned = load_run(merged).workloads
    original = load_run(work_dir).workloads
    assert len(pruned) == 1 and pruned[0].trials == 1
    assert pruned[0].best_latency == original[0].best_latency
    best = str(tmp_path / "best.db")
    assert main(["db", "prune", sqlite, "--top-k", "2", "-o", best]) == 0
    assert load_run(best).workloads[0].trials <= 2
    assert main(["show", best]) == 0


def test_db_errors(tuned, tmp_path, capsys):
    work_dir, _ = tuned
    assert main(["db", "merge", work_dir, work_dir]) == 2
    assert main(["db", "export", str(tmp_path / "none"), "-o", str(tmp_path / "x.sqlite")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and "no such folder" in err[1]


def test_bench(tuned, capsys):
    work_dir, _ = tuned
    assert main(["bench", "gmm:32", "--database", work_dir, "--repeat", "2"]) == 0
    out = capsys.readouterr().out
    assert "numpy check OK" in out and "metaschedule (tuned)" in out and "numpy" in out
    assert main(["bench", "gmm:48", "--database", work_dir]) == 1
    assert "no valid record of gmm:48" in capsys.readouterr().err


def test_model_tune_compile_bench(tmp_path, capsys):
    """An ONNX model through tune, compile and bench; the library matches onnxruntime."""
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    from metaschedule import graph

    rng = np.random.default_rng(0)
    weights = [
        numpy_helper.from_array(rng.random((24, 16), dtype=np.float32), "W"),
        numpy_helper.from_array(rng.random(24, dtype=np.float32), "B"),
    ]
    nodes = [
        helper.make_node("Gemm", ["x", "W", "B"], ["y"], transB=1),
        helper.make_node("Relu", ["y"], ["z"]),
    ]
    g = helper.make_graph(
        nodes,
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [4, 24])],
        weights,
    )
    model = tmp_path / "m.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(model))
    work = str(tmp_path / "w")
    # the search and the final selection are tested in test_tune.py; a replayed trace is enough
    tune = ["tune", str(model), "--trials", "2", "--strategy", "replay-trace", "--work-dir", work]
    assert main([*tune, "--final-selection-top-k", "0"]) == 0
    lib = tmp_path / "m.so"
    assert main(["compile", str(model), "--database", work, "-o", str(lib)]) == 0
    assert lib.is_file()
    x = rng.random((4, 16), dtype=np.float32)
    (want,) = ort.InferenceSession(str(model)).run(None, {"x": x})
    got = graph.load(str(lib)).run(x=x)
    got = got[0] if isinstance(got, (list, tuple)) else got
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    capsys.readouterr()
    assert main(["bench", str(model), "--database", work, "--repeat", "2"]) == 0
    out = capsys.readouterr().out
    assert "metaschedule (tuned)" in out and "onnxruntime" in out
