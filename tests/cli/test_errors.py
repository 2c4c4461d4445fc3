"""Usage and errors at the command line: one line, conventional exit codes, help texts."""

from __future__ import annotations

import argparse

import pytest

from metaschedule import __version__
from metaschedule.cli import build_parser, main
from metaschedule.cli.common import non_negative_int, positive_int

SUBCOMMANDS = ["tune", "show", "report", "compile", "bench", "db", "demo"]


def _one_line_error(capsys, prefix: str) -> str:
    err = capsys.readouterr().err.strip()
    assert "\n" not in err, err
    assert err.startswith(prefix), err
    assert "Traceback" not in err
    return err


@pytest.mark.parametrize("command", SUBCOMMANDS)
def test_help_shows_an_example(command, capsys):
    assert main([command, "--help"]) == 0
    out = capsys.readouterr().out
    assert "examples:" in out and f"metaschedule {command}" in out


def test_every_option_has_help():
    parser = build_parser()
    seen = 0
    stack = [parser]
    while stack:
        p = stack.pop()
        for action in p._actions:
            if action.option_strings and action.dest != "help":
                assert action.help, f"{p.prog} {action.option_strings} has no help"
                seen += 1
            if action.choices and isinstance(action.choices, dict):
                stack.extend(action.choices.values())
    assert seen > 30


def test_version(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"metaschedule {__version__}"


def test_description_is_not_the_placeholder(capsys):
    main(["--help"])
    out = capsys.readouterr().out
    assert "The ``metaschedule`` command." not in out
    assert "tune" in out and "report" in out


@pytest.mark.parametrize(
    "argv, prefix",
    [
        ([], "metaschedule: error: the following arguments are required: COMMAND"),
        (["demo", "--repeat", "0"], "metaschedule demo: error: argument --repeat"),
        (["tune", "gmm"], "metaschedule tune: error: the following arguments are required"),
        (["tune", "gmm", "--work-dir", "x", "--trials", "many"], "metaschedule tune: error: "),
        (["tune", "gmm", "--work-dir", "x", "--strategy", "magic"], "metaschedule tune: error: "),
        (["db", "frobnicate"], "metaschedule db: error: argument ACTION"),
        (["nope"], "metaschedule: error: argument COMMAND"),
    ],
)
def test_usage_errors_exit_2(argv, prefix, capsys):
    assert main(argv) == 2
    _one_line_error(capsys, prefix)


def test_unknown_workload(tmp_path, capsys):
    assert main(["tune", "nope", "--work-dir", str(tmp_path)]) == 1
    err = _one_line_error(capsys, "metaschedule tune: error: unknown workload 'nope'")
    assert "gmm, c2d, dep, cbr, tbg, sfm, dns, pool" in err


def test_rpc_runner_needs_its_address(tmp_path, capsys):
    assert main(["tune", "gmm", "--work-dir", str(tmp_path), "--runner", "rpc"]) == 2
    _one_line_error(capsys, "metaschedule tune: error: --runner rpc needs --rpc-address")
    assert (
        main(
            [
                "tune",
                "gmm",
                "--work-dir",
                str(tmp_path),
                "--runner",
                "rpc",
                "--rpc-address",
                "nohost",
                "--rpc-key",
                "k",
            ]
        )
        == 2
    )
    _one_line_error(capsys, "metaschedule tune: error: --rpc-address 'nohost'")


def test_rpc_runner_missing_or_passed_through(tmp_path, capsys):
    from metaschedule import runner

    argv = [
        "tune",
        "gmm:8",
        "--work-dir",
        str(tmp_path),
        "--runner",
        "rpc",
        "--rpc-address",
        "127.0.0.1:1",
        "--rpc-key",
        "dev",
        "--trials",
        "1",
    ]
    if not hasattr(runner, "RPCRunner"):
        assert main(argv) == 1
        _one_line_error(capsys, "metaschedule tune: error: --runner rpc needs ms.runner.RPCRunner")


def test_onnx_model(tmp_path, capsys):
    missing = str(tmp_path / "missing.onnx")
    assert main(["tune", missing, "--work-dir", str(tmp_path)]) == 1
    _one_line_error(capsys, f"metaschedule tune: error: {missing}: no such model file")
    model = tmp_path / "m.onnx"
    model.write_bytes(b"")  # an empty file parses as an empty ModelProto
    pytest.importorskip("onnx")
    for cmd in (["tune", str(model), "--work-dir", str(tmp_path)], ["compile", str(model)]):
        if cmd[0] == "compile":
            cmd += ["-o", str(tmp_path / "m.so")]
        assert main(cmd) == 1
        err = capsys.readouterr().err.strip()
        assert "not an ONNX model with a graph" in err and str(model) in err, err
    assert not (tmp_path / "m.so").exists()


def test_bad_workload_file(tmp_path, capsys):
    path = tmp_path / "w.py"
    path.write_text("x = 1\n")
    assert main(["tune", f"{path}:y", "--work-dir", str(tmp_path)]) == 1
    _one_line_error(capsys, f"metaschedule tune: error: {path}: no name 'y'")
    assert main(["tune", f"{path}:x", "--work-dir", str(tmp_path)]) == 1
    _one_line_error(capsys, f"metaschedule tune: error: {path}:x is a int")
    path.write_text("raise RuntimeError('boom')\n")
    assert main(["tune", str(path), "--work-dir", str(tmp_path)]) == 1
    err = _one_line_error(capsys, f"metaschedule tune: error: {path}: running the file failed")
    assert "boom" in err


def test_show_and_report_of_a_missing_folder(tmp_path, capsys):
    assert main(["show", str(tmp_path / "none")]) == 1
    _one_line_error(capsys, "metaschedule show: error:")
    assert main(["report", str(tmp_path / "none")]) == 1
    _one_line_error(capsys, "metaschedule report: error:")
    assert main(["show", str(tmp_path)]) == 1
    _one_line_error(capsys, "metaschedule show: error:")


def test_unexpected_errors_are_one_line_and_verbose_shows_the_traceback(monkeypatch, capsys):
    from metaschedule.cli import show

    def boom(args):
        raise RuntimeError("internal failure\nsecond line")

    monkeypatch.setattr(show, "run", boom)
    assert main(["show", "x"]) == 1  # register() binds the patched run
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert main(["show", "x", "--verbose"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" in err and "internal failure" in err


def test_integer_arguments():
    assert positive_int("3") == 3 and non_negative_int("0") == 0
    for parse, text, message in (
        (positive_int, "0", "expected a positive integer, got 0"),
        (positive_int, "x", "expected a positive integer, got 'x'"),
        (non_negative_int, "-1", "expected an integer >= 0, got -1"),
        (non_negative_int, "1.5", "expected an integer >= 0, got '1.5'"),
    ):
        with pytest.raises(argparse.ArgumentTypeError) as info:
            parse(text)
        assert str(info.value) == message
