"""Profiler: phases timed with timeit land in every entered profiler."""

import contextvars
import threading
import time

import pytest

from metaschedule.profiler import Profiler


def test_outside_a_profiler_timeit_records_nothing():
    assert Profiler.current() is None
    with Profiler.timeit("Lonely"):
        pass
    with Profiler() as p:
        pass
    assert set(p.get()) == {"Total"}


def test_get_accumulates_per_phase():
    with Profiler() as p:
        assert Profiler.current() is p
        for _ in range(3):
            with Profiler.timeit("Sleep"):
                time.sleep(0.01)
        with Profiler.timeit("Outer"), Profiler.timeit("Outer/Inner"):
            time.sleep(0.02)
    assert Profiler.current() is None
    secs = p.get()
    assert 0.03 <= secs["Sleep"] < 0.5
    assert secs["Outer"] >= secs["Outer/Inner"] >= 0.02
    assert secs["Total"] >= secs["Sleep"] + secs["Outer"]
    assert p.calls() == {"Sleep": 3, "Outer": 1, "Outer/Inner": 1}


def test_nested_profilers_both_see_inner_phases():
    with Profiler() as outer:
        with Profiler.timeit("A"):
            pass
        with Profiler() as inner:
            assert Profiler.current() is inner
            with Profiler.timeit("B"):
                time.sleep(0.01)
        assert Profiler.current() is outer
    assert set(inner.get()) == {"B", "Total"}
    assert set(outer.get()) == {"A", "B", "Total"}
    assert outer.get()["B"] == pytest.approx(inner.get()["B"])


def test_a_profiler_reentered_keeps_growing():
    p = Profiler()
    for _ in range(2):
        with p, Profiler.timeit("X"):
            time.sleep(0.01)
    assert p.calls()["X"] == 2
    assert p.get()["Total"] >= p.get()["X"] >= 0.02


def test_total_grows_while_inside():
    with Profiler() as p:
        first = p.get()["Total"]
        time.sleep(0.01)
        assert p.get()["Total"] >= first + 0.01


def test_threads_add_up_when_they_run_in_the_callers_context():
    def work():
        for _ in range(100):
            with Profiler.timeit("T"):
                pass

    with Profiler() as p:
        threads = [
            threading.Thread(target=contextvars.copy_context().run, args=(work,)) for _ in range(4)
        ]
        threads.append(threading.Thread(target=work))  # a bare thread: not in the profiler
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert p.calls()["T"] == 400


def test_an_exception_is_still_timed():
    with Profiler() as p, pytest.raises(KeyError), Profiler.timeit("Fails"):
        raise KeyError("x")
    assert p.calls()["Fails"] == 1


def test_table_is_sorted_slowest_first():
    with Profiler() as p:
        with Profiler.timeit("Fast"):
            pass
        with Profiler.timeit("Slow"):
            time.sleep(0.02)
    lines = p.table().splitlines()
    assert [c.strip() for c in lines[0].split("|")] == [
        "ID",
        "Name",
        "Calls",
        "Time (s)",
        "Percentage",
    ]
    names = [line.split("|")[1].strip() for line in lines[2:]]
    assert names == ["Total", "Slow", "Fast"]
    assert lines[2].split("|")[-1].strip() == "100.00"
    share = float(lines[3].split("|")[-1])
    assert 0 < share <= 100


def test_timeit_needs_a_name():
    with pytest.raises(ValueError, match="non-empty phase name"), Profiler.timeit(""):
        pass
