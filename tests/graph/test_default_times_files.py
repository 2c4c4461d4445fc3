"""default_schedules.json on hostile or shared ground: a malformed or nesting-bomb file is
a warning and no times, and writes merge under a lock with a bounded wait."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import textwrap
import warnings

import pytest

from metaschedule.graph import default_times
from metaschedule.graph.default_times import load_default_times, save_default_times
from metaschedule.testing.hostile import nesting_bomb


def _load(path):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        times = load_default_times(str(path))
    return times, [str(w.message) for w in caught]


@pytest.mark.parametrize(
    "text, why",
    [
        (nesting_bomb(), "nested too deeply"),
        ("{not json", "JSONDecodeError"),
        ('{"format": "metaschedule-default-schedules", "entries": 3}', "not a default-schedules"),
        ("[" * 50 + "]" * 50, "not a default-schedules"),
    ],
)
def test_a_malformed_file_is_a_warning_and_no_times(tmp_path, text, why):
    path = tmp_path / "default_schedules.json"
    path.write_text(text)
    times, messages = _load(path)  # no RecursionError
    assert times == {}
    assert len(messages) == 1 and str(path) in messages[0] and why in messages[0], messages


def test_bad_entries_are_skipped_and_a_save_replaces_a_bomb(tmp_path):
    path = tmp_path / "default_schedules.json"
    entries = [
        {"shash": "1", "target": "llvm", "run_sec": 0.5},
        {"shash": "2", "target": "llvm", "run_sec": [[[1]]]},
        "junk",
    ]
    path.write_text(json.dumps({"format": "metaschedule-default-schedules", "entries": entries}))
    times, messages = _load(path)
    assert times == {("1", "llvm"): 0.5} and "2 malformed entries" in messages[0]
    path.write_text(nesting_bomb())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        save_default_times(str(path), {("3", "llvm"): 0.25}, {})
    assert _load(path) == ({("3", "llvm"): 0.25}, [])
    assert sorted(os.listdir(tmp_path)) == ["default_schedules.json", "default_schedules.json.lock"]


def test_a_held_lock_bounds_the_wait_and_writes_nothing(tmp_path, monkeypatch):
    path = str(tmp_path / "default_schedules.json")
    save_default_times(path, {("1", "llvm"): 0.5}, {})
    monkeypatch.setattr(default_times, "LOCK_TIMEOUT_SEC", 0.3)
    with open(path + ".lock", "rb") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # another writer mid-merge
        with pytest.raises(TimeoutError, match="another process has held this lock"):
            save_default_times(path, {("2", "llvm"): 0.1}, {})
    assert load_default_times(path) == {("1", "llvm"): 0.5}
    save_default_times(path, {("2", "llvm"): 0.1}, {})  # free again
    assert load_default_times(path) == {("1", "llvm"): 0.5, ("2", "llvm"): 0.1}


_WRITER = textwrap.dedent("""
    import sys
    from metaschedule.graph.default_times import save_default_times
    path, first = sys.argv[1], int(sys.argv[2])
    for i in range(first, first + 20):
        save_default_times(path, {(str(i), "llvm"): 0.001 * (i + 1)}, {})
""")


def test_concurrent_writers_keep_each_others_entries(tmp_path):
    path = str(tmp_path / "default_schedules.json")
    writers = [
        subprocess.Popen([sys.executable, "-c", _WRITER, path, str(first)]) for first in (0, 100)
    ]
    for w in writers:
        assert w.wait(timeout=120) == 0
    assert len(load_default_times(path)) == 40
