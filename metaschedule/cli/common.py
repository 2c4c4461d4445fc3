"""What the subcommands share: the error type, parser helpers, loading workloads and
opening databases."""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from dataclasses import dataclass
from typing import Any

from .. import te
from ..database import JSONDatabase, SQLiteDatabase
from ..database.json_database import TUNING_RECORD_FILE, WORKLOAD_FILE
from ..tir.function import IRModule, PrimFunc
from ..workloads import get_workload

__all__ = [
    "CLIError",
    "Formatter",
    "LoadedWorkload",
    "add_subcommand",
    "is_model_file",
    "load_workload",
    "open_database",
    "positive_int",
]


class CLIError(Exception):
    """A user-facing error: printed as one line, exit code 1 (2 with ``usage=True``)."""

    def __init__(self, message: str, *, usage: bool = False) -> None:
        super().__init__(message)
        self.usage = usage


class Formatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the examples' line breaks; shows the defaults that say something."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if (
            "default" not in text
            and action.default not in (None, False, argparse.SUPPRESS)
            and action.option_strings
        ):
            text += " (default: %(default)s)"
        return text


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose usage errors are one line (exit code 2)."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def add_subcommand(
    sub,
    name: str,
    *,
    help: str,
    description: str,
    examples: str,
    parents: list[argparse.ArgumentParser],
) -> argparse.ArgumentParser:
    """A subparser with a description and an "examples:" epilog."""
    return sub.add_parser(
        name,
        help=help,
        description=description,
        epilog="examples:\n" + examples.rstrip(),
        formatter_class=Formatter,
        parents=parents,
    )


def _int_at_least(text: str, low: int, expected: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None
    if value < low:
        raise argparse.ArgumentTypeError(f"expected {expected}, got {value}")
    return value


def positive_int(text: str) -> int:
    """An argparse type: an integer >= 1."""
    return _int_at_least(text, 1, "a positive integer")


def non_negative_int(text: str) -> int:
    """An argparse type: an integer >= 0."""
    return _int_at_least(text, 0, "an integer >= 0")


# ----------------------------------------------------------------------------- workloads
MODEL_SUFFIXES = (".onnx",)


def is_model_file(spec: str) -> bool:
    """Whether ``spec`` names a whole model (an ONNX file)."""
    return spec.lower().endswith(MODEL_SUFFIXES)


@dataclass
class LoadedWorkload:
    """A workload from the command line: its name, the PrimFunc, and the suite entry
    (None for a file workload)."""

    name: str
    func: Any
    suite: Any = None


def load_workload(spec: str) -> LoadedWorkload:
    """A suite name (``gmm``, ``gmm:64``, ...) or ``file.py[:name]``."""
    path, _, attr = spec.partition(".py:") if ".py:" in spec else (spec, "", "")
    if ".py:" in spec:
        path += ".py"
    if path.endswith(".py"):
        return LoadedWorkload(
            attr or os.path.splitext(os.path.basename(path))[0], _load_file(path, attr or None)
        )
    try:
        wl = get_workload(spec)
    except ValueError as err:
        raise CLIError(
            f"{err}; or give file.py:name (a PrimFunc or te function) or an .onnx model"
        ) from None
    return LoadedWorkload(wl.name, wl.func(), wl)


def _load_file(path: str, attr: str | None):
    if not os.path.isfile(path):
        raise CLIError(
            f"{path}: no such file; give file.py:name, where the file defines "
            "a PrimFunc or a function returning one (or te tensors)"
        )
    spec = importlib.util.spec_from_file_location("_metaschedule_workload", path)
    if spec is None or spec.loader is None:
        raise CLIError(f"{path}: cannot be loaded as a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    try:
        spec.loader.exec_module(module)
    except Exception as err:
        raise CLIError(f"{path}: running the file failed: {type(err).__name__}: {err}") from err
    finally:
        sys.path.pop(0)
    if attr is None:
        found = [
            n
            for n, v in vars(module).items()
            if isinstance(v, (PrimFunc, IRModule)) and not n.startswith("_")
        ]
        if len(found) != 1:
            raise CLIError(
                f"{path}: say which workload to tune as {path}:NAME (the file "
                f"defines {len(found)} PrimFunc(s): {', '.join(found) or 'none'})"
            )
        attr = found[0]
    if not hasattr(module, attr):
        names = [n for n in vars(module) if not n.startswith("_")]
        raise CLIError(f"{path}: no name {attr!r}; it defines: {', '.join(names)}")
    value = getattr(module, attr)
    if callable(value) and not isinstance(value, (PrimFunc, IRModule)):
        try:
            value = value()
        except Exception as err:
            raise CLIError(
                f"{path}:{attr}: calling it failed: {type(err).__name__}: {err} "
                "(it must take no arguments)"
            ) from err
    return _as_func(value, f"{path}:{attr}")


def _as_func(value, where: str):
    if isinstance(value, PrimFunc):
        return value
    if isinstance(value, IRModule):
        if len(value) != 1:
            raise CLIError(f"{where}: the IRModule has {len(value)} functions; give one PrimFunc")
        return value[next(iter(value))]
    if isinstance(value, (list, tuple)) and value and all(isinstance(t, te.Tensor) for t in value):
        return te.create_prim_func(list(value))
    raise CLIError(
        f"{where} is a {type(value).__name__}; expected a PrimFunc, an IRModule "
        "of one function, te tensors [inputs..., output], or a function "
        "returning one of those"
    )


# ----------------------------------------------------------------------------- databases
SQLITE_SUFFIXES = (".sqlite", ".sqlite3", ".db")


def open_database(spec: str, *, create: bool = False):
    """A database from a path: a ``.sqlite``/``.db`` file, or a folder holding
    ``database_workload.json`` and ``database_tuning_record.json``."""
    if spec.lower().endswith(SQLITE_SUFFIXES):
        if not create and not os.path.isfile(spec):
            raise CLIError(f"{spec}: no such SQLite database")
        return SQLiteDatabase(spec)
    if os.path.isfile(spec):
        raise CLIError(
            f"{spec} is a file; give a work folder (holding {WORKLOAD_FILE}) or a "
            f"{'/'.join(SQLITE_SUFFIXES)} file"
        )
    if not create and not os.path.isfile(os.path.join(spec, WORKLOAD_FILE)):
        what = "no such folder" if not os.path.isdir(spec) else f"no {WORKLOAD_FILE} in it"
        raise CLIError(
            f"{spec}: {what}; give the --work-dir of a tuning run or a SQLite database file"
        )
    return JSONDatabase(os.path.join(spec, WORKLOAD_FILE), os.path.join(spec, TUNING_RECORD_FILE))
