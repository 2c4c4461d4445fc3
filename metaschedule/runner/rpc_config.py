"""RPCConfig: where the fleet of measuring hosts is, TVM's names over dask.distributed.

TVM's RPC tracker becomes a Dask scheduler (``tracker_host``/``tracker_port``) and the
device key becomes a Dask worker *resource* (``tracker_key``): every measuring host runs
one worker started with ``--resources "<key>=1" --nthreads 1``, so each host measures one
candidate at a time while the hosts measure in parallel. ``session_priority`` is the
Dask task priority and ``session_timeout_sec`` bounds one measurement (and connecting).

Fields left ``None`` are read from the environment when the config is normalized (by
:class:`RPCRunner` or :class:`~metaschedule.builder.DaskBuilder` at construction):
``MS_RPC_TRACKER_HOST``, ``MS_RPC_TRACKER_PORT``, ``MS_RPC_TRACKER_KEY``, else TVM's
``TVM_TRACKER_HOST``, ``TVM_TRACKER_PORT``, ``TVM_TRACKER_KEY``; and ``security`` (the
TLS certificates) from ``MS_RPC_TLS_CA_FILE``, ``MS_RPC_TLS_CERT``, ``MS_RPC_TLS_KEY``.
This is the one place outside the CLI that reads environment variables, on purpose:
``tune_tir(..., runner="rpc")`` has no other way to learn the address, exactly as in TVM.

Trust: whoever reaches the scheduler's port can run any Python on every worker, and
every worker runs what the tuner sends. With ``security`` (a ``distributed.Security``,
mutual TLS with the cluster's own CA) only holders of a certificate get in; a plain
``tcp://`` address that is not loopback logs a warning saying so each time a client
connects.
"""

from __future__ import annotations

import ipaddress
import logging
import os
from typing import TYPE_CHECKING, Any, NamedTuple
from urllib.parse import urlsplit

from .rpc_host import RPCSession

if TYPE_CHECKING:
    from distributed import Client, Security

__all__ = ["RPCConfig", "workers_with_key"]

_ENV = {
    "tracker_host": ("MS_RPC_TRACKER_HOST", "TVM_TRACKER_HOST"),
    "tracker_port": ("MS_RPC_TRACKER_PORT", "TVM_TRACKER_PORT"),
    "tracker_key": ("MS_RPC_TRACKER_KEY", "TVM_TRACKER_KEY"),
}
#: the environment variables that fill ``security``: the CA, this side's certificate, its key
_TLS_ENV = ("MS_RPC_TLS_CA_FILE", "MS_RPC_TLS_CERT", "MS_RPC_TLS_KEY")
_LOG = logging.getLogger(__name__)
_WORKER_HINT = 'start one with: dask worker {address} --resources "{key}=1" --nthreads 1'


def _from_env(field: str) -> str | None:
    for name in _ENV[field]:
        value = os.environ.get(name)
        if value:
            return value
    return None


class RPCConfig(NamedTuple):
    """Where to measure: a Dask scheduler and the resource naming the measuring device.

    Args:
        tracker_host: the scheduler's host name or IP, or a full address
            ("tcp://host:8786"); None: from the environment (see the module docstring).
        tracker_port: the scheduler's port (default 8786 when the host has none).
        tracker_key: the worker resource that marks measuring hosts, e.g. "device-xeon".
        session_priority: Dask priority of the measurement tasks (higher runs first).
        session_timeout_sec: seconds one measurement may take (load, allocate, time),
            and the timeout for connecting to the scheduler.
        security: a ``distributed.Security`` with the TLS certificates every client this
            package creates uses (None: from ``MS_RPC_TLS_CA_FILE``/``_CERT``/``_KEY``
            when set, else plain TCP). With it, a host without a scheme is reached at
            ``tls://``. It stays on the tuner's side: tasks carry the config without it.

    A NamedTuple, as in TVM (``security`` is ours, last, so TVM's positions hold).
    """

    tracker_host: str | None = None
    tracker_port: None | int | str = None
    tracker_key: str | None = None
    session_priority: int = 1
    session_timeout_sec: int = 10
    security: Security | None = None

    @staticmethod
    def _normalized(config: RPCConfig | None, need_key: bool = True) -> RPCConfig:
        """Fill the unset fields from the environment and check them (the device key
        may stay unset when ``need_key`` is false, for building)."""
        if config is None:
            config = RPCConfig()
        if not isinstance(config, RPCConfig):
            raise TypeError(f"expected an RPCConfig, got {type(config).__name__}")
        host = config.tracker_host or _from_env("tracker_host")
        port = config.tracker_port if config.tracker_port is not None else _from_env("tracker_port")
        key = config.tracker_key or _from_env("tracker_key")
        missing = [
            f"{field} (or ${_ENV[field][0]} / ${_ENV[field][1]})"
            for field, value in (("tracker_host", host), ("tracker_key", key))
            if not value and (need_key or field != "tracker_key")
        ]
        if missing:
            raise ValueError(
                f"RPCConfig: {' and '.join(missing)} not set; give the Dask scheduler's address "
                "and the resource name of the measuring workers, e.g. RPCConfig("
                "tracker_host='sched', tracker_port=8786, tracker_key='device-xeon')"
            )
        if port is not None:
            try:
                port = int(port)
            except ValueError:
                raise ValueError(
                    f"RPCConfig: tracker_port must be an integer, got {port!r}"
                ) from None
            if not 0 < port < 65536:
                raise ValueError(f"RPCConfig: tracker_port out of range: {port}")
        if config.session_timeout_sec <= 0:
            raise ValueError(
                f"RPCConfig: session_timeout_sec must be positive, got {config.session_timeout_sec}"
            )
        return RPCConfig(
            str(host),
            port,
            None if key is None else str(key),
            int(config.session_priority),
            config.session_timeout_sec,
            config.security if config.security is not None else _security_from_env(),
        )

    @property
    def wait_bound_sec(self) -> float:
        """The longest a measurement may keep anyone waiting once it started on a host:
        ``max(30, 3 * session_timeout_sec)`` (the child's start, the measurement lock,
        loading and timing all fit; a host that takes longer is stuck)."""
        return max(30.0, 3.0 * float(self.session_timeout_sec))

    @property
    def address(self) -> str:
        """The scheduler's address, e.g. "tcp://sched:8786"."""
        if not self.tracker_host:
            raise ValueError("RPCConfig has no tracker_host; normalize it first")
        host = self.tracker_host
        if "://" not in host:
            host = f"{'tcp' if self.security is None else 'tls'}://{host}"
        scheme, _, rest = host.partition("://")
        if self.tracker_port is not None and ":" not in rest:
            return f"{scheme}://{rest}:{int(self.tracker_port)}"
        if ":" not in rest and scheme in ("tcp", "tls"):
            return f"{scheme}://{rest}:8786"
        return host

    def connect_tracker(self) -> Client:
        """Connect to the Dask scheduler; a ``distributed.Client`` (the tracker session).

        Raises:
            ConnectionError: the scheduler does not answer within ``session_timeout_sec``.
            RuntimeError: no worker offering the resource ``tracker_key`` has connected
                within ``session_timeout_sec``.
        """
        config = RPCConfig._normalized(self)
        client = _connect(config)
        try:
            workers_with_key(client, config, wait_sec=config.session_timeout_sec)
        except BaseException:
            client.close()
            raise
        return client

    def connect_server(self) -> RPCSession:
        """A session on one measuring host: a worker that offers ``tracker_key``.

        The session keeps its client open; call ``session.close()`` when done.

        Raises:
            ConnectionError, RuntimeError: as :meth:`connect_tracker`.
        """
        config = RPCConfig._normalized(self)
        client = _connect(config)
        try:
            worker = workers_with_key(client, config, wait_sec=config.session_timeout_sec)[0]
        except BaseException:
            client.close()
            raise
        return RPCSession(
            str(config.tracker_key), worker=worker, client=client, timeout_sec=config.wait_bound_sec
        )


def _security_from_env() -> Security | None:
    """A ``distributed.Security`` from ``MS_RPC_TLS_*``; None when none is set."""
    ca, cert, key = (os.environ.get(name) or None for name in _TLS_ENV)
    if ca is None and cert is None and key is None:
        return None
    if ca is None or cert is None:
        raise ValueError(
            "RPCConfig: TLS needs both $MS_RPC_TLS_CA_FILE (the cluster's CA certificate) "
            f"and $MS_RPC_TLS_CERT (this side's certificate), got CA={ca!r}, cert={cert!r}; "
            "set both (and $MS_RPC_TLS_KEY unless the key is in the certificate file) or none"
        )
    from distributed import Security

    return Security(
        tls_ca_file=ca, tls_client_cert=cert, tls_client_key=key, require_encryption=True
    )


def _is_loopback(host: str) -> bool:
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def warn_if_insecure(address: str, what: str = "RPCConfig") -> bool:
    """Log a warning when ``address`` is plain TCP to another machine; whether it did."""
    parts = urlsplit(address)
    scheme, host = parts.scheme, parts.hostname or ""
    if scheme != "tcp" or _is_loopback(host):
        return False
    _LOG.warning(
        "%s: connecting to the Dask scheduler at %s without TLS: anyone who can reach that "
        "port can run any Python on every worker (and send the tuner forged results). "
        "Give security=distributed.Security(...) or set MS_RPC_TLS_CA_FILE, MS_RPC_TLS_CERT "
        "and MS_RPC_TLS_KEY, with the scheduler and workers started with --tls-ca-file, "
        "--tls-cert and --tls-key (see the README, 'Measuring on a fleet')",
        what,
        address,
    )
    return True


def _connect(config: RPCConfig, what: str = "RPCConfig") -> Client:
    try:
        from distributed import Client
    except ImportError as err:  # pragma: no cover - dask is an optional dependency
        raise ImportError(
            "measuring on a fleet needs dask.distributed: pip install 'metaschedule[dask]'"
        ) from err
    scheme = config.address.partition("://")[0]
    if (scheme == "tls") != (config.security is not None):
        raise ValueError(
            f"{what}: the address {config.address} "
            + (
                "is TLS but no security was given: pass security=distributed.Security(...) "
                "or set MS_RPC_TLS_CA_FILE, MS_RPC_TLS_CERT and MS_RPC_TLS_KEY"
                if scheme == "tls"
                else "is not TLS but security was given: write tls://host:port, or the "
                "host alone (a host without a scheme is reached at tls:// with security)"
            )
        )
    warn_if_insecure(config.address, what)
    security = {} if config.security is None else {"security": config.security}
    try:
        return Client(
            config.address,
            timeout=config.session_timeout_sec,
            set_as_default=False,
            **security,
        )
    except (OSError, TimeoutError) as err:
        tls = (
            "; with TLS, check that the scheduler runs with --tls-ca-file/--tls-cert/"
            "--tls-key and that this side's certificate is signed by its CA"
            if config.security is not None
            else "; a scheduler that requires TLS refuses clients without certificates"
        )
        raise ConnectionError(
            f"RPCConfig: no Dask scheduler answers at {config.address} within "
            f"{config.session_timeout_sec} s ({type(err).__name__}: {err}); start one with "
            f"`dask scheduler --port <port>` or fix tracker_host/tracker_port{tls}"
        ) from err


def workers_with_key(client: Client, config: RPCConfig, wait_sec: float = 0.0) -> list[str]:
    """Addresses of the workers offering the resource ``config.tracker_key``.

    Waits up to ``wait_sec`` for one to connect. Raises RuntimeError naming the
    workers that are there (and their resources) and how to start a measuring one.
    """
    import time

    deadline = time.monotonic() + wait_sec
    while True:
        info: dict[str, Any] = client.scheduler_info(n_workers=-1)["workers"]
        found = sorted(
            a for a, w in info.items() if (w.get("resources") or {}).get(config.tracker_key)
        )
        if found or time.monotonic() >= deadline:
            break
        time.sleep(0.1)
    if not found:
        others = ", ".join(f"{a} {w.get('resources') or {}}" for a, w in sorted(info.items()))
        raise RuntimeError(
            f"RPCConfig: no Dask worker at {config.address} offers the resource "
            f"{config.tracker_key!r} (workers there: {others or 'none'}); "
            + _WORKER_HINT.format(address=config.address, key=config.tracker_key)
        )
    return found
