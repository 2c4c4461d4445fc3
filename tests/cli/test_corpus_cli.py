"""``metaschedule db corpus add``, ``corpus train`` and ``corpus show`` on synthetic
records (nothing is measured or compiled)."""

from __future__ import annotations

import json
import os

import pytest

from metaschedule.cli import corpus as corpus_cli
from metaschedule.cli import main
from metaschedule.cli.corpus import default_corpus
from metaschedule.codegen.isa import isa_of
from metaschedule.cost_model import XGBModel
from metaschedule.cost_model.corpus import find_parts
from metaschedule.cost_model.pretrained import NAMES_FILE, load_pretrained, user_path
from metaschedule.database import JSONDatabase, TuningRecord
from metaschedule.target import Target
from metaschedule.testing.corpus import (
    SYNTHETIC_TARGET,
    SYNTHETIC_WORKLOADS,
    synthetic_corpus,
    synthetic_records,
)
from metaschedule.testing.workloads import matmul

AVX512 = "llvm -mcpu=skylake-avx512 -num-cores=4"
HELD_OUT = "matmul-24x24x8"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> str:
    """A corpus folder holding one small synthetic part (built once): 3 workloads, 12
    schedules each (tests/cost_model/test_pretrained.py checks what a model learns)."""
    root = tmp_path_factory.mktemp("cli_corpus") / "corpus"
    workloads = dict(list(SYNTHETIC_WORKLOADS.items())[:3])
    synthetic_corpus(str(root / "synthetic"), workloads, n=12)
    return str(root)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty cache folder: the default corpus and model live under it."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("METASCHEDULE_CORPUS", raising=False)
    return tmp_path / "cache"


def make_run(work_dir: str) -> dict[str, int]:
    """A tuning run's work folder of synthetic records: 8 of a 16^3 matmul on Haswell
    (2 of them failed), 4 of another matmul on Skylake-AVX512, one record without a
    target and one without a run time; a measurement log names the first workload.
    Returns the workloads' structural hashes by name."""
    db = JSONDatabase(work_dir=work_dir)
    first = synthetic_records(db, matmul(16), SYNTHETIC_TARGET, n=8, fail_every=4)
    other = synthetic_records(db, matmul(8, 16, 24), AVX512, n=4)
    # (the one without a run time on another target: else it would be a measurement of
    # the first schedule, superseded by its valid one)
    for run_secs, target in (([1e-6], None), (None, Target(AVX512))):
        db.commit_tuning_record(
            TuningRecord(first[0].trace, first[0].workload, run_secs, target, first[0].args_info)
        )
    db.close()
    os.makedirs(os.path.join(work_dir, "logs"))
    with open(os.path.join(work_dir, "logs", "measurements.jsonl"), "w") as f:
        line = {"v": 1, "task_id": 0, "task": "mm16", "shash": str(first[0].workload.shash)}
        f.write(json.dumps({**line, "latencies": [r.run_secs[0] for r in first]}) + "\n")
    return {"mm16": first[0].workload.shash, "other": other[0].workload.shash}


def records_of(part) -> list:
    db = part.database()
    try:
        return db.get_all_tuning_records()
    finally:
        db.close()


def test_db_corpus_add_makes_a_part_per_target_once(tmp_path, capsys):
    run = str(tmp_path / "run")
    shash = make_run(run)
    corpus = str(tmp_path / "corpus")
    assert main(["db", "corpus", "add", run, "--corpus", corpus]) == 0
    out = capsys.readouterr().out
    assert "read 8 record(s) (2 failed measurement(s)), added 8, 0 there already" in out
    assert "read 4 record(s) (0 failed measurement(s)), added 4" in out
    assert "Added 12 record(s) from 1 run(s)" in out
    assert "skipped 1 with no target, 1 with no run time" in out

    parts = {p.isa.name: p for p in find_parts([corpus])}
    assert sorted(parts) == ["avx2", "avx512"]
    haswell = parts["avx2"]
    assert os.path.basename(haswell.path).startswith("avx2-")
    assert haswell.isa == isa_of(Target(SYNTHETIC_TARGET))
    assert str(haswell.target) == str(Target(SYNTHETIC_TARGET))
    assert haswell.notes["added_by"] == "metaschedule db corpus add"
    records = records_of(haswell)
    assert len(records) == 8 and sum(not r.is_valid for r in records) == 2
    assert {r.workload.shash for r in records} == {shash["mm16"]}
    with open(os.path.join(haswell.path, NAMES_FILE)) as f:
        assert json.load(f) == {str(shash["mm16"]): "mm16"}
    assert len(records_of(parts["avx512"])) == 4

    # again: nothing new
    assert main(["db", "corpus", "add", run, "--corpus", corpus]) == 0
    out = capsys.readouterr().out
    assert "added 0, 8 there already; it holds 8 record(s) of 1 workload(s)" in out
    assert "Added 0 record(s)" in out and "(nothing new)" in out
    assert len(records_of(haswell)) == 8 and len(find_parts([corpus])) == 2


def test_db_corpus_add_copies_a_corpus_part_with_its_names(tmp_path, corpus, capsys):
    into = str(tmp_path / "merged")
    (source,) = find_parts([corpus])
    assert main(["db", "corpus", "add", source.path, "--corpus", into]) == 0
    assert "added 36" in capsys.readouterr().out
    (part,) = find_parts([into])
    with open(os.path.join(part.path, NAMES_FILE)) as f:
        names = json.load(f)
    with open(os.path.join(source.path, NAMES_FILE)) as f:
        assert names == json.load(f)


def test_the_default_corpus(tmp_path, cache, monkeypatch, capsys):
    assert default_corpus() == str(cache / "metaschedule" / "corpus")
    assert os.path.dirname(default_corpus()) == os.path.dirname(user_path())
    run = str(tmp_path / "run")
    make_run(run)
    assert main(["db", "corpus", "add", run]) == 0
    assert len(find_parts([default_corpus()])) == 2
    monkeypatch.setenv("METASCHEDULE_CORPUS", str(tmp_path / "elsewhere"))
    assert default_corpus() == str(tmp_path / "elsewhere")
    assert main(["db", "corpus", "add", run]) == 0
    assert len(find_parts([str(tmp_path / "elsewhere")])) == 2
    capsys.readouterr()


def test_db_corpus_add_names_a_bad_dir(tmp_path, cache, capsys):
    missing = str(tmp_path / "no-run")
    assert main(["db", "corpus", "add", missing, "--corpus", str(tmp_path / "c")]) == 1
    assert f"{missing}: no such folder" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["db", "corpus", "add", str(tmp_path / "empty")]) == 1
    assert "no database_workload.json in it" in capsys.readouterr().err
    inside = tmp_path / "c" / "part"
    inside.mkdir(parents=True)
    assert main(["db", "corpus", "add", str(inside), "--corpus", str(tmp_path / "c")]) == 2
    assert "is in the corpus" in capsys.readouterr().err
    assert not os.path.exists(tmp_path / "c" / "part" / "machine.json")


def test_corpus_train_writes_a_model_and_prints_the_held_out_spearman(
    corpus, tmp_path, cache, capsys
):
    out = str(tmp_path / "model.tar")
    argv = ["corpus", "train", corpus, "-o", out, "--holdout", HELD_OUT, "--max-rounds", "60"]
    assert main(argv) == 0
    printed = capsys.readouterr()
    assert "Trained on 24 sample(s) of 1 part(s) (12 held out)" in printed.out
    assert f"Wrote {out} (" in printed.out
    line = next(ln for ln in printed.out.splitlines() if "Spearman" in ln)
    assert f"held out {HELD_OUT}@" in line
    model_rho = float(line.split("Spearman ")[1].split()[0])
    prior_rho = float(line.split("the analytic prior alone: ")[1].rstrip(")"))
    assert -1 <= model_rho <= 1 and -1 <= prior_rho <= 1
    assert f"XGBModel(pretrained={os.path.abspath(out)!r})" in printed.out
    assert "12 records" in printed.err  # the progress, per workload
    assert load_pretrained(out).meta["held_out"] == [HELD_OUT]
    assert XGBModel(pretrained=out, num_tuning_cores=1).informed


def test_corpus_train_writes_the_user_model_by_default(corpus, cache, monkeypatch, capsys):
    monkeypatch.setenv("METASCHEDULE_CORPUS", corpus)
    assert main(["corpus", "train", "--max-rounds", "20", "--max-depth", "4"]) == 0
    out = capsys.readouterr().out
    assert os.path.isfile(user_path()) and user_path().startswith(str(cache))
    assert "XGBModel(pretrained=True), the default of tuning, now starts from it" in out
    assert XGBModel(num_tuning_cores=1).pretrained.path == user_path()


def test_corpus_train_says_how_the_model_is_found(tmp_path, cache, monkeypatch):
    mine = str(tmp_path / "m.tar")
    assert "now starts from it" in corpus_cli._how_to_use(user_path())
    assert f"XGBModel(pretrained={mine!r})" in corpus_cli._how_to_use(mine)


def test_corpus_train_without_a_corpus_gives_a_hint(tmp_path, cache, capsys):
    assert main(["corpus", "train"]) == 1
    err = capsys.readouterr().err
    assert "no such folder" in err and "metaschedule db corpus add" in err
    assert main(["corpus", "train", str(tmp_path)]) == 1
    assert "holds no part" in capsys.readouterr().err
    assert not os.path.exists(user_path())


def test_corpus_train_names_an_unknown_held_out_workload(corpus, tmp_path, capsys):
    argv = ["corpus", "train", corpus, "-o", str(tmp_path / "m.tar"), "--holdout", "mm,x"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "no workload named mm, x" in err and HELD_OUT in err
    assert not os.path.exists(tmp_path / "m.tar")


def test_corpus_show(corpus, tmp_path, capsys):
    assert main(["corpus", "show", corpus]) == 0
    head, row, total = capsys.readouterr().out.splitlines()
    assert head.split()[:5] == ["PART", "ISA", "WORKLOADS", "RECORDS", "FAILED"]
    path = os.path.join(corpus, "synthetic")
    assert row.split()[:6] == [path, "avx2", "(haswell)", "3", "36", "0"]
    assert row.endswith(str(Target(SYNTHETIC_TARGET)))
    assert total == "1 part(s): 3 workload(s), 36 record(s), 0 failed"
    assert main(["corpus", "show", str(tmp_path)]) == 1
    assert "holds no part" in capsys.readouterr().err
