"""``logs/profile.json`` is written atomically, under a fresh name, never through a file
planted beside it."""

from __future__ import annotations

import json
import os

import pytest

from metaschedule.cli.tune import _write_profile


class _Profiler:
    def __init__(self, split):
        self.split = split

    def get(self):
        return self.split


def test_runs_accumulate_and_a_planted_link_is_not_followed(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    victim = tmp_path / "victim"
    victim.write_text("untouched")
    os.symlink(victim, logs / "profile.json.tmp")  # the name the writer once used
    _write_profile(str(tmp_path), _Profiler({"total": 1.0}))
    _write_profile(str(tmp_path), _Profiler({"total": 2.0}))
    assert json.loads((logs / "profile.json").read_text()) == {
        "runs": [{"total": 1.0}, {"total": 2.0}]
    }
    assert victim.read_text() == "untouched"
    assert sorted(os.listdir(logs)) == ["profile.json", "profile.json.tmp"]


def test_a_failed_write_keeps_the_previous_file_and_leaves_nothing(tmp_path):
    _write_profile(str(tmp_path), _Profiler({"total": 1.0}))
    path = tmp_path / "logs" / "profile.json"
    before = path.read_text()
    with pytest.raises(TypeError):
        _write_profile(str(tmp_path), _Profiler({"total": object()}))
    assert path.read_text() == before
    assert os.listdir(tmp_path / "logs") == ["profile.json"]


def test_a_hostile_profile_file_is_started_over(tmp_path):
    path = tmp_path / "logs" / "profile.json"
    path.parent.mkdir()
    path.write_text('{"runs": ' + "[" * 100_000 + "]" * 100_000 + "}")
    _write_profile(str(tmp_path), _Profiler({"total": 3.0}))
    assert json.loads(path.read_text()) == {"runs": [{"total": 3.0}]}
