"""A corpus of measured schedules: tuning records and the CPU they were measured on.

A corpus *part* is a folder holding a JSON database (``database_workload.json``,
``database_tuning_record.json``, as a tuner's ``--work-dir`` does) and ``machine.json``:
the :class:`~metaschedule.codegen.isa.CpuIsa` the records ran on, the target, and free
notes (CPU model, date, command). A *corpus* is a part or a folder of parts; one model
trained on several parts spans their ISAs, since the features include the ISA::

    corpus/
      zen4-avx512/   machine.json  database_workload.json  database_tuning_record.json
      zen4-avx2/     ...

``benchmarks/corpus.py`` measures random schedules into a part; ``metaschedule db corpus
add`` copies the records of past tuning runs into one.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any

from ..codegen.isa import CpuIsa, isa_of
from ..database import JSONDatabase
from ..target import Target

__all__ = [
    "MACHINE_FILE",
    "CorpusPart",
    "find_parts",
    "isa_from_json",
    "isa_to_json",
    "open_part",
    "write_machine",
]

#: the file naming a part's machine
MACHINE_FILE = "machine.json"
FORMAT = "metaschedule.corpus/1"


def isa_to_json(isa: CpuIsa) -> dict[str, Any]:
    """A JSON-able dict of ``isa`` (extensions sorted)."""
    out = asdict(isa)
    out["extensions"] = sorted(isa.extensions)
    return out


def isa_from_json(obj: dict[str, Any]) -> CpuIsa:
    """The :class:`CpuIsa` that :func:`isa_to_json` wrote.

    Raises:
        ValueError: a field is missing or unknown.
    """
    names = {f.name for f in fields(CpuIsa)}
    required = {f.name for f in fields(CpuIsa) if f.default is MISSING}
    unknown, missing = set(obj) - names, required - set(obj)
    if unknown or missing:
        raise ValueError(
            f"not a CpuIsa record: unknown fields {sorted(unknown)}, missing {sorted(missing)}"
        )
    return CpuIsa(**{**obj, "extensions": frozenset(obj["extensions"])})


@dataclass
class CorpusPart:
    """One folder of a corpus: its records were measured on ``isa`` with ``target``."""

    path: str
    isa: CpuIsa
    target: Target
    notes: dict[str, Any] = field(default_factory=dict)

    def database(self) -> Any:
        """The part's JSON database (created if missing)."""
        return JSONDatabase(work_dir=self.path)

    def __repr__(self) -> str:
        return f"CorpusPart({self.path!r}, isa={self.isa.name}, target={str(self.target)!r})"


def write_machine(
    path: str, target: Target | str, isa: CpuIsa | None = None, **notes: Any
) -> CorpusPart:
    """Make ``path`` a corpus part measured with ``target`` (its ISA: ``isa``, or the
    target's record on this host), keeping the notes; returns the part."""
    target = target if isinstance(target, Target) else Target(target)
    isa = isa or isa_of(target)
    os.makedirs(path, exist_ok=True)
    payload = {"format": FORMAT, "isa": isa_to_json(isa), "target": str(target), "notes": notes}
    tmp = os.path.join(path, f".{MACHINE_FILE}.{os.getpid()}")
    with open(tmp, "w") as f:
        json.dump(payload, f, indent=1)
    os.replace(tmp, os.path.join(path, MACHINE_FILE))
    return CorpusPart(path, isa, target, notes)


def open_part(path: str) -> CorpusPart:
    """The corpus part in folder ``path``.

    Raises:
        ValueError: ``path`` has no readable ``machine.json`` of this format.
    """
    machine = os.path.join(path, MACHINE_FILE)
    try:
        with open(machine) as f:
            payload = json.load(f)
    except FileNotFoundError:
        raise ValueError(f"{path!r} is not a corpus part: it has no {MACHINE_FILE}") from None
    except (OSError, json.JSONDecodeError) as err:
        raise ValueError(f"{machine}: cannot read it: {err}") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise ValueError(f"{machine}: not a {FORMAT} file")
    try:
        isa = isa_from_json(payload["isa"])
        target = Target(payload["target"])
    except (KeyError, TypeError, ValueError) as err:
        raise ValueError(f"{machine}: {err}") from None
    return CorpusPart(path, isa, target, dict(payload.get("notes") or {}))


def find_parts(paths: Iterable[str]) -> list[CorpusPart]:
    """The parts of the corpora at ``paths``: each a part, or a folder whose
    sub-folders are parts (in name order).

    Raises:
        ValueError: a path is neither, or holds no part.
    """
    parts: list[CorpusPart] = []
    for path in paths:
        if os.path.exists(os.path.join(path, MACHINE_FILE)):
            parts.append(open_part(path))
            continue
        if not os.path.isdir(path):
            raise ValueError(f"corpus {path!r}: no such folder")
        subs = sorted(
            os.path.join(path, d)
            for d in os.listdir(path)
            if os.path.exists(os.path.join(path, d, MACHINE_FILE))
        )
        if not subs:
            raise ValueError(
                f"corpus {path!r} holds no part (a folder with {MACHINE_FILE} and a JSON "
                "database); make one with benchmarks/corpus.py or `metaschedule db corpus add`"
            )
        parts.extend(open_part(s) for s in subs)
    return parts
