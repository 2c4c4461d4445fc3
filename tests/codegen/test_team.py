"""A parallel region's threads (codegen/c_team.py): all the cores, but one for small work
when the host's OpenMP threads sleep between regions (and then a guided schedule)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from metaschedule import te
from metaschedule.codegen import codegen_c
from metaschedule.codegen.c_team import PASSIVE_SERIAL_NS, TEAM_C, work_ns
from metaschedule.schedule import Schedule
from metaschedule.target import Target
from metaschedule.te import ops
from metaschedule.tir.transform import lower

TARGET = Target("llvm -mcpu=haswell -num-cores=2")


def _parallel_matmul(n: int):
    a = te.placeholder((n, n), "float32", "A")
    b = te.placeholder((n, n), "float32", "B")
    sch = Schedule(te.create_prim_func([a, b, ops.matmul(a, b)]))
    i, _, _ = sch.get_loops(sch.get_block("T_matmul_NN"))
    sch.parallel(i)
    return sch.mod["main"]


def test_the_estimate_grows_with_the_work_and_is_written_into_the_clause():
    small, big = lower(_parallel_matmul(16)), lower(_parallel_matmul(256))
    assert work_ns(small) < PASSIVE_SERIAL_NS <= work_ns(big)
    for func in (small, big):
        src = codegen_c(func, TARGET).code
        (clause,) = re.findall(r"num_threads\(ms_team\((\d+), (\d+)\)\)", src)
        assert clause == (str(work_ns(func)), "2")


STATIC, GUIDED = 1, 3  # omp_sched_t


@pytest.mark.compiler
@pytest.mark.parametrize(
    "env, small, big, schedule",
    [
        ({}, 2, 2, STATIC),  # libgomp's default: threads spin, a region wakes them at once
        ({"OMP_WAIT_POLICY": "passive"}, 1, 2, GUIDED),
        ({"OMP_WAIT_POLICY": "PASSIVE"}, 1, 2, GUIDED),
        ({"GOMP_SPINCOUNT": "0"}, 1, 2, GUIDED),
        ({"OMP_WAIT_POLICY": "active"}, 2, 2, STATIC),
    ],
)
def test_small_work_runs_on_one_thread_only_when_threads_sleep(tmp_path, env, small, big, schedule):
    """And a bigger loop hands out its iterations in shrinking chunks then (the woken thread
    starts late), statically otherwise."""
    source = tmp_path / "team.c"
    source.write_text(
        "#include <stdint.h>\n#include <stdlib.h>\n"
        + TEAM_C
        + "int team(int64_t work_ns, int cores) { return ms_team(work_ns, cores); }\n"
        + "int sched(void) { omp_sched_t k; int c; omp_get_schedule(&k, &c); return k; }\n"
    )
    lib = tmp_path / "team.so"
    cc = ["cc", "-O2", "-fopenmp", "-shared", "-fPIC", str(source), "-o", str(lib)]
    subprocess.run(cc, check=True)
    probe = (
        "import ctypes, sys; lib = ctypes.CDLL(sys.argv[1]); t = lib.team; "
        f"print(t({PASSIVE_SERIAL_NS // 2}, 2), t({PASSIVE_SERIAL_NS * 2}, 2), lib.sched())"
    )
    clean = {"PATH": "/usr/bin:/bin", **env}
    out = subprocess.run(
        [sys.executable, "-c", probe, str(lib)], env=clean, capture_output=True, text=True
    )
    assert out.stdout.split() == [str(small), str(big), str(schedule)], out.stderr
