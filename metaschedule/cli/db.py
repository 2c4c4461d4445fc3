"""``metaschedule db``: move records between JSON and SQLite databases, merge runs, prune.

A database is named by a path: a folder (a JSON database: ``database_workload.json`` and
``database_tuning_record.json``, as ``--work-dir`` holds) or a ``.sqlite``/``.db`` file.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
from typing import Any

from .common import (
    SQLITE_SUFFIXES,
    CLIError,
    Formatter,
    Parser,
    add_subcommand,
    open_database,
    positive_int,
)

EXAMPLES = """\
  metaschedule db merge all_runs runs/gmm runs/c2d        # several runs into one folder
  metaschedule db export runs/gmm -o gmm.sqlite           # JSON -> SQLite
  metaschedule db import gmm.sqlite --work-dir runs/gmm2  # SQLite -> JSON
  metaschedule db prune runs/gmm --top-k 5                # keep the 5 best per workload
  metaschedule db prune gmm.sqlite --top-k 1 -o best.sqlite

A database is a folder (JSON, as --work-dir holds) or a .sqlite/.db file. Identical
records (same workload, trace and run times) are copied once. Merging and pruning in
place take the database's lock, so a tuner may be writing it meanwhile.
"""


def register(sub, parents) -> None:
    p = add_subcommand(
        sub,
        "db",
        help="merge, export, import and prune databases",
        description="Move tuning records between JSON and SQLite databases, "
        "merge runs, keep the best records.",
        examples=EXAMPLES,
        parents=parents,
    )
    actions = p.add_subparsers(dest="action", metavar="ACTION", parser_class=Parser)
    actions.required = True
    extra: dict[str, Any] = {
        "epilog": "examples:\n" + EXAMPLES.rstrip(),
        "formatter_class": Formatter,
    }
    m = actions.add_parser(
        "merge",
        **extra,
        help="copy the records of several databases into one",
        parents=parents,
        description="Copy every record of each SOURCE into OUTPUT (created if missing).",
    )
    m.add_argument("output", metavar="OUTPUT", help="the database to merge into")
    m.add_argument("sources", metavar="SOURCE", nargs="+", help="databases to copy from")
    m.set_defaults(func=_merge)
    e = actions.add_parser(
        "export",
        **extra,
        help="copy a work folder's records to another database",
        parents=parents,
        description="Copy the records of SOURCE into "
        "OUTPUT (e.g. a work folder into a SQLite file).",
    )
    e.add_argument("source", metavar="SOURCE", help="the database to read")
    e.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="OUTPUT",
        help="the database to write (a .sqlite file or a folder)",
    )
    e.set_defaults(func=_export)
    i = actions.add_parser(
        "import",
        **extra,
        help="copy a database's records into a work folder",
        parents=parents,
        description="Copy the records of SOURCE into "
        "the JSON database of a work folder (so tuning resumes from them).",
    )
    i.add_argument("source", metavar="SOURCE", help="the database to read")
    i.add_argument("--work-dir", required=True, metavar="DIR", help="the work folder")
    i.set_defaults(func=_import)
    r = actions.add_parser(
        "prune",
        **extra,
        help="keep the top-k valid records per workload",
        parents=parents,
        description="Keep the K fastest valid records "
        "of each workload; failed measurements are dropped.",
    )
    r.add_argument("database", metavar="DATABASE", help="the database to prune")
    r.add_argument(
        "--top-k", type=positive_int, default=1, metavar="K", help="records to keep per workload"
    )
    r.add_argument(
        "-o",
        "--output",
        metavar="OUTPUT",
        default=None,
        help="write the pruned records here instead of replacing DATABASE",
    )
    r.set_defaults(func=_prune)


# ----------------------------------------------------------------------------- copying
def _key(record) -> tuple:
    return (
        json.dumps(record.trace.as_json(), sort_keys=True),
        None if record.run_secs is None else tuple(record.run_secs),
    )


def copy_records(sources, destination, top_k: int | None = None) -> tuple[int, int]:
    """Copy the records of ``sources`` into ``destination``; (added, skipped as
    duplicates). With ``top_k``, only the ``top_k`` fastest valid records per workload."""
    seen: dict[int, set] = {}
    for record in destination.get_all_tuning_records():
        seen.setdefault(id(destination.commit_workload(record.workload.mod)), set()).add(
            _key(record)
        )
    added = skipped = 0
    for source in sources:
        records = source.get_all_tuning_records()
        if top_k is not None:
            records = _top_k(source, records, top_k)
        for record in records:
            workload = destination.commit_workload(record.workload.mod)
            keys = seen.setdefault(id(workload), set())
            key = _key(record)
            if key in keys:
                skipped += 1
                continue
            keys.add(key)
            destination.commit_tuning_record(dataclasses.replace(record, workload=workload))
            added += 1
    return added, skipped


def _top_k(source, records, k: int) -> list:
    out, done = [], set()
    for record in records:
        if id(record.workload) in done:
            continue
        done.add(id(record.workload))
        out.extend(source.get_top_k(record.workload, k))
    return out


def _open_all(paths: list[str]):
    return [open_database(p) for p in paths]


def _close(*dbs) -> None:
    for db in dbs:
        close = getattr(db, "close", None)
        if close is not None:
            close()


def _copy(sources: list[str], output: str, verb: str) -> int:
    for s in sources:
        if os.path.abspath(s) == os.path.abspath(output):
            raise CLIError(f"{s} is both a source and the output; give another output", usage=True)
    srcs = _open_all(sources)
    dest = open_database(output, create=True)
    try:
        added, skipped = copy_records(srcs, dest)
        total = len(dest)
    finally:
        _close(dest, *srcs)
    print(
        f"{verb} {len(sources)} database(s) into {output}: {added} record(s) added, "
        f"{skipped} duplicate(s) skipped; it now holds {total} record(s)"
    )
    return 0


def _merge(args: argparse.Namespace) -> int:
    return _copy(args.sources, args.output, "Merged")


def _export(args: argparse.Namespace) -> int:
    return _copy([args.source], args.output, "Exported")


def _import(args: argparse.Namespace) -> int:
    if args.work_dir.lower().endswith(SQLITE_SUFFIXES):
        raise CLIError(
            f"--work-dir {args.work_dir}: give a folder; to copy into a SQLite "
            "file use 'metaschedule db export'",
            usage=True,
        )
    return _copy([args.source], args.work_dir, "Imported")


def _prune(args: argparse.Namespace) -> int:
    """In place, the database prunes itself under the lock its commits take (a JSON
    folder gets new files moved over the old ones, a SQLite file deletes rows in one
    transaction), so a tuner writing it meanwhile loses nothing; with ``-o``, the kept
    records are copied to OUTPUT."""
    if args.output is None:
        db = open_database(args.database)
        try:
            kept, before = db.prune(args.top_k)
        finally:
            _close(db)
        where = args.database
    else:
        if os.path.abspath(args.output) == os.path.abspath(args.database):
            raise CLIError(
                f"{args.output} is the database itself; leave out -o to prune it in place",
                usage=True,
            )
        source = open_database(args.database)
        before = len(source)
        try:
            dest = open_database(args.output, create=True)
            try:
                kept, _ = copy_records([source], dest, top_k=args.top_k)
            finally:
                _close(dest)
        finally:
            _close(source)
        where = args.output
    print(
        f"Pruned {args.database}: kept {kept} of {before} record(s) (top {args.top_k} per "
        f"workload) in {where}"
    )
    return 0
