"""``metaschedule report``: the HTML page, its PNGs, a run in progress, and what a browser
shows (headless Chromium, skipped where it is not installed)."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess

import numpy as np
import pytest

from metaschedule.cli import main
from metaschedule.report.figures import spearman

CHROMIUM = "/usr/bin/chromium"


def test_spearman():
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert np.isnan(spearman([1], [2]))


def _in_progress_copy(work_dir: str, dest: str) -> str:
    """A copy of the tuned folder that looks like a live run with a trained cost model:
    predictions in the log, and a torn last line in the log and the database."""
    shutil.copytree(work_dir, dest)
    log = os.path.join(dest, "logs", "measurements.jsonl")
    with open(log) as f:
        lines = [json.loads(x) for x in f if x.strip()]
    for line in lines:  # scores that rank the candidates as measured (Spearman 1)
        line["predicted"] = [None if lat is None else 1.0 / lat for lat in line["latencies"]]
    with open(log, "w") as f:
        f.writelines(json.dumps(x) + "\n" for x in lines)
        f.write('{"v": 1, "run": 1, "time": 2, "task_id": 0, "lat')  # torn
    with open(os.path.join(dest, "database_tuning_record.json"), "a") as f:
        f.write("[0, [[[], []], [1e-")  # torn
    os.unlink(os.path.join(dest, "logs", "profile.json"))  # not written until the end
    return dest


@pytest.fixture(scope="module")
def report(tuned, tmp_path_factory):
    work_dir = _in_progress_copy(tuned[0], str(tmp_path_factory.mktemp("report") / "live"))
    out = os.path.join(os.path.dirname(work_dir), "out", "report.html")
    assert main(["report", work_dir, "-o", out]) == 0
    return work_dir, out


@pytest.mark.compiler
@pytest.mark.slow
def test_page_is_self_contained_with_every_plot(report):
    _, out = report
    with open(out, encoding="utf-8") as f:
        page = f.read()
    images = re.findall(r'<img alt="([^"]+)" src="data:image/png;base64,([^"]+)"', page)
    # per workload: curve, distribution, predictions; for the run: time split, allocation
    assert [alt for alt, _ in images] == [
        "tuning curve",
        "distribution",
        "predictions",
        "time split",
        "task allocation",
    ]
    assert page.count("<img") == 5
    for _, data in images:
        assert base64.b64decode(data).startswith(b"\x89PNG")
    assert "http://" not in page and "https://" not in page and "<script" not in page
    pngs = sorted(p for p in os.listdir(os.path.dirname(out)) if p.endswith(".png"))
    assert len(pngs) == 5 and "report_alloc.png" in pngs and "report_profile.png" in pngs
    assert "Spearman 1.00" not in page  # titles are in the images, not the text
    assert "matmul" in page and "metaschedule report" in page


@pytest.mark.compiler
@pytest.mark.slow
def test_without_the_measurement_log(tuned, tmp_path, capsys):
    work_dir = str(tmp_path / "bare")
    shutil.copytree(tuned[0], work_dir)
    shutil.rmtree(os.path.join(work_dir, "logs"))
    out = str(tmp_path / "bare.html")
    assert main(["report", work_dir, "-o", out]) == 0
    assert "Wrote" in capsys.readouterr().out
    with open(out, encoding="utf-8") as f:
        page = f.read()
    assert page.count("<img") == 2  # the curve (trials only) and the distribution
    assert "No measurement log" in page and "no measurement log" in page


def test_report_needs_an_html_name(tmp_path, capsys):
    assert main(["report", str(tmp_path), "-o", str(tmp_path / "r.pdf")]) == 2
    assert "give a name ending in .html" in capsys.readouterr().err


def _colour_pixels(img: np.ndarray, rgb: tuple[int, int, int], tol: int = 30) -> int:
    diff = np.abs(img[:, :, :3].astype(int) - np.array(rgb)).max(axis=2)
    return int((diff <= tol).sum())


@pytest.mark.compiler
@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="needs Debian's chromium")
def test_chromium_draws_the_plots(report, tmp_path):
    image = pytest.importorskip("matplotlib.image")
    _, out = report
    shot = str(tmp_path / "shot.png")
    subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={tmp_path / 'profile'}",
            f"--screenshot={shot}",
            "--window-size=1200,3000",
            "file://" + os.path.abspath(out),
        ],
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert os.path.isfile(shot), "chromium wrote no screenshot"
    img = (image.imread(shot) * 255).astype(np.uint8)
    assert img.shape[0] == 3000 and img.shape[1] == 1200
    nonwhite_rows = (img[:, :, :3].min(axis=2) < 200).any(axis=1)
    # the page is drawn in many places, top to bottom (not a blank or an error page)
    bands = nonwhite_rows.reshape(30, 100).any(axis=1)
    assert bands[:20].sum() >= 15, "the first 2000 px of the page are mostly blank"
    # each kind of plot shows its colour: curve (tab:blue), histogram (tab:purple),
    # predictions (tab:orange), time split (tab:cyan), allocation (the first stack colour)
    for name, rgb in [
        ("curve", (31, 119, 180)),
        ("histogram", (148, 103, 189)),
        ("time split", (23, 190, 207)),
    ]:
        assert _colour_pixels(img, rgb) > 50, f"no {name} drawn"
    # the prediction scatter: a few tab:orange points (alpha 0.7, so any orange shade)
    rgb = img[:, :, :3].astype(int)
    orange = (rgb[:, :, 0] > 230) & (rgb[:, :, 1] > 100) & (rgb[:, :, 1] < 200)
    assert int((orange & (rgb[:, :, 2] < 140)).sum()) > 40, "no predictions drawn"
