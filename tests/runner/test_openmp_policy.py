"""The OpenMP wait policy that follows the load (runner/config.py): the decision, the
environment it sets, and the record a measurement keeps."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from metaschedule.runner.config import (
    OPENMP_PASSIVE_ENV,
    QUIET_SPIN_COUNT,
    choose_openmp_policy,
    sample_host_load,
)

SPIN = {"GOMP_SPINCOUNT": str(QUIET_SPIN_COUNT)}


def test_a_quiet_machine_spins_briefly():
    policy = choose_openmp_policy(others_cores=0.02, loadavg_1m=0.3, cores=2)
    assert policy.env == SPIN and policy.reason == "quiet"


@pytest.mark.parametrize(
    "others, loadavg",
    [(0.5, 0.3), (1.9, 4.0), (0.02, 3.5), (0.25, 0.1)],
    ids=["others-half-a-core", "fully-busy", "loadavg-high", "just-above-threshold"],
)
def test_a_busy_machine_sleeps_at_once(others, loadavg):
    policy = choose_openmp_policy(others_cores=others, loadavg_1m=loadavg, cores=2)
    assert policy.env == OPENMP_PASSIVE_ENV and policy.reason == "busy"


def test_the_thresholds_scale_with_the_cores():
    # half a core of others' work is busy on 2 cores, quiet on 16 (a tenth of them)
    assert choose_openmp_policy(0.5, 2.0, cores=16).reason == "quiet"
    assert choose_openmp_policy(2.0, 2.0, cores=16).reason == "busy"
    assert choose_openmp_policy(0.5, 2.0, cores=2).reason == "busy"


def test_an_unknown_load_is_taken_as_busy():
    policy = choose_openmp_policy(None, None, cores=2)
    assert policy.env == OPENMP_PASSIVE_ENV and policy.reason == "unknown load"
    assert choose_openmp_policy(0.0, None, cores=2).reason == "quiet"  # no load average


def test_sample_host_load_reports_what_host_load_does():
    load = sample_host_load(0.02)
    assert set(load) == {"loadavg_1m", "others_cores", "wall_secs"}
    assert load["wall_secs"] >= 0.02


# the decision in a fresh interpreter: libgomp is not loaded there yet
_CHILD = """
import json, os, sys
from metaschedule.runner import config
load = json.loads(sys.argv[1])
calls = []
def sample():
    calls.append(1)
    return load
first = config.use_load_following_openmp(sample)
again = config.use_load_following_openmp(sample)  # decided once per process
print(json.dumps({"record": first, "again": again, "calls": len(calls),
                  "env": {k: os.environ.get(k) for k in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}}))
"""


def _decide(load: dict, **env: str) -> dict:
    base = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, json.dumps(load)],
        env={**base, **env},
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_worker_decides_once_from_the_load_it_sees_and_records_why():
    cores = os.cpu_count() or 1
    quiet = _decide({"others_cores": 0.0, "loadavg_1m": 0.0, "wall_secs": 0.1})
    assert quiet["env"] == {"OMP_WAIT_POLICY": None, "GOMP_SPINCOUNT": str(QUIET_SPIN_COUNT)}
    assert quiet["record"]["omp_wait_policy"] == f"default (GOMP_SPINCOUNT={QUIET_SPIN_COUNT})"
    basis = quiet["record"]["omp_policy_basis"]
    assert basis["decision"] == "quiet" and basis["others_cores"] == 0.0
    assert basis["cores"] == cores
    assert quiet["again"] == quiet["record"] and quiet["calls"] == 1

    busy = _decide({"others_cores": float(cores), "loadavg_1m": 9.0, "wall_secs": 0.1})
    assert busy["env"] == OPENMP_PASSIVE_ENV
    assert busy["record"]["omp_wait_policy"] == "PASSIVE (GOMP_SPINCOUNT=0)"
    assert busy["record"]["omp_policy_basis"]["decision"] == "busy"


def test_the_users_openmp_settings_win():
    quiet = {"others_cores": 0.0, "loadavg_1m": 0.0, "wall_secs": 0.1}
    mine = _decide(quiet, OMP_WAIT_POLICY="ACTIVE")
    assert mine["env"] == {"OMP_WAIT_POLICY": "ACTIVE", "GOMP_SPINCOUNT": None}
    assert mine["calls"] == 0  # the load was not even looked at
    assert mine["record"] == {"omp_wait_policy": "ACTIVE", "omp_policy_basis": {"decision": "user"}}
    spin = _decide(quiet, GOMP_SPINCOUNT="5")
    assert spin["env"]["GOMP_SPINCOUNT"] == "5" and spin["calls"] == 0


def test_a_spinning_worker_on_a_machine_that_became_busy_is_outdated():
    from metaschedule.runner.config import openmp_policy_outdated

    assert openmp_policy_outdated("quiet", 1.2, cores=2)
    assert not openmp_policy_outdated("quiet", 0.05, cores=2)
    assert not openmp_policy_outdated("busy", 0.0, cores=2)  # passive stays: it is safe
    assert not openmp_policy_outdated("user", 2.0, cores=2)  # the user's choice stays
    assert not openmp_policy_outdated("quiet", None, cores=2)


def test_the_runner_starts_fresh_workers_when_their_policy_is_outdated():
    from metaschedule.runner import LocalRunner

    with LocalRunner() as runner:
        runner.run([])
        first = runner._pool
        runner._note_info({"omp_policy_basis": {"decision": "busy"}, "others_cores": 1.9})
        runner.run([])
        assert runner._pool is first  # passive workers stay
        busy = {"omp_policy_basis": {"decision": "quiet"}, "others_cores": float(os.cpu_count())}
        runner._note_info(busy)
        runner.run([])
        assert runner._pool is not first  # they choose again
        second = runner._pool
        runner.run([])
        assert runner._pool is second


def test_a_runner_decides_once_for_its_pool_and_workers_record_it(monkeypatch):
    from metaschedule.runner import config

    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    monkeypatch.delenv("GOMP_SPINCOUNT", raising=False)
    env = config.openmp_worker_env(lambda: {"others_cores": 1.5, "loadavg_1m": 3.0})
    assert {k: env[k] for k in OPENMP_PASSIVE_ENV} == OPENMP_PASSIVE_ENV
    basis = json.loads(env[config.POLICY_BASIS_ENV])
    assert basis["decision"] == "busy" and basis["others_cores"] == 1.5
    monkeypatch.setenv("GOMP_SPINCOUNT", "7")  # the user's: the pool inherits it
    assert config.openmp_worker_env(lambda: pytest.fail("no sample needed")) == {}


def test_a_worker_whose_initializer_changed_the_policy_records_the_users(tmp_path):
    """A WorkerEnv initializer runs after the runner's environment: its choice is the
    user's, and the measurement says so."""
    code = (
        "import json, os\n"
        "from metaschedule.runner import config\n"
        "os.environ['OMP_WAIT_POLICY'] = 'ACTIVE'; os.environ.pop('GOMP_SPINCOUNT', None)\n"
        "print(json.dumps(config.openmp_policy_record()))\n"
    )
    base = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    env = {**base, "GOMP_SPINCOUNT": "10000"}
    env["MS_OPENMP_POLICY_BASIS"] = json.dumps(
        {"decision": "quiet", "env": {"GOMP_SPINCOUNT": "10000"}}
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    record = json.loads(out.stdout.strip().splitlines()[-1])
    assert record == {"omp_wait_policy": "ACTIVE", "omp_policy_basis": {"decision": "user"}}


def test_a_load_average_only_our_own_past_work_explains_is_checked_again(monkeypatch):
    # the others were quiet and only the 1-minute load average (which counts a tuning or a
    # timing of ours that just ended) says busy: a longer look at the others decides
    from metaschedule.runner import config

    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    monkeypatch.delenv("GOMP_SPINCOUNT", raising=False)
    cores = os.cpu_count() or 1
    lagging = {"others_cores": 0.0, "loadavg_1m": 3.0 * cores, "wall_secs": 0.1}
    calm = config.openmp_worker_env(lambda: lagging, lambda: {"others_cores": 0.01})
    assert calm["GOMP_SPINCOUNT"] == str(QUIET_SPIN_COUNT)
    basis = json.loads(calm[config.POLICY_BASIS_ENV])
    assert basis["decision"] == "quiet" and basis["confirm_others_cores"] == 0.01
    assert basis["loadavg_1m"] == 3.0 * cores  # the evidence it overruled stays recorded
    busy = config.openmp_worker_env(lambda: lagging, lambda: {"others_cores": float(cores)})
    assert {k: busy[k] for k in OPENMP_PASSIVE_ENV} == OPENMP_PASSIVE_ENV
    assert json.loads(busy[config.POLICY_BASIS_ENV])["decision"] == "busy"
    # others busy in the first look: no second one
    loaded = {"others_cores": float(cores), "loadavg_1m": 3.0 * cores}
    env = config.openmp_worker_env(lambda: loaded, lambda: pytest.fail("no second look"))
    assert json.loads(env[config.POLICY_BASIS_ENV])["decision"] == "busy"
