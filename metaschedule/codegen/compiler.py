"""Invoking the system C compiler, with a content-addressed cache of built libraries.

The compiler is ``$CC`` (which may carry arguments, e.g. ``"ccache gcc"``), else
``cc``. A library is cached under the hash of (source, flags, compiler identity) in
:func:`metaschedule.runtime.module.kernel_cache_dir`; it is written to a temporary
file and renamed into place, so concurrent builders never see a partial library.
"""

from __future__ import annotations

import hashlib
import logging
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
from functools import lru_cache

from ..runtime.module import kernel_cache_dir
from ..target import Target, known_cpu_vector_width, names_host

__all__ = ["BuildError", "compile_shared", "compiler_command", "compiler_flags", "march_flag"]

_LOG = logging.getLogger(__name__)

#: the x86-64 micro-architecture level of a vector width in bytes (GCC 11 and later)
_X86_64_LEVELS = {64: "x86-64-v4", 32: "x86-64-v3"}

#: Float flags that keep IEEE semantics for infinities and NaN (max-reductions start
#: at -inf), unlike -ffast-math.
SAFE_FLOAT_FLAGS = ("-fno-math-errno", "-ffp-contract=fast")

#: GCC -O3 loop passes that cost most of a build and gain nothing on scheduled kernels,
#: whose tiling, unrolling and register reuse the schedule already decided. Measured on
#: the suite's conv2d candidates (``gcc -ftime-report``): loop distribution 31% of the
#: compile, unroll-and-jam 17%, predictive commoning 12%; without them the cold build of
#: a 14 KB candidate drops from 2.4-3.2 s to about 1 s, and the kernels' speed is
#: unchanged (``benchmarks/compiler_flags.py``: geometric mean 0.99-1.02 on 8 schedules of
#: each suite operator, best schedule 1.00).
GCC_FAST_BUILD_FLAGS = (
    "-fno-tree-loop-distribution",
    "-fno-loop-unroll-and-jam",
    "-fno-predictive-commoning",
)


class BuildError(RuntimeError):
    """The C compiler rejected a generated source.

    Attributes:
        source: the C source that failed.
        compiler_output: everything the compiler printed.
        command: the command line that was run.
    """

    def __init__(self, message: str, source: str, compiler_output: str, command: list[str]):
        super().__init__(message)
        self.source = source
        self.compiler_output = compiler_output
        self.command = command

    @classmethod
    def failed(
        cls, language: str, returncode: int, command: list[str], source: str, output: str
    ) -> BuildError:
        """The error of a compiler run that exited with ``returncode``: the command line
        and the first 60 lines of its ``output``."""
        shown = "\n".join(output.splitlines()[:60]) or "(no output)"
        return cls(
            f"{language} compilation failed (exit code {returncode}) running: "
            f"{' '.join(shlex.quote(c) for c in command)}\n{shown}",
            source,
            output,
            command,
        )


def compiler_command() -> list[str]:
    """The compiler to run: ``$CC`` split like a shell would, else ``cc``."""
    return shlex.split(os.environ.get("CC") or "cc")


def compiler_flags(target: Target) -> list[str]:
    """Flags for ``target``; unknown functions and unresolved symbols are build errors."""
    flags = [
        "-O3",
        march_flag(target),
        "-fopenmp",
        "-shared",
        "-fPIC",
        "-std=gnu11",
        *SAFE_FLOAT_FLAGS,
        "-Werror=implicit-function-declaration",
    ]
    if _is_gcc(compiler_command()):
        flags += GCC_FAST_BUILD_FLAGS
    if sys.platform.startswith("linux"):
        flags.append("-Wl,-z,defs")
    return flags


def march_flag(target: Target) -> str:
    """``-march`` for ``target.mcpu``: the name itself where the compiler knows it.

    A CPU the compiler does not know (GCC 12 and ``znver5``, which TVM users pass as
    ``-mcpu`` on a Zen 5) becomes ``-march=native`` when it is the host's CPU
    (:func:`~metaschedule.target.names_host`), else the x86-64 level of its vector width
    (``x86-64-v4`` for 64 bytes), with a warning.

    Raises:
        BuildError: the compiler knows neither the name nor a substitute (a name that is
            no CPU, such as a misspelt one).
    """
    mcpu = str(target.mcpu)
    cmd = tuple(compiler_command())
    if mcpu == "native" or _accepts_march(cmd, mcpu) or not _accepts_march(cmd, "native"):
        return f"-march={mcpu}"  # (a compiler that fails on anything: the build says why)
    substitute = "native" if names_host(mcpu) else None
    width = known_cpu_vector_width(mcpu)
    if substitute is None and width is not None and platform.machine() in ("x86_64", "AMD64"):
        substitute = _X86_64_LEVELS.get(width, "x86-64-v2")
    if substitute is None or not _accepts_march(cmd, substitute):
        raise BuildError(
            f"the C compiler ({' '.join(cmd)}) does not know -march={mcpu}; give the target "
            "an -mcpu it knows (or 'native' for this machine), or set $CC to a newer one",
            "",
            "",
            list(cmd),
        )
    _warn_substitute(cmd, mcpu, substitute)
    return f"-march={substitute}"


@lru_cache(maxsize=16)
def _warn_substitute(cmd: tuple[str, ...], mcpu: str, substitute: str) -> None:
    why = "the host's CPU" if substitute == "native" else "the same vector width"
    _LOG.warning(
        "%s does not know -march=%s; building with -march=%s (%s)",
        " ".join(cmd),
        mcpu,
        substitute,
        why,
    )


def _accepts_march(cmd: tuple[str, ...], mcpu: str) -> bool:
    """Whether the compiler ``cmd`` accepts ``-march=mcpu`` (asked once per compiler)."""
    exe = shutil.which(cmd[-1]) if cmd else None
    if exe is None:
        return True  # no compiler to ask: the build reports that itself
    return _compiler_accepts(tuple(cmd), os.path.getmtime(exe), f"-march={mcpu}")


@lru_cache(maxsize=64)
def _compiler_accepts(cmd: tuple[str, ...], mtime: float, flag: str) -> bool:
    try:
        done = subprocess.run(
            [*cmd, flag, "-E", "-x", "c", "-", "-o", os.devnull],
            input="",
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return True  # cannot tell: let the build itself say what is wrong
    return done.returncode == 0


def _is_gcc(cmd: list[str]) -> bool:
    """Whether ``cmd`` runs GCC (not clang, which also answers to ``cc`` and ``gcc``)."""
    exe = shutil.which(cmd[-1]) if cmd else None  # "ccache gcc": the compiler comes last
    if exe is None:
        return False
    text = _version_text(exe, os.path.getmtime(exe)).lower()
    return "clang" not in text and ("gcc" in text or "free software foundation" in text)


@lru_cache(maxsize=16)
def _version_text(path: str, mtime: float) -> str:
    """What ``path --version`` prints (empty if it cannot run)."""
    try:
        out = subprocess.run(
            [path, "--version"], capture_output=True, text=True, timeout=30, check=False
        )
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def _compiler_identity(path: str, mtime: float) -> str:
    text = _version_text(path, mtime)
    return text.splitlines()[0] if text else path


@lru_cache(maxsize=1)
def _host_fingerprint() -> str:
    """The host CPU's model and feature flags: ``-march=native`` means different code on
    different hosts, and a cache directory may be shared between machines."""
    model = flags = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key == "model name" and not model:
                    model = value.strip()
                elif key in ("flags", "Features") and not flags:
                    flags = value.strip()
    except OSError:
        pass
    return f"{platform.machine()} {model} {hashlib.sha256(flags.encode()).hexdigest()[:16]}"


def _identity(cmd: list[str], flags: list[str]) -> str:
    exe = shutil.which(cmd[0])
    out = " ".join(cmd)
    if exe is not None:
        out = " ".join([exe, *cmd[1:]]) + " / " + _compiler_identity(exe, os.path.getmtime(exe))
    if "-march=native" in flags:
        out += " / " + _host_fingerprint()
    return out


def compile_shared(source: str, flags: list[str], cache_dir: str | None = None) -> str:
    """Compile ``source`` into a shared library; return its path (cached).

    Raises:
        BuildError: the compiler is missing or fails; carries source and output.
    """
    cmd = compiler_command()
    if not cmd:
        raise BuildError("$CC is set but empty; set it to a C compiler", source, "", cmd)
    key = hashlib.sha256(
        "\0".join([source, " ".join(flags), _identity(cmd, flags)]).encode()
    ).hexdigest()[:32]
    cache_dir = cache_dir or kernel_cache_dir()
    os.makedirs(cache_dir, exist_ok=True)
    final = os.path.join(cache_dir, f"{key}.so")
    if os.path.exists(final):
        return final
    # The writer's pid in the name: files of a build killed mid-way (kill -9 cannot be
    # cleaned up after) are recognised and removed by the next LocalBuilder.
    fd, src_path = tempfile.mkstemp(dir=cache_dir, prefix=f".ms-build-{os.getpid()}-", suffix=".c")
    with os.fdopen(fd, "w") as f:
        f.write(source)
    out_path = src_path[:-2] + ".so"
    full = [*cmd, *flags, src_path, "-o", out_path, "-lm"]
    try:
        try:
            proc = subprocess.run(full, capture_output=True, text=True, check=False)
        except OSError as err:
            raise BuildError(
                f"cannot run the C compiler {cmd[0]!r} ({err.strerror}); install one or set $CC",
                source,
                str(err),
                full,
            ) from None
        output = (proc.stdout + proc.stderr).strip()
        if proc.returncode != 0 or not os.path.exists(out_path):
            raise BuildError.failed("C", proc.returncode, full, source, output)
        os.replace(out_path, final)
    finally:
        for p in (src_path, out_path):
            if os.path.exists(p):
                os.unlink(p)
    return final
