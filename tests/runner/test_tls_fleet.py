"""The fleet is secure when asked and loud when not: TLS from RPCConfig, DaskBuilder and
the environment; clients without the cluster's certificates are refused; plain TCP to
another machine is a warning."""

import logging
import threading

import pytest

pytest.importorskip("distributed")

from distributed import Security

from metaschedule.builder import DaskBuilder
from metaschedule.runner import EvaluatorConfig, RPCConfig, RPCRunner
from metaschedule.runner.rpc_config import warn_if_insecure
from metaschedule.testing import dask_cluster
from metaschedule.testing.tuning_records import matmul
from metaschedule.tir_integration import tune_tir

FAST = EvaluatorConfig(number=1, repeat=1, min_repeat_ms=0)
TLS_ENV = ("MS_RPC_TLS_CA_FILE", "MS_RPC_TLS_CERT", "MS_RPC_TLS_KEY")


@pytest.fixture(scope="module")
def certificates(tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("tls"))
    try:
        return dask_cluster.tls_certificates(folder)
    except RuntimeError as err:  # neither cryptography nor openssl
        pytest.skip(str(err))


@pytest.fixture(scope="module")
def tls_fleet(certificates):
    cluster = dask_cluster.tls_fleet(certificates)
    yield cluster
    cluster.close()


@pytest.fixture
def no_tls_env(monkeypatch):
    for name in TLS_ENV:
        monkeypatch.delenv(name, raising=False)


def template(sch):
    i, _, _ = sch.get_loops(sch.get_block("C"))
    sch.split(i, sch.sample_perfect_tile(i, n=2))


@pytest.mark.compiler
def test_tunes_through_a_tls_only_fleet_with_certificates_from_the_environment(
    tls_fleet, certificates, tmp_path, monkeypatch
):
    assert tls_fleet.scheduler_address.startswith("tls://")
    host, port = tls_fleet.scheduler_address.removeprefix("tls://").rsplit(":", 1)
    monkeypatch.setenv("MS_RPC_TRACKER_HOST", host)  # no scheme: tls:// with certificates
    monkeypatch.setenv("MS_RPC_TRACKER_PORT", port)
    monkeypatch.setenv("MS_RPC_TRACKER_KEY", dask_cluster.DEVICE_KEY)
    monkeypatch.setenv("MS_RPC_TLS_CA_FILE", certificates.ca_file)
    monkeypatch.setenv("MS_RPC_TLS_CERT", certificates.cert)
    monkeypatch.setenv("MS_RPC_TLS_KEY", certificates.key)
    runner = RPCRunner(evaluator_config=FAST)
    assert isinstance(runner.rpc_config.security, Security)
    assert runner.rpc_config.address == tls_fleet.scheduler_address
    db = tune_tir(
        matmul(16),
        "cpu",
        str(tmp_path),
        2,
        num_trials_per_iter=2,
        space=template,
        strategy="replay-trace",
        cost_model="random",
        builder="dask",
        runner=runner,
        seed=0,
    )
    runner.close()
    records = db.get_all_tuning_records()
    assert len(records) >= 2 and all(r.is_valid for r in records)


@pytest.mark.compiler
def test_dask_builder_takes_security(tls_fleet, certificates, no_tls_env):
    from metaschedule.builder import BuilderInput
    from metaschedule.target import Target

    config = RPCConfig(tls_fleet.scheduler_address)
    with DaskBuilder(
        config, timeout_sec=60, security=dask_cluster.tls_security(certificates)
    ) as builder:
        (result,) = builder.build([BuilderInput(matmul(8), Target("cpu"))])
    assert result.error_msg is None, result.error_msg


def test_clients_without_the_clusters_certificates_are_refused(
    tls_fleet, certificates, tmp_path, no_tls_env
):
    address = tls_fleet.scheduler_address
    plain = address.replace("tls://", "tcp://")
    with pytest.raises(ConnectionError, match="refuses clients without certificates"):
        RPCConfig(plain, None, dask_cluster.DEVICE_KEY, session_timeout_sec=2).connect_tracker()
    # a certificate from another CA: the scheduler does not trust it
    stranger = dask_cluster.tls_certificates(str(tmp_path), "stranger")
    config = RPCConfig(
        address,
        None,
        dask_cluster.DEVICE_KEY,
        session_timeout_sec=2,
        security=dask_cluster.tls_security(stranger),
    )
    with pytest.raises(ConnectionError, match="signed by its CA"):
        config.connect_tracker()
    # TLS without certificates is a configuration error before any connection
    with pytest.raises(ValueError, match="is TLS but no security was given"):
        RPCConfig(address, None, dask_cluster.DEVICE_KEY).connect_tracker()
    # and ours gets in
    good = RPCConfig(
        address, None, dask_cluster.DEVICE_KEY, security=dask_cluster.tls_security(certificates)
    )
    client = good.connect_tracker()
    client.close()


def test_the_certificates_stay_on_the_tuners_side(certificates, no_tls_env):
    """The task carries the config without security (the workers need none of it)."""
    security = dask_cluster.tls_security(certificates)
    runner = RPCRunner(RPCConfig("10.0.0.1", 8786, "k", security=security))

    submitted = []

    class FakeFuture:
        def add_done_callback(self, f):
            pass

    class FakeClient:
        def submit(self, func, *args, **kwargs):
            submitted.append(args)
            return FakeFuture()

    class FakeFleet:
        client = FakeClient()
        config = runner.rpc_config
        lock = threading.Lock()
        wakeups: dict = {}

    runner._fleet = FakeFleet()
    from metaschedule.arg_info import ArgInfo
    from metaschedule.runner import RunnerInput

    runner._submit(RunnerInput("/nonexistent.so", "cpu", ArgInfo.from_prim_func(matmul(8))), b"")
    (args,) = submitted
    configs = [a for a in args if isinstance(a, RPCConfig)]
    assert configs and all(c.security is None for c in configs)
    assert runner.rpc_config.security is security


def test_tls_from_the_environment(certificates, monkeypatch):
    monkeypatch.setenv("MS_RPC_TLS_CA_FILE", certificates.ca_file)
    monkeypatch.setenv("MS_RPC_TLS_CERT", certificates.cert)
    monkeypatch.setenv("MS_RPC_TLS_KEY", certificates.key)
    config = RPCConfig._normalized(RPCConfig("sched", 8786, "k"))
    assert isinstance(config.security, Security)
    assert config.security.tls_ca_file == certificates.ca_file
    assert config.security.tls_client_cert == certificates.cert
    assert config.security.tls_client_key == certificates.key
    assert config.security.require_encryption
    assert config.address == "tls://sched:8786"
    # one given wins over the environment
    mine = Security()
    assert RPCConfig._normalized(RPCConfig("s", 1, "k", security=mine)).security is mine
    monkeypatch.delenv("MS_RPC_TLS_CA_FILE")
    with pytest.raises(ValueError, match="MS_RPC_TLS_CA_FILE"):
        RPCConfig._normalized(RPCConfig("sched", 8786, "k"))


def test_no_tls_keeps_tcp(no_tls_env):
    config = RPCConfig._normalized(RPCConfig("sched", 8786, "k"))
    assert config.security is None and config.address == "tcp://sched:8786"


def test_plain_tcp_to_another_machine_is_a_warning(caplog, no_tls_env):
    caplog.set_level(logging.WARNING, logger="metaschedule")
    for address in ("tcp://127.0.0.1:8786", "tcp://localhost:1", "tcp://[::1]:1", "tls://a:1"):
        assert not warn_if_insecure(address), address
    assert not caplog.records
    # 192.0.2.1 (TEST-NET-1) answers nothing: the warning comes before connecting
    config = RPCConfig("192.0.2.1", 9, "k", session_timeout_sec=1)
    with pytest.raises(ConnectionError):
        config.connect_tracker()
    (record,) = [r for r in caplog.records if "192.0.2.1" in r.getMessage()]
    assert record.levelno == logging.WARNING
    assert "without TLS" in record.getMessage() and "run any Python" in record.getMessage()


def test_rpc_session_run_is_bounded(tls_fleet, certificates, no_tls_env):
    import time

    config = RPCConfig(
        tls_fleet.scheduler_address,
        None,
        dask_cluster.DEVICE_KEY,
        session_timeout_sec=2,
        security=dask_cluster.tls_security(certificates),
    )
    session = config.connect_server()
    try:
        assert session.timeout_sec == 30  # max(30, 3 x session_timeout_sec)
        assert session.run(sum, [1, 2]) == 3
        with pytest.raises(TimeoutError, match="within 0.5 s"):
            session.run(time.sleep, 2, timeout=0.5)
    finally:
        session.close()
