"""CodegenOptions (codegen/options.py): every switch of the code generator as one value,
and that value carried with each build request into the builder's worker."""

from __future__ import annotations

import pickle

import pytest

from metaschedule import te
from metaschedule.builder import BuilderInput, LocalBuilder
from metaschedule.builder.base import remove_artifact
from metaschedule.codegen import c_accumulate, c_codegen, c_vector, codegen_c
from metaschedule.codegen.isa import isa_of
from metaschedule.codegen.options import SWITCHES, CodegenOptions
from metaschedule.runtime import load_module
from metaschedule.schedule import Schedule
from metaschedule.target import Target
from metaschedule.tir.transform import lower


def _elementwise():
    a = te.placeholder((64, 64), "float32", "A")
    return te.create_prim_func([a, te.compute((64, 64), lambda i, j: a[i, j] * 2.0, name="B")])


def test_the_defaults_are_the_module_constants_and_every_switch_is_there():
    assert CodegenOptions() == CodegenOptions.current()
    assert CodegenOptions().changed() == {}
    named = {k for k, _ in CodegenOptions().items}
    assert named == {c.lower() for names in SWITCHES.values() for c in names}
    assert CodegenOptions()["jam_small_tiles"] is c_accumulate.JAM_SMALL_TILES


def test_bad_options_are_errors_that_name_them():
    with pytest.raises(ValueError, match="unknown code generator option 'jam'"):
        CodegenOptions(jam=False)
    with pytest.raises(ValueError, match="jam_small_tiles takes a value like True"):
        CodegenOptions(jam_small_tiles=1)
    with pytest.raises(ValueError, match="straight_steps"):
        CodegenOptions(straight_steps="16")


def test_applied_sets_the_switches_and_puts_them_back():
    opts = CodegenOptions(auto_vectorize=False, straight_steps=4)
    assert pickle.loads(pickle.dumps(opts)) == opts
    assert repr(opts) == "CodegenOptions(auto_vectorize=False, straight_steps=4)"
    with opts.applied():
        assert c_codegen.AUTO_VECTORIZE is False and c_accumulate.STRAIGHT_STEPS == 4
        assert CodegenOptions.current() == opts
    assert c_codegen.AUTO_VECTORIZE is True and c_accumulate.STRAIGHT_STEPS == 16


def test_a_build_request_carries_the_options_in_force(monkeypatch):
    monkeypatch.setattr(c_accumulate, "JAM_SMALL_TILES", False)
    inp = BuilderInput(_elementwise(), Target("llvm"))
    assert inp.codegen_options.changed() == {"jam_small_tiles": False}


@pytest.mark.compiler
def test_the_builder_worker_builds_with_the_tuning_processs_switches(monkeypatch):
    """A switch set in this process reaches the builder's worker, a fresh interpreter: a
    vector loop of 4 registers' lanes is written out chunk by chunk by default, and as a
    loop over chunks with ``EXPLICIT_CHUNKS = 1``, there as here."""
    target = Target("llvm -num-cores=1")
    n = 4 * isa_of(target).lanes("float32")
    a = te.placeholder((4, n), "float32", "A")
    sch = Schedule(te.create_prim_func([a, te.compute((4, n), lambda i, j: a[i, j] * 2.0)]))
    sch.vectorize(sch.get_loops(sch.get_child_blocks(sch.get_block("root"))[0])[1])
    sources = {}
    with LocalBuilder(max_workers=1, timeout_sec=60) as builder:
        for chunks in (4, 1):
            monkeypatch.setattr(c_vector, "EXPLICIT_CHUNKS", chunks)
            (result,) = builder.build([BuilderInput(sch.mod, target)])
            assert result.error_msg is None, result.error_msg
            sources[chunks] = load_module(result.artifact_path).get_source()
            remove_artifact(result.artifact_path)
            assert sources[chunks].strip() == codegen_c(lower(sch.mod["main"]), target).code.strip()
    assert sources[4] != sources[1]
