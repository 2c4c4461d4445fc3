"""Structural hashes (workload identities) are the same in every process and machine:
they never depend on Python's salted ``hash()`` or on object ids."""

import json
import os
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import json
    from metaschedule import te
    from metaschedule.database import Workload
    from metaschedule.database.module_equality import ModuleEquality
    from metaschedule.testing.tuning_records import matmul, matmul_relu, tiled_matmul_schedule
    from metaschedule.tir.structural import structural_hash

    a = te.placeholder((1, 3, 7, 7), name="A")
    pad = te.compute((1, 3, 9, 9), lambda n, c, h, w: te.if_then_else(
        te.all(h >= 1, h < 8, w >= 1, w < 8), a[n, c, h - 1, w - 1], 0.0), name="pad",
        attrs={"layout": "NCHW", "z": 1, "b": 2})
    k = te.reduce_axis((0, 3), name="k")
    pool = te.compute((1, 3, 7, 7), lambda n, c, h, w: te.max(pad[n, c, h + k, w + k], axis=k),
                      name="pool")
    sch = tiled_matmul_schedule(matmul(16), 3)
    print(json.dumps([
        str(structural_hash(matmul(8))),
        str(structural_hash(matmul_relu(8))),
        str(Workload(matmul(16)).shash),
        str(structural_hash(sch.mod)),
        str(structural_hash(te.create_prim_func([a, pool]))),
        str(ModuleEquality("ignore-tensor").hash(matmul(8))),
        str(ModuleEquality("anchor-block").hash(matmul_relu(8))),
        json.dumps(sch.trace.as_json(), sort_keys=True),
    ]))
    """
)


def _hashes(seed: str) -> list:
    env = dict(os.environ, PYTHONHASHSEED=seed)
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(out.stdout)


def test_hashes_agree_across_processes_with_different_hash_seeds():
    first, second = _hashes("1"), _hashes("4242")
    assert first == second
    assert len(set(first[:5])) == 5  # and they do tell different modules apart
