"""benchmarks/hostile_inputs.py --short (the CI form of the security campaign): every probe
ends in its clear error or warning, with no marker file, no record lost and no process
left behind. Two probes run at a time (``--jobs 2``): each still has its own process,
folder, kernel cache and token, and its bounds are wall-clock bounds with slack."""

import json
import os
import subprocess
import sys

import pytest

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks", "hostile_inputs.py")


@pytest.mark.compiler
def test_the_short_campaign_passes_every_probe(tmp_path):
    out = tmp_path / "hostile_inputs.json"
    proc = subprocess.run(
        [sys.executable, SCRIPT, "--short", "--jobs", "2", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=600,  # a hang is a failure, not a wait forever
        cwd=tmp_path,
    )
    assert out.exists(), proc.stderr[-3000:]
    rows = json.loads(out.read_text())["probes"]
    failed = [(r["probe"], r["outcome"]) for r in rows if not r["passed"]]
    assert not failed, failed
    assert proc.returncode == 0, proc.stdout[-3000:]
    names = {r["probe"] for r in rows}
    assert {"database name injection", "hung compiler", "full disk", "nesting bomb"} <= names
    assert not any(r["marker_created"] or r["processes_left"] or r["hung"] for r in rows)
    assert "probes passed" in proc.stdout
