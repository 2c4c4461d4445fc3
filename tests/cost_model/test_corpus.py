"""Corpus parts: machine.json round trips, finding parts, and the synthetic corpus."""

from __future__ import annotations

import json
import os

import pytest

from metaschedule.codegen.isa import isa_of
from metaschedule.cost_model.corpus import (
    MACHINE_FILE,
    find_parts,
    isa_from_json,
    isa_to_json,
    open_part,
    write_machine,
)
from metaschedule.cost_model.pretrained import NAMES_FILE
from metaschedule.database import JSONDatabase
from metaschedule.target import Target
from metaschedule.testing.corpus import synthetic_corpus
from metaschedule.testing.workloads import matmul

HASWELL = "llvm -mcpu=haswell -num-cores=4"


def test_machine_json_round_trips_the_isa_target_and_notes(tmp_path):
    path = str(tmp_path / "part")
    written = write_machine(path, HASWELL, cpu_model="Xeon E3-1230 v3", date="2026-01-02")
    part = open_part(path)
    assert part.isa == written.isa == isa_of(Target(HASWELL))
    assert part.isa.name == "avx2" and part.isa.cpu == "haswell"
    assert {"avx2", "fma"} <= part.isa.extensions
    assert str(part.target) == str(Target(HASWELL))
    assert part.notes == {"cpu_model": "Xeon E3-1230 v3", "date": "2026-01-02"}
    with open(os.path.join(path, MACHINE_FILE)) as f:
        payload = json.load(f)
    assert payload["isa"]["extensions"] == sorted(part.isa.extensions)
    assert isa_from_json(isa_to_json(part.isa)) == part.isa
    # the part's database is a JSON database in the folder
    db = part.database()
    assert isinstance(db, JSONDatabase) and len(db) == 0
    db.close()


def test_an_explicit_isa_is_kept(tmp_path):
    isa = isa_of(Target("llvm -mcpu=skylake-avx512"))
    write_machine(str(tmp_path), HASWELL, isa)
    assert open_part(str(tmp_path)).isa == isa


def test_find_parts_in_a_folder_of_parts_and_on_a_part(tmp_path):
    write_machine(str(tmp_path / "b-avx2"), HASWELL)
    write_machine(str(tmp_path / "a-avx512"), "llvm -mcpu=skylake-avx512")
    (tmp_path / "notes").mkdir()  # a folder without machine.json is not a part
    parts = find_parts([str(tmp_path)])
    assert [os.path.basename(p.path) for p in parts] == ["a-avx512", "b-avx2"]
    assert [p.isa.name for p in parts] == ["avx512", "avx2"]
    (one,) = find_parts([str(tmp_path / "b-avx2")])
    assert one.isa.name == "avx2"
    assert len(find_parts([str(tmp_path), str(tmp_path / "b-avx2")])) == 3


def test_a_folder_without_parts_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="holds no part.*benchmarks/corpus.py"):
        find_parts([str(tmp_path)])
    with pytest.raises(ValueError, match="no such folder"):
        find_parts([str(tmp_path / "missing")])
    with pytest.raises(ValueError, match="is not a corpus part: it has no machine.json"):
        open_part(str(tmp_path))


@pytest.mark.parametrize(
    "content, message",
    [
        ("{not json", "cannot read it"),
        ('{"format": "other/1"}', "not a metaschedule.corpus/1 file"),
        ('{"format": "metaschedule.corpus/1", "target": "llvm"}', "'isa'"),
        (
            '{"format": "metaschedule.corpus/1", "target": "llvm", "isa": {"arch": "x86_64"}}',
            "not a CpuIsa record: .*missing",
        ),
    ],
)
def test_a_malformed_machine_json_is_a_clear_error(tmp_path, content, message):
    (tmp_path / MACHINE_FILE).write_text(content)
    with pytest.raises(ValueError, match=message) as err:
        find_parts([str(tmp_path)])
    assert MACHINE_FILE in str(err.value)


def test_isa_from_json_names_unknown_fields():
    obj = isa_to_json(isa_of(Target(HASWELL)))
    with pytest.raises(ValueError, match=r"unknown fields \['turbo'\]"):
        isa_from_json({**obj, "turbo": True})


def test_the_synthetic_corpus_names_its_workloads_and_times_from_the_schedule(tmp_path):
    workloads = {"mm16": lambda: matmul(16), "mm8x16x24": lambda: matmul(8, 16, 24)}
    part = synthetic_corpus(str(tmp_path), workloads, n=8)
    assert part.isa.name == "avx2"  # the default target names a CPU: the same on every host
    with open(tmp_path / NAMES_FILE) as f:
        names = json.load(f)
    assert sorted(names.values()) == ["mm16", "mm8x16x24"]
    db = part.database()
    records = db.get_all_tuning_records()
    db.close()
    assert len(records) == 16 and {str(r.workload.shash) for r in records} == set(names)
    secs = [r.run_secs[0] for r in records]
    assert all(r.is_valid for r in records) and len(set(secs)) == 16
    # deterministic: a second corpus of the same seed has the same times
    again = synthetic_corpus(str(tmp_path / "again"), workloads, n=8)
    db = again.database()
    assert sorted(r.run_secs[0] for r in db.get_all_tuning_records()) == sorted(secs)
    db.close()
