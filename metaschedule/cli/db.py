"""``metaschedule db``: move records between JSON and SQLite databases, merge runs, prune;
``db corpus add`` copies tuning runs into the corpus the cost model is pre-trained on.

A database is named by a path: a folder (a JSON database: ``database_workload.json`` and
``database_tuning_record.json``, as ``--work-dir`` holds) or a ``.sqlite``/``.db`` file.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import hashlib
import json
import os
from typing import Any

from ..codegen.isa import isa_of
from ..cost_model.corpus import MACHINE_FILE, CorpusPart, open_part, write_machine
from ..cost_model.pretrained import NAMES_FILE, part_workload_names
from ..database.base import latest_per_schedule
from ..report.measure_log import measure_log_path, read_measure_log
from ..target import host_cpu_info
from .common import (
    SQLITE_SUFFIXES,
    CLIError,
    Formatter,
    Parser,
    add_subcommand,
    open_database,
    positive_int,
)
from .corpus import default_corpus

EXAMPLES = """\
  metaschedule db merge all_runs runs/gmm runs/c2d        # several runs into one folder
  metaschedule db export runs/gmm -o gmm.sqlite           # JSON -> SQLite
  metaschedule db import gmm.sqlite --work-dir runs/gmm2  # SQLite -> JSON
  metaschedule db prune runs/gmm --top-k 5                # keep the 5 best per workload
  metaschedule db prune gmm.sqlite --top-k 1 -o best.sqlite
  metaschedule db corpus add runs/gmm runs/c2d    # into the pre-trained model's corpus

A database is a folder (JSON, as --work-dir holds) or a .sqlite/.db file. Identical
records (same workload, trace and run times) are copied once. Merging and pruning in
place take the database's lock, so a tuner may be writing it meanwhile.
"""

CORPUS_ADD_DESCRIPTION = """\
Copy the measured records of each DIR into the corpus that `metaschedule corpus train`
pre-trains the cost model on: one part per target, CORPUS/<ISA>-<hash of the target>,
whose machine.json records the target's ISA on this host. The runs are taken to have
been measured on this machine: add them on the machine that measured them.

Failed measurements are copied too (they teach the model what fails); of a schedule
measured more than once, its latest valid measurement; records without a target or a run
time are skipped. A record the part holds already is not copied again: adding a run
twice adds nothing. Workload names come from the runs' measurement logs (for
`metaschedule corpus train --holdout`)."""

CORPUS_EXAMPLES = """\
  metaschedule db corpus add runs/gmm runs/c2d          # into the default corpus
  metaschedule db corpus add runs/*/ --corpus corpus     # every run, into ./corpus
  metaschedule corpus train                              # then pre-train the cost model
"""


def register(sub, parents) -> None:
    p = add_subcommand(
        sub,
        "db",
        help="merge, export, import and prune databases; add runs to the corpus",
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
    c = actions.add_parser(
        "corpus",
        epilog="examples:\n" + CORPUS_EXAMPLES.rstrip(),
        formatter_class=Formatter,
        help="add tuning runs to the cost model's training corpus",
        parents=parents,
        description="Build the corpus that `metaschedule corpus train` trains the "
        "pre-trained cost model on.",
    )
    corpus_actions = c.add_subparsers(dest="corpus_action", metavar="ACTION", parser_class=Parser)
    corpus_actions.required = True
    a = corpus_actions.add_parser(
        "add",
        epilog="examples:\n" + CORPUS_EXAMPLES.rstrip(),
        formatter_class=Formatter,
        help="copy the measured records of tuning runs into corpus parts",
        parents=parents,
        description=CORPUS_ADD_DESCRIPTION,
    )
    a.add_argument(
        "sources",
        metavar="DIR",
        nargs="+",
        help="the --work-dir of a past tuning run (a JSON database), or a .sqlite/.db file",
    )
    a.add_argument(
        "--corpus",
        metavar="PATH",
        default=None,
        help="the corpus folder (default: $METASCHEDULE_CORPUS, else "
        "~/.cache/metaschedule/corpus, under $XDG_CACHE_HOME when set)",
    )
    a.set_defaults(func=_corpus_add)


# ----------------------------------------------------------------------------- copying
def _key(record) -> tuple:
    return (
        json.dumps(record.trace.as_json(), sort_keys=True),
        None if record.run_secs is None else tuple(record.run_secs),
    )


def copy_records(sources, destination, top_k: int | None = None) -> tuple[int, int]:
    """Copy the records of ``sources`` into ``destination``; (added, skipped as
    duplicates). With ``top_k``, only the ``top_k`` fastest valid records per workload."""
    seen = _known(destination)
    added = skipped = 0
    for source in sources:
        records = source.get_all_tuning_records()
        if top_k is not None:
            records = _top_k(source, records, top_k)
        a, s = commit_new(destination, records, seen)
        added, skipped = added + a, skipped + s
    return added, skipped


def _known(destination) -> dict[int, set]:
    """The keys of the records ``destination`` holds, per workload (by identity)."""
    seen: dict[int, set] = {}
    for record in destination.get_all_tuning_records():
        seen.setdefault(id(destination.commit_workload(record.workload.mod)), set()).add(
            _key(record)
        )
    return seen


def commit_new(destination, records, seen: dict[int, set] | None = None) -> tuple[int, int]:
    """Commit to ``destination`` those of ``records`` it does not hold yet (same
    workload, trace and run times); (added, skipped as duplicates). ``seen`` (what
    :func:`_known` returns, updated here) saves reading the destination again."""
    seen = _known(destination) if seen is None else seen
    added = skipped = 0
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


# ----------------------------------------------------------------------------- corpus
@dataclasses.dataclass
class _Group:
    """The records of one target, bound for one corpus part."""

    target: Any
    records: list = dataclasses.field(default_factory=list)
    names: dict[int, str] = dataclasses.field(default_factory=dict)  # id(workload) -> name


def _read_runs(paths: list[str], corpus: str) -> tuple[dict[str, _Group], dict[str, int]]:
    """The records of the runs at ``paths`` worth copying, grouped by target; and the
    counts of those skipped."""
    inside = os.path.abspath(corpus) + os.sep
    groups: dict[str, _Group] = {}
    skipped = {"no target": 0, "no run time": 0}
    for path in paths:
        if (os.path.abspath(path) + os.sep).startswith(inside):
            raise CLIError(
                f"{path} is in the corpus {corpus} itself; give a tuning run", usage=True
            )
        db = open_database(path)
        try:
            records = latest_per_schedule(db.get_all_tuning_records())
        finally:
            _close(db)
        names = _run_names(path)
        for record in records:
            if record.target is None:
                skipped["no target"] += 1
            elif not record.run_secs:
                skipped["no run time"] += 1
            else:
                group = groups.setdefault(str(record.target), _Group(record.target))
                group.records.append(record)
                name = names.get(str(record.workload.shash))
                if name is not None:
                    group.names[id(record.workload)] = name
    return groups, skipped


def _run_names(path: str) -> dict[str, str]:
    """Structural hash -> workload name, of a run's measurement log (task names) or of a
    corpus part's workload_names.json."""
    names = {
        str(line["shash"]): str(line["task"])
        for line in read_measure_log(measure_log_path(path))
        if line.get("shash") is not None and line.get("task") not in (None, "main")
    }
    try:
        with open(os.path.join(path, NAMES_FILE)) as f:
            named = json.load(f)
    except (OSError, ValueError):  # none there (a tuning run), or not readable
        named = {}
    if isinstance(named, dict):
        names.update({str(k): str(v) for k, v in named.items()})
    return names


def _part_for(corpus: str, target) -> CorpusPart:
    """The part of ``corpus`` for ``target`` (made if missing).

    Raises:
        ValueError: ``target`` is not a CPU target (no ISA record).
    """
    isa = isa_of(target)
    short = hashlib.sha1(str(target).encode()).hexdigest()[:8]
    path = os.path.join(corpus, f"{isa.name}-{short}")
    if os.path.exists(os.path.join(path, MACHINE_FILE)):
        try:
            return open_part(path)
        except ValueError as err:
            raise CLIError(f"{err}; move the folder away to have it made again") from None
    cpu = host_cpu_info().cpu_name
    return write_machine(
        path, target, isa, added_by="metaschedule db corpus add", host_cpu=cpu, date=_today()
    )


def _today() -> str:
    return datetime.date.today().isoformat()


def _add_names(part: CorpusPart, db, group: _Group) -> None:
    """Name the part's workloads in its workload_names.json (names it has are kept)."""
    if not group.names:
        return
    path = os.path.join(part.path, NAMES_FILE)
    names = part_workload_names(part)
    for record in group.records:
        name = group.names.get(id(record.workload))
        if name is not None:
            names.setdefault(str(db.commit_workload(record.workload.mod).shash), name)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(names, f, indent=1)
    os.replace(tmp, path)


def _corpus_add(args: argparse.Namespace) -> int:
    corpus = args.corpus or default_corpus()
    if os.path.isfile(corpus):
        raise CLIError(f"--corpus {corpus} is a file; give a folder", usage=True)
    groups, skipped = _read_runs(args.sources, corpus)
    total = 0
    for key, group in groups.items():
        try:
            part = _part_for(corpus, group.target)
        except ValueError as err:
            print(f"Skipped {len(group.records)} record(s) of target {key}: {err}")
            continue
        db = part.database()
        try:
            added, duplicates = commit_new(db, group.records)
            _add_names(part, db, group)
            held, workloads = len(db), len({id(r.workload) for r in db.get_all_tuning_records()})
        finally:
            _close(db)
        failed = sum(not r.is_valid for r in group.records)
        total += added
        print(
            f"{part.path}: read {len(group.records)} record(s) ({failed} failed "
            f"measurement(s)), added {added}, {duplicates} there already; it holds {held} "
            f"record(s) of {workloads} workload(s)\n  {part.isa.name} ({part.isa.cpu}): {key}"
        )
    notes = [f"{n} with {what}" for what, n in skipped.items() if n]
    print(
        f"Added {total} record(s) from {len(args.sources)} run(s) to the corpus {corpus}"
        + (f"; skipped {', '.join(notes)}" if notes else "")
        + ("" if total else " (nothing new)")
    )
    return 0
