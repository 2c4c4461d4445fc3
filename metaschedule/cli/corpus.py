"""``metaschedule corpus``: train the pre-trained cost model on a corpus, list a corpus.

A corpus is a folder of parts, each a JSON database of measured schedules and the
``machine.json`` of the CPU they ran on (:mod:`metaschedule.cost_model.corpus`).
``benchmarks/corpus.py`` measures random schedules into a part; ``metaschedule db corpus
add`` copies the records of past tuning runs into parts (``db.py``). The default corpus
is ``$METASCHEDULE_CORPUS``, else ``~/.cache/metaschedule/corpus`` (under
``$XDG_CACHE_HOME`` when set), beside the model ``corpus train`` writes.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from ..cost_model.corpus import CorpusPart, find_parts
from ..cost_model.pretrained import part_workload_names, train_pretrained, user_path
from ..database.json_database import WORKLOAD_FILE
from .common import CLIError, Formatter, Parser, add_subcommand, positive_int

__all__ = ["default_corpus", "open_corpus"]

EXAMPLES = """\
  metaschedule db corpus add runs/gmm runs/c2d   # past runs' records into the corpus
  metaschedule corpus show                       # its parts: ISA, target, workloads, records
  metaschedule corpus train                      # XGBModel(pretrained=True) then starts from it
  metaschedule corpus train corpus/ --holdout matmul-256 -o model.tar --max-rounds 200

The default corpus is $METASCHEDULE_CORPUS, else ~/.cache/metaschedule/corpus (under
$XDG_CACHE_HOME when set). Measure random schedules into a part with benchmarks/corpus.py.
"""

TRAIN_DESCRIPTION = """\
Train the pre-trained XGBoost cost model on every record of the corpus (features of the
schedule, the workload and the part's CPU) and write it to OUT, by default
{out},
where XGBModel(pretrained=True), the default of tuning, finds it.

Held-out workloads are left out of the training and scored: the Spearman rank
correlation of the model's scores with their measured throughput says how well it ranks
a workload it has not seen."""

#: what to do about an empty corpus
HINT = (
    "measure random schedules into a part with benchmarks/corpus.py, or copy the records "
    "of past tuning runs with `metaschedule db corpus add DIR...`"
)


def default_corpus() -> str:
    """``$METASCHEDULE_CORPUS``, else the folder ``corpus`` beside :func:`user_path`
    (``~/.cache/metaschedule/corpus``, under ``$XDG_CACHE_HOME`` when set)."""
    env = os.environ.get("METASCHEDULE_CORPUS")
    if env:
        return env
    return os.path.join(os.path.dirname(user_path()), "corpus")


def open_corpus(paths: list[str]) -> list[CorpusPart]:
    """The parts of the corpora at ``paths`` (default: :func:`default_corpus`).

    Raises:
        CLIError: a path is not a corpus, or a part's machine.json does not read.
    """
    paths = paths or [default_corpus()]
    try:
        return find_parts(paths)
    except ValueError as err:
        message = str(err)
        hint = "" if "corpus add" in message else f"; {HINT}"
        raise CLIError(f"{message}{hint}") from None


def register(sub, parents) -> None:
    p = add_subcommand(
        sub,
        "corpus",
        help="train the pre-trained cost model on a corpus of measured schedules",
        description="Train the XGBoost cost model that tuning starts from "
        "(XGBModel(pretrained=True))\non a corpus of measured schedules, or list a corpus.",
        examples=EXAMPLES,
        parents=parents,
    )
    actions = p.add_subparsers(dest="action", metavar="ACTION", parser_class=Parser)
    actions.required = True
    extra: dict[str, Any] = {
        "epilog": "examples:\n" + EXAMPLES.rstrip(),
        "formatter_class": Formatter,
        "parents": parents,
    }
    corpus_help = "corpus folders: parts, or folders of parts (default: the default corpus)"
    t = actions.add_parser(
        "train",
        **extra,
        help="train the pre-trained cost model",
        description=TRAIN_DESCRIPTION.format(out=user_path()),
    )
    t.add_argument("corpus", metavar="CORPUS", nargs="*", help=corpus_help)
    t.add_argument(
        "-o",
        "--output",
        metavar="OUT",
        default=None,
        help=f"the model file to write (default: {user_path()})",
    )
    t.add_argument(
        "--holdout",
        metavar="NAME,...",
        type=_names,
        default=None,
        help="workloads to leave out and score, by the names of the parts' "
        "workload_names.json (or structural hashes)",
    )
    t.add_argument(
        "--max-rounds", type=positive_int, default=400, metavar="N", help="boosting rounds at most"
    )
    t.add_argument(
        "--max-depth", type=positive_int, default=8, metavar="N", help="depth of each tree"
    )
    t.set_defaults(func=_train)
    s = actions.add_parser(
        "show",
        **extra,
        help="list the parts of a corpus",
        description="One line per part of the corpus: its folder, ISA, workloads,\n"
        "records (failed measurements among them) and target.",
    )
    s.add_argument("corpus", metavar="CORPUS", nargs="*", help=corpus_help)
    s.set_defaults(func=_show)


def _names(text: str) -> list[str]:
    return [name.strip() for name in text.split(",") if name.strip()]


# ----------------------------------------------------------------------------- train
def _check_holdout(parts: list[CorpusPart], holdout: list[str]) -> None:
    """Every held-out name names a workload of some part (by name, else by hash)."""
    names: set[str] = set()
    for part in parts:
        names.update(part_workload_names(part).values())
    unknown = [h for h in holdout if h not in names]
    if unknown:  # perhaps structural hashes: look at the records
        hashes = {str(shash) for part in parts for shash in _workload_counts(part)}
        unknown = [h for h in unknown if h not in hashes]
    if unknown:
        listed = ", ".join(sorted(names)[:20]) or "none (no workload_names.json)"
        raise CLIError(
            f"--holdout: no workload named {', '.join(unknown)} in the corpus; its names: {listed}",
            usage=True,
        )


def _train(args: argparse.Namespace) -> int:
    parts = open_corpus(args.corpus)
    holdout = args.holdout or []
    _check_holdout(parts, holdout)
    output = args.output or user_path()
    print(f"Training on {len(parts)} corpus part(s) ...", file=sys.stderr, flush=True)
    try:
        summary = train_pretrained(
            [p.path for p in parts],
            output,
            holdout,
            max_depth=args.max_depth,
            max_rounds=args.max_rounds,
            progress=lambda line: print(f"  {line}", file=sys.stderr, flush=True),
        )
    except ValueError as err:
        raise CLIError(f"{err}; {HINT}") from None
    skipped = ""
    if summary.get("skipped"):
        skipped = f", {summary['skipped']} record(s) that no longer replay skipped"
    print(
        f"Trained on {summary['samples']} sample(s) of {len(parts)} part(s) "
        f"({summary['held_out_samples']} held out{skipped}): {summary['rounds']} boosting "
        f"rounds in {summary['seconds']} s"
    )
    print(f"Wrote {summary['path']} ({_size(summary['bytes'])})")
    scored, prior = summary["held_out_spearman"], summary.get("held_out_prior_spearman", {})
    for name, rho in sorted(scored.items()):
        alone = f" (the analytic prior alone: {prior[name]:.3f})" if name in prior else ""
        print(f"  held out {name}: Spearman {rho:.3f}{alone}")
    for name in holdout:
        if not any(key.startswith(f"{name}@") for key in scored):
            print(f"  held out {name}: not scored (fewer than 3 records that ran)")
    print(_how_to_use(os.path.abspath(summary["path"])))
    return 0


def _how_to_use(path: str) -> str:
    if path == os.path.abspath(user_path()):
        return "XGBModel(pretrained=True), the default of tuning, now starts from it"
    return f"Use it with XGBModel(pretrained={path!r})"


def _size(n: int) -> str:
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n / 2**10:.0f} KiB"


# ----------------------------------------------------------------------------- show
def _workload_counts(part: CorpusPart) -> dict[int, list[int]]:
    """Structural hash -> [records, failed records] of a part (nothing for a part
    without a database yet: it is not created here)."""
    if not os.path.isfile(os.path.join(part.path, WORKLOAD_FILE)):
        return {}
    db = part.database()
    try:
        records = db.get_all_tuning_records()
    finally:
        db.close()
    counts: dict[int, list[int]] = {}
    for record in records:
        count = counts.setdefault(record.workload.shash, [0, 0])
        count[0] += 1
        count[1] += not record.is_valid
    return counts


def _show(args: argparse.Namespace) -> int:
    parts = open_corpus(args.corpus)
    rows = [("PART", "ISA", "WORKLOADS", "RECORDS", "FAILED", "TARGET")]
    totals = [0, 0, 0]
    for part in parts:
        counts = _workload_counts(part)
        numbers = (
            len(counts),
            sum(c[0] for c in counts.values()),
            sum(c[1] for c in counts.values()),
        )
        totals = [t + n for t, n in zip(totals, numbers)]
        isa = f"{part.isa.name} ({part.isa.cpu})"
        rows.append((part.path, isa, *map(str, numbers), str(part.target)))
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    for row in rows:
        cells = [row[0].ljust(widths[0]), row[1].ljust(widths[1])]
        cells += [c.rjust(w) for c, w in zip(row[2:5], widths[2:])]
        print("  ".join([*cells, row[5]]))
    print(
        f"{len(parts)} part(s): {totals[0]} workload(s), {totals[1]} record(s), {totals[2]} failed"
    )
    return 0
