"""JSON save/load of graph functions (weights base64-encoded in the same document)."""

from __future__ import annotations

import base64
import json
import os
from typing import Any

import numpy as np

from .infer import infer_types
from .ir import Call, Function, TensorType, Var, make_attrs

FORMAT = "metaschedule.graph/1"


def _attr(v: Any) -> Any:
    if isinstance(v, tuple):
        return [_attr(x) for x in v]
    if isinstance(v, float) and not np.isfinite(v):
        return {"float": repr(v)}
    return v


def _unattr(v: Any) -> Any:
    if isinstance(v, list):
        return tuple(_unattr(x) for x in v)
    if isinstance(v, dict) and "float" in v:
        return float(v["float"])
    return v


def to_json(func: Function) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "name": func.name,
        "params": [
            {"name": p.name, "shape": list(p.type.shape), "dtype": p.type.dtype}
            for p in func.params
        ],
        "constants": {
            k: {
                "shape": list(v.shape),
                "dtype": str(v.dtype),
                "data": base64.b64encode(np.ascontiguousarray(v).tobytes()).decode(),
            }
            for k, v in func.constants.items()
        },
        "calls": [
            {
                "name": c.name,
                "op": c.op,
                "args": list(c.args),
                "attrs": {k: _attr(v) for k, v in c.attrs},
            }
            for c in func.calls
        ],
        "outputs": list(func.outputs),
    }


def from_json(data: dict[str, Any]) -> Function:
    if data.get("format") != FORMAT:
        raise ValueError(
            f"not a graph function document (format {data.get('format')!r}, expected {FORMAT!r})"
        )
    params = [Var(p["name"], TensorType(tuple(p["shape"]), p["dtype"])) for p in data["params"]]
    consts = {
        k: np.frombuffer(base64.b64decode(v["data"]), dtype=v["dtype"]).reshape(v["shape"]).copy()
        for k, v in data["constants"].items()
    }
    calls = [
        Call(
            c["name"],
            c["op"],
            tuple(c["args"]),
            make_attrs({k: _unattr(v) for k, v in c["attrs"].items()}),
        )
        for c in data["calls"]
    ]
    return infer_types(
        Function(params, consts, calls, list(data["outputs"]), name=data.get("name", "main"))
    )


def save_json(func: Function, path: str | os.PathLike) -> None:
    with open(path, "w") as f:
        json.dump(to_json(func), f)


def load_json(path: str | os.PathLike) -> Function:
    """The function saved in ``path`` by :func:`save_json`.

    Raises:
        ValueError: the file is not such a document (not JSON, nested too deeply, fields
            missing or of the wrong type); the message names the file.
    """
    path = os.fspath(path)
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        return from_json(data)
    except RecursionError:
        raise ValueError(f"{path}: not a graph function document (nested too deeply)") from None
    except (ValueError, TypeError, KeyError, AttributeError) as err:
        raise ValueError(
            f"{path}: not a graph function document ({type(err).__name__}: {err})"
        ) from None
