"""The report page: one self-contained HTML file (plots embedded as base64 PNGs), with
the PNG files written beside it."""

from __future__ import annotations

import base64
import datetime
import html
import math
import os
import re

from . import figures
from .data import RunData, load_run
from .model_latency import model_latency_series, model_latency_table, num_tasks

__all__ = ["render_html", "write_report"]

_CSS = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 24px auto;
       max-width: 1060px; color: #222; }
h1 { font-size: 22px; } h2 { font-size: 18px; margin-top: 32px; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: 8px 0; }
th, td { padding: 4px 10px; border-bottom: 1px solid #eee; text-align: right; }
th:nth-child(2), td:nth-child(2) { text-align: left; }
img { display: block; max-width: 100%; margin: 8px 0 16px; }
.note { color: #666; font-size: 13px; } code { background: #f4f4f4; padding: 1px 4px; }
"""


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_")[:40] or "task"


def _img(path: str, alt: str) -> str:
    with open(path, "rb") as f:
        data = base64.b64encode(f.read()).decode()
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{data}">'


def _when(ts: float | None) -> str:
    return datetime.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S") if ts else "-"


def render_html(data: RunData, images: list[tuple[str, str, str]], command: str) -> str:
    """The page: a summary table, then each section's images ``(section, alt, path)``."""
    rows = []
    for i, wl in enumerate(data.workloads):
        best = wl.best_latency
        rows.append(
            "<tr>"
            + "".join(
                f"<td>{html.escape(str(c))}</td>"
                for c in (
                    i,
                    wl.name,
                    wl.trials,
                    sum(1 for s in wl.latencies if math.isfinite(s)),
                    f"{best * 1e6:.2f}" if math.isfinite(best) else "-",
                    f"{wl.best_gflops:.2f}" if math.isfinite(best) else "-",
                    _when(wl.best_time()),
                )
            )
            + "</tr>"
        )
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>metaschedule report: {html.escape(data.work_dir)}</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1>Tuning report: <code>{html.escape(data.work_dir)}</code></h1>",
        (
            f'<p class="note">Made {_when(datetime.datetime.now().timestamp())} by '
            f"<code>{html.escape(command)}</code>. {len(data.workloads)} workload(s), "
            f"{sum(w.trials for w in data.workloads)} record(s).</p>"
        ),
        (
            "<table><tr><th>#</th><th>workload</th><th>trials</th><th>valid</th>"
            "<th>best (us)</th><th>GFLOPS</th><th>best measured at</th></tr>"
        ),
        *rows,
        "</table>",
    ]
    parts += [f'<p class="note">{html.escape(n)}.</p>' for n in data.notes]
    section = None
    for name, alt, path in images:
        if name != section:
            parts.append(f"<h2>{html.escape(name)}</h2>")
            section = name
        if path.startswith("note:"):
            parts.append(f'<p class="note">{html.escape(path[5:])}</p>')
        elif path.startswith("html:"):  # a table made here
            parts.append(path[5:])
        else:
            parts.append(_img(path, alt))
    parts.append("</body></html>")
    return "\n".join(parts)


def write_report(work_dir: str, output: str, command: str | None = None) -> list[str]:
    """Write the report of ``work_dir`` to ``output`` and PNGs beside it
    (``<stem>_<plot>.png``); the PNG paths."""
    figures.import_pyplot()  # fail early, with the install hint
    data = load_run(work_dir)
    out_dir = os.path.dirname(os.path.abspath(output))
    os.makedirs(out_dir, exist_ok=True)
    stem = os.path.join(out_dir, os.path.splitext(os.path.basename(output))[0])
    images: list[tuple[str, str, str]] = []
    pngs: list[str] = []

    def add(section: str, alt: str, path: str | None, missing: str) -> None:
        if path is None:
            images.append((section, alt, "note:" + missing))
        else:
            images.append((section, alt, path))
            pngs.append(path)

    points = model_latency_series(data.log, data.default_times)
    if points and num_tasks(data.log) > 1:  # one task: its own curve says it all
        add(
            "The model",
            "estimated latency",
            figures.model_latency_figure(data, f"{stem}_model.png"),
            "",
        )
        images.append(("The model", "latency table", "html:" + model_latency_table(points)))
    for i, wl in enumerate(data.workloads):
        section = f"Workload {i}: {wl.name}"
        base = f"{stem}_{i}_{_slug(wl.name)}"
        add(section, "tuning curve", figures.curve_figure(wl, base + "_curve.png"), "")
        add(section, "distribution", figures.distribution_figure(wl, base + "_dist.png"), "")
        add(
            section,
            "predictions",
            figures.prediction_figure(wl, base + "_pred.png"),
            "No cost-model predictions logged for this workload (the model predicts once it "
            "is trained, after its warm-up; a learned model and the MeasureLog callback of "
            "'metaschedule tune' are needed).",
        )
    add(
        "The run",
        "time split",
        figures.profile_figure(data, f"{stem}_profile.png"),
        "No Profiler split (logs/profile.json or a measurement log) in this work folder.",
    )
    add(
        "The run",
        "task allocation",
        figures.allocation_figure(data, f"{stem}_alloc.png"),
        "No measurement log: the task scheduler's allocation of trials is unknown.",
    )
    command = command or f"metaschedule report {work_dir} -o {output}"
    page = render_html(data, images, command)
    tmp = output + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(page)
    os.replace(tmp, output)
    return pngs
