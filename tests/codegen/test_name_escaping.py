"""Names reach generated C only as sanitized identifiers or escaped comment text.

Random names (newlines, comment ends, backslashes, quotes, ``#``, trigraphs, unicode) go
through ``te``, a JSON database round trip, ``compile_tir``, ``ms.build`` and a call: the
results match numpy, and the C source has exactly the lines of the same kernel with plain
names. The probe of issue 33 (a buffer named ``"C\\n...system(...);\\n//"``) is kept as a
regression test.
"""

from __future__ import annotations

import functools
import os
import re
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import metaschedule as ms
from metaschedule import te
from metaschedule.arg_info import ArgInfo
from metaschedule.codegen.c_helpers import c_comment_text
from metaschedule.database import JSONDatabase, TuningRecord
from metaschedule.schedule import Schedule
from metaschedule.target import Target
from metaschedule.tir_integration import compile_tir

pytestmark = pytest.mark.usefixtures("session_kernel_cache")

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_PIECES = [
    "\n",
    "\r\n",
    "\t",
    "\x00",
    "\x7f",
    "*/",
    "/*",
    "//",
    "\\",
    '"',
    "'",
    "#",
    "#include <x>",
    "??/",
    "??=",
    "é",
    "\u202e",  # a bidirectional override (trojan source)
    "\U0001f600",
    "a",
    "Z",
    "_",
    "1",
    " ",
    ";",
    "{",
    "}",
    "(",
]
_NAMES = st.lists(st.sampled_from(_PIECES), min_size=1, max_size=6).map("".join)


def matmul_named(a_name: str, b_name: str, c_name: str, k_name: str):
    a = te.placeholder((8, 8), "float32", name=a_name)
    b = te.placeholder((8, 8), "float32", name=b_name)
    k = te.reduce_axis((0, 8), name=k_name)
    c = te.compute((8, 8), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name=c_name)
    return te.create_prim_func([a, b, c])


def tiled(func, block: str) -> Schedule:
    """A split of the block's first loop: the reduction is kept in an accumulator, whose
    comment names the buffer and the loops."""
    sch = Schedule(func)
    loop = sch.get_loops(sch.get_block(block))[0]
    sch.split(loop, [2, 4])
    return sch


@functools.lru_cache(maxsize=1)
def plain_source() -> str:
    return ms.build(tiled(matmul_named("A", "B", "C", "k"), "C").mod, "llvm").get_source()


def directives(src: str) -> list[str]:
    return [line for line in src.splitlines() if line.lstrip().startswith("#")]


def check_source(src: str) -> None:
    """Nothing a name could have opened: the same lines as with plain names, the same
    preprocessor lines, printable ASCII, no trigraph, no line splice, no comment end."""
    plain = plain_source()
    assert len(src.splitlines()) == len(plain.splitlines())
    assert directives(src) == directives(plain)
    assert src.isascii() and not _CONTROL.search(src.replace("\n", ""))
    assert "??" not in src
    for line in src.splitlines():
        assert not line.endswith("\\")
        code, _, comment = line.partition("//")
        assert "*/" not in comment
        assert "system(" not in code


def run_and_check(lib) -> None:
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((8, 8)).astype("float32") for _ in range(2))
    c = np.zeros((8, 8), "float32")
    lib(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "text",
    ["C", "T_matmul_NN_local", "i0, i1_fused", "access to A is not affine (i * 4 + j)", "a/b*c"],
)
def test_plain_text_is_unchanged(text):
    assert c_comment_text(text) == text


@given(st.text())
def test_escaped_text_is_safe_in_comments_and_string_literals(text):
    out = c_comment_text(text)
    assert out.isascii() and out.isprintable()
    assert not any(s in out for s in ("\\", '"', "??", "*/"))
    if "<U+" not in text:  # the escapes spell the code points: nothing is lost
        assert re.sub(r"<U\+([0-9A-F]{4,6})>", lambda m: chr(int(m[1], 16)), out) == text


@pytest.mark.compiler
@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(a_name=_NAMES, b_name=_NAMES, c_name=_NAMES, k_name=_NAMES)
def test_random_names_through_a_database_compile_and_run(
    tmp_path_factory, a_name, b_name, c_name, k_name
):
    func = matmul_named(a_name, b_name, c_name, k_name)
    work_dir = str(tmp_path_factory.mktemp("db"))
    db = JSONDatabase(work_dir=work_dir)
    workload = db.commit_workload(func)
    trace = tiled(func, c_name).trace
    args_info = ArgInfo.from_prim_func(func)
    db.commit_tuning_record(TuningRecord(trace, workload, [1e-3], Target("llvm"), args_info))
    db.close()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        db = JSONDatabase(work_dir=work_dir)
    if any(_CONTROL.search(n) for n in (a_name, b_name, c_name, k_name)):
        # the stored workload is refused; the caller's own module still compiles safely
        assert any("control character" in str(w.message) for w in caught)
        with pytest.raises(ValueError, match="no valid tuning record"):
            compile_tir(db, func, "llvm")
        mod = tiled(func, c_name).mod
    else:
        assert not caught, [str(w.message) for w in caught]
        mod = compile_tir(db, func, "llvm").mod
    db.close()
    lib = ms.build(mod, "llvm")
    check_source(lib.get_source())
    run_and_check(lib)


@pytest.mark.compiler
def test_issue_33_probe_compiled_from_python_runs_no_code(tmp_path):
    """The probe's name in a module built in Python (no database involved): it stays
    inside its comment."""
    marker = tmp_path / "PWNED"
    evil = f'C\nint ms_evil = system("touch {marker}");\n//'
    func = matmul_named("A", "B", evil, "k")
    lib = ms.build(tiled(func, evil).mod, "llvm")
    check_source(lib.get_source())
    run_and_check(lib)
    assert not os.path.exists(marker)
