"""The tuning report: ``metaschedule report DIR -o report.html``.

``MeasureLog`` (a measure callback) records what the database does not hold: when each
batch was measured, the cost model's predictions, the Profiler split; ``load_run`` reads
a work folder (also while a run is still writing it); ``write_report`` draws the plots
(matplotlib, imported only here) and writes one self-contained HTML page.
"""

from .data import RunData, WorkloadData, describe_workload, load_run
from .html import write_report as _write
from .measure_log import MEASURE_LOG, MeasureLog, measure_log_path, read_measure_log

__all__ = [
    "MEASURE_LOG",
    "MeasureLog",
    "RunData",
    "WorkloadData",
    "describe_workload",
    "load_run",
    "measure_log_path",
    "read_measure_log",
    "write_report",
]


def write_report(work_dir: str, output: str) -> list[str]:
    """Write the HTML report of ``work_dir`` to ``output`` and its PNGs beside it; the
    paths of the PNG files."""
    return _write(work_dir, output)
