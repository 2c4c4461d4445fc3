"""A small Dask fleet in this process, for tests and benchmarks of the RPC runner.

Two worker processes (each under a nanny, so a killed worker comes back): one offers
the device resource ``DEVICE_KEY`` (it measures), the other offers nothing (it builds).

For TLS: :func:`tls_certificates` writes a throw-away CA and a certificate it signed
(with the ``cryptography`` package, else the ``openssl`` command), and :func:`tls_fleet`
starts a scheduler and one measuring worker, in this process, that accept nothing else.
"""

from __future__ import annotations

import atexit
import datetime
import logging
import os
import shutil
import subprocess
import tempfile
import time
from typing import Any, NamedTuple

from ..runner.rpc_config import RPCConfig, workers_with_key
from ..runner.rpc_runner import default_run_evaluator

__all__ = [
    "DEVICE_KEY",
    "TLSFiles",
    "hanging_run_evaluator",
    "local_fleet",
    "measuring_worker",
    "rpc_config",
    "slow_run_evaluator",
    "tls_certificates",
    "tls_fleet",
    "tls_security",
]

DEVICE_KEY = "device-test"
_fleet: Any = None


def local_fleet() -> Any:
    """The process-wide ``LocalCluster`` (started on first use, closed at exit)."""
    global _fleet
    if _fleet is None:
        from distributed import LocalCluster, Nanny

        quiet = logging.CRITICAL  # killing a worker on purpose is not news
        cluster = LocalCluster(
            n_workers=1,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            silence_logs=quiet,
        )
        cluster.worker_spec["measure"] = {
            "cls": Nanny,
            "options": {"nthreads": 1, "resources": {DEVICE_KEY: 1}, "silence_logs": quiet},
        }
        cluster.sync(cluster._correct_state)
        atexit.register(cluster.close)
        _fleet = cluster
    return _fleet


def rpc_config(key: str = DEVICE_KEY, session_timeout_sec: int = 10) -> RPCConfig:
    """An RPCConfig pointing at :func:`local_fleet`."""
    host, port = local_fleet().scheduler_address.rsplit(":", 1)
    return RPCConfig(host, int(port), key, session_timeout_sec=session_timeout_sec)


def measuring_worker(client: Any, key: str = DEVICE_KEY, wait_sec: float = 30.0) -> tuple[str, int]:
    """(address, pid) of the worker offering ``key``, waiting for it to (re)join."""
    config = rpc_config(key)
    (address,) = workers_with_key(client, config, wait_sec=wait_sec)
    pid = client.run(os.getpid, workers=[address])[address]
    return address, pid


def slow_run_evaluator(
    session: Any, rt_mod: Any, device: str, config: Any, args: Any
) -> list[float]:
    """An RPC f_run_evaluator that sleeps 1 s before timing (room to kill its worker)."""
    time.sleep(1.0)
    return default_run_evaluator(session, rt_mod, device, config, args)


def hanging_run_evaluator(
    session: Any, rt_mod: Any, device: str, config: Any, args: Any
) -> list[float]:
    """An RPC f_run_evaluator that never returns (to test the per-measurement timeout)."""
    while True:
        time.sleep(1.0)


# --------------------------------------------------------------------------- TLS
class TLSFiles(NamedTuple):
    """PEM files: the CA's certificate, and a certificate it signed with its key."""

    ca_file: str
    cert: str
    key: str


def tls_certificates(folder: str, name: str = "metaschedule-test") -> TLSFiles:
    """A new CA and a certificate for 127.0.0.1/localhost signed by it, in ``folder``.

    Raises:
        RuntimeError: neither the ``cryptography`` package nor ``openssl`` is there.
    """
    os.makedirs(folder, exist_ok=True)
    files = TLSFiles(*(os.path.join(folder, f"{name}-{p}.pem") for p in ("ca", "cert", "key")))
    try:
        _certificates_with_cryptography(files, name)
    except ImportError:
        if shutil.which("openssl") is None:
            raise RuntimeError(
                "cannot make TLS certificates: install the cryptography package or openssl"
            ) from None
        _certificates_with_openssl(files, name)
    return files


def _certificates_with_cryptography(files: TLSFiles, name: str) -> None:
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{name} CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    with open(files.ca_file, "wb") as f:
        f.write(ca.public_bytes(pem))
    with open(files.cert, "wb") as f:
        f.write(cert.public_bytes(pem))
    fd = os.open(files.key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(
            key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
        )


def _certificates_with_openssl(files: TLSFiles, name: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        ca_key, csr, ext = (os.path.join(tmp, n) for n in ("ca.key", "node.csr", "ext.cnf"))
        with open(ext, "w") as f:
            f.write(
                "subjectAltName=DNS:localhost,IP:127.0.0.1\n"
                "extendedKeyUsage=serverAuth,clientAuth\n"
            )
        new_key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        for cmd in (
            ["openssl", "req", "-x509", *new_key, "-keyout", ca_key, "-out", files.ca_file]
            + ["-days", "2", "-subj", f"/CN={name} CA"],
            ["openssl", "req", *new_key, "-keyout", files.key, "-out", csr]
            + ["-subj", f"/CN={name}"],
            ["openssl", "x509", "-req", "-in", csr, "-CA", files.ca_file, "-CAkey", ca_key]
            + ["-CAcreateserial", "-out", files.cert, "-days", "2", "-extfile", ext],
        ):
            subprocess.run(cmd, check=True, capture_output=True, cwd=tmp, timeout=60)
        os.chmod(files.key, 0o600)


def tls_security(files: TLSFiles) -> Any:
    """A ``distributed.Security`` using ``files`` for every role, TLS required."""
    from distributed import Security

    return Security(
        tls_ca_file=files.ca_file,
        tls_client_cert=files.cert,
        tls_client_key=files.key,
        tls_scheduler_cert=files.cert,
        tls_scheduler_key=files.key,
        tls_worker_cert=files.cert,
        tls_worker_key=files.key,
        require_encryption=True,
    )


def tls_fleet(files: TLSFiles, key: str = DEVICE_KEY) -> Any:
    """A ``LocalCluster`` that speaks TLS only: a scheduler and one worker (one thread,
    the resource ``key``: it builds and measures) in this process, on 127.0.0.1. Close
    it when done. Kernels still run in the worker's child processes."""
    from distributed import LocalCluster

    return LocalCluster(
        n_workers=1,
        threads_per_worker=1,
        processes=False,
        protocol="tls://",
        host="127.0.0.1",
        security=tls_security(files),
        dashboard_address="127.0.0.1:0",  # plain HTTP: on loopback, on a free port
        silence_logs=logging.CRITICAL,
        resources={key: 1},
    )
