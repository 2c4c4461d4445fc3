"""Invoking the system C compiler, with a content-addressed cache of built libraries.

The compiler is ``$CC`` (which may carry arguments, e.g. ``"ccache gcc"``), else
``cc``; for a target of another architecture than the host's (aarch64 on x86) it is the
cross compiler ``$CROSS_CC``, else ``aarch64-linux-gnu-gcc``. A library is cached under
the hash of (source, flags, compiler identity) in
:func:`metaschedule.runtime.module.kernel_cache_dir`; it is written in a temporary folder
and renamed into place, so concurrent builders never see a partial library, and the
sha256 of its bytes is kept beside it (``<key>.so.sha256``) and checked before reuse.
A compiler run is bounded (``timeout_sec``): past it the compiler and the processes it
started are killed.
"""

from __future__ import annotations

import hashlib
import logging
import os
import platform
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
from functools import lru_cache

from ..runtime.module import kernel_cache_dir, private_dir
from ..target import Target, known_cpu_vector_width, names_host
from .isa import host_arch, named_isa, target_arch

__all__ = [
    "BuildError",
    "COMPILE_TIMEOUT_SEC",
    "compile_shared",
    "compiler_command",
    "compiler_flags",
    "march_flag",
    "mcpu_flag",
    "run_bounded",
]

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


def compiler_command(target: Target | None = None) -> list[str]:
    """The compiler to run for ``target`` (default: the host): ``$CC`` split like a shell
    would, else ``cc``; for another architecture than the host's, ``$CROSS_CC``, else
    ``<arch>-linux-gnu-gcc`` (Debian's cross compilers)."""
    arch = _cross_arch(target)
    if arch is None:
        return shlex.split(os.environ.get("CC") or "cc")
    return shlex.split(os.environ.get("CROSS_CC") or f"{arch}-linux-gnu-gcc")


def _cross_arch(target: Target | None) -> str | None:
    """The architecture ``target`` is cross-compiled for; None for the host's."""
    if target is None or target.kind != "cpu":
        return None
    arch = target_arch(target)
    return arch if arch != host_arch() else None


def _install_hint(target: Target | None) -> str:
    """What to do when the compiler for ``target`` cannot run."""
    arch = _cross_arch(target)
    if arch is None:
        return "install one or set $CC"
    package = f"gcc-{arch.replace('_', '-')}-linux-gnu"
    return f"install it (apt-get install {package}) or set $CROSS_CC"


def compiler_flags(target: Target) -> list[str]:
    """Flags for ``target``; unknown functions and unresolved symbols are build errors."""
    cpu = mcpu_flag(target) if target_arch(target) == "aarch64" else march_flag(target)
    flags = [
        "-O3",
        cpu,
        "-fopenmp",
        "-shared",
        "-fPIC",
        "-std=gnu11",
        *SAFE_FLOAT_FLAGS,
        "-Werror=implicit-function-declaration",
    ]
    if _is_gcc(compiler_command(target)):
        flags += GCC_FAST_BUILD_FLAGS
    if sys.platform.startswith("linux"):
        flags.append("-Wl,-z,defs")
    return flags


#: LLVM's names of aarch64 extensions (``-mattr=+dotprod``) -> GCC's feature modifiers
_GCC_AARCH64_FEATURES = {"neon": "simd", "fullfp16": "fp16", "fp-armv8": "fp", "crypto": "crypto"}
#: the extensions of the ISA record that a substitute ``-march`` names
_SUBSTITUTE_FEATURES = ("dotprod", "i8mm", "bf16", "sve", "sve2")


def mcpu_flag(target: Target) -> str:
    """The CPU flag of an aarch64 target: GCC's aarch64 back end takes ``-mcpu=<name>``
    (not ``-march``), with ``-mattr``'s extensions as feature modifiers
    (``-mcpu=neoverse-n1+nodotprod``).

    ``generic`` is ``-march=armv8-a`` (``armv8.2-a`` with extensions added:
    ``-mattr=+dotprod`` gives ``-march=armv8.2-a+dotprod``). A CPU the compiler does not
    know (GCC 12 and ``apple-m1``) becomes ``-march=armv8.2-a`` with the extensions of
    its ISA record, with a warning.

    Raises:
        BuildError: a name that is no aarch64 CPU the compiler or the ISA table knows.
    """
    mcpu = str(target.mcpu)
    mattr = tuple(getattr(target, "mattr", ()) or ())
    mods = "".join(_gcc_feature(m) for m in mattr)
    adds = any(not m.startswith("-") for m in mattr)  # extensions beyond ARMv8.0
    if mcpu in ("generic", "generic-aarch64"):
        return f"-march={'armv8.2-a' if adds else 'armv8-a'}{mods}"
    if mcpu == "native" and host_arch() == "aarch64":
        return f"-mcpu=native{mods}"
    cmd = tuple(compiler_command(target))
    if mcpu != "native" and _accepts(cmd, f"-mcpu={mcpu}"):
        return f"-mcpu={mcpu}{mods}"
    isa = named_isa(mcpu, "aarch64")
    if isa is None:
        raise BuildError(
            f"the aarch64 compiler ({' '.join(cmd)}) does not know -mcpu={mcpu}; give the "
            "target an -mcpu it knows (e.g. neoverse-n1, cortex-a72 or generic)",
            "",
            "",
            list(cmd),
        )
    extra = "".join(f"+{e}" for e in _SUBSTITUTE_FEATURES if isa.has(e))
    substitute = f"{'armv8.2-a' if extra or adds else 'armv8-a'}{extra}{mods}"
    _warn_substitute(cmd, f"-mcpu={mcpu}", f"-march={substitute}")
    return f"-march={substitute}"


def _gcc_feature(mattr: str) -> str:
    """``+dotprod`` -> ``+dotprod``, ``-dotprod`` -> ``+nodotprod`` (GCC's spelling)."""
    name = mattr.lstrip("+-")
    name = _GCC_AARCH64_FEATURES.get(name, name)
    return f"+no{name}" if mattr.startswith("-") else f"+{name}"


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
    why = "the host's CPU" if substitute == "native" else "the same vector width"
    _warn_substitute(cmd, f"-march={mcpu}", f"-march={substitute} ({why})")
    return f"-march={substitute}"


@lru_cache(maxsize=16)
def _warn_substitute(cmd: tuple[str, ...], asked: str, substitute: str) -> None:
    _LOG.warning("%s does not know %s; building with %s", " ".join(cmd), asked, substitute)


def _accepts_march(cmd: tuple[str, ...], mcpu: str) -> bool:
    """Whether the compiler ``cmd`` accepts ``-march=mcpu`` (asked once per compiler)."""
    return _accepts(cmd, f"-march={mcpu}")


def _accepts(cmd: tuple[str, ...], flag: str) -> bool:
    """Whether the compiler ``cmd`` accepts ``flag`` (asked once per compiler)."""
    exe = shutil.which(cmd[-1]) if cmd else None
    if exe is None:
        return True  # no compiler to ask: the build reports that itself
    return _compiler_accepts(tuple(cmd), os.path.getmtime(exe), flag)


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


#: Seconds a compiler run may take by default before it is killed.
COMPILE_TIMEOUT_SEC = 300.0


def compile_shared(
    source: str,
    flags: list[str],
    cache_dir: str | None = None,
    *,
    timeout_sec: float | None = COMPILE_TIMEOUT_SEC,
    target: Target | None = None,
    suffix: str = ".so",
) -> str:
    """Compile ``source`` into a shared library; return its path (cached).

    Args:
        source: the C source.
        flags: the compiler's flags (``-o`` and ``-lm`` are added).
        cache_dir: the cache folder (default: :func:`kernel_cache_dir`); made private
            (0700), and refused for a private temporary one when another user owns it.
        timeout_sec: seconds the compiler may run (None: no limit); past them it is
            killed with every process it started (``cc1``, ``as``, ``ld``).
        target: the target whose compiler runs (:func:`compiler_command`; default: the
            host's).
        suffix: the cached file's suffix (an executable is cached as well as a library).

    Raises:
        BuildError: the compiler is missing, fails or times out; carries source and output.
    """
    cmd = compiler_command(target)
    if not cmd:
        raise BuildError("$CC is set but empty; set it to a C compiler", source, "", cmd)
    key = hashlib.sha256(
        "\0".join([source, " ".join(flags), _identity(cmd, flags)]).encode()
    ).hexdigest()[:32]
    cache_dir = private_dir(cache_dir) if cache_dir else kernel_cache_dir()
    final = os.path.join(cache_dir, f"{key}{suffix}")
    if _intact(final):
        return final
    # A folder per writer, the writer's pid in its name: what a build killed mid-way
    # (kill -9 cannot be cleaned up after) leaves is recognised and removed by the next
    # LocalBuilder. The source's name is the same in every folder, so that writers of one
    # key write byte-identical libraries (GCC records the file's name in the library).
    work = tempfile.mkdtemp(dir=cache_dir, prefix=f".ms-build-{os.getpid()}-")
    try:
        src_path, out_path = os.path.join(work, "kernel.c"), os.path.join(work, "kernel.out")
        with open(src_path, "w") as f:
            f.write(source)
        full = [*cmd, *flags, src_path, "-o", out_path, "-lm"]
        proc = _run_compiler(full, timeout_sec, source, target)
        output = (proc.stdout + proc.stderr).strip()
        if proc.returncode != 0 or not os.path.exists(out_path):
            raise BuildError.failed("C", proc.returncode, full, source, output)
        digest = _sha256_file(out_path)
        os.replace(out_path, final)
        _write_atomic(final + ".sha256", digest + "\n", work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return final


def _intact(path: str) -> bool:
    """Whether the cached library ``path`` exists with the content hash written beside
    it; a library whose bytes changed since is removed, with a warning."""
    try:
        with open(path + ".sha256") as f:
            expected = f.read().strip()
    except FileNotFoundError:
        return False  # not built here yet, or a writer between its rename and its hash
    try:
        actual = _sha256_file(path)
    except FileNotFoundError:
        return False
    if actual == expected:
        return True
    _LOG.warning(
        "the cached library %s does not match its recorded sha256 (changed since it was "
        "built); building it again",
        path,
    )
    return False


def _sha256_file(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _write_atomic(path: str, text: str, work: str) -> None:
    """Write ``text`` to ``path`` through a file in the folder ``work`` and a rename."""
    tmp = os.path.join(work, os.path.basename(path))
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def _run_compiler(
    cmd: list[str], timeout_sec: float | None, source: str, target: Target | None
) -> subprocess.CompletedProcess:
    """Run the compiler command ``cmd``, bounded by ``timeout_sec``.

    Raises:
        BuildError: the compiler cannot start or runs past the deadline (then it and its
            children are killed).
    """
    try:
        return run_bounded(cmd, timeout_sec)
    except subprocess.TimeoutExpired as err:
        raise BuildError(
            f"the C compiler timed out after {timeout_sec:g} s (killed with its children) "
            f"running: {' '.join(shlex.quote(c) for c in cmd)}",
            source,
            _text(err.stdout) + _text(err.stderr),
            cmd,
        ) from None
    except OSError as err:
        arch = _cross_arch(target)
        what = f"{arch} cross compiler" if arch else "C compiler"
        raise BuildError(
            f"cannot run the {what} {cmd[0]!r} ({err.strerror}): {_install_hint(target)}",
            source,
            str(err),
            cmd,
        ) from None


def run_bounded(cmd: list[str], timeout_sec: float | None) -> subprocess.CompletedProcess:
    """Run ``cmd`` (stdin empty, output captured as text); past ``timeout_sec`` kill it
    and every process it started, and raise ``subprocess.TimeoutExpired``.

    The command stays in the caller's process group, so that a builder worker killed
    with its group (:mod:`metaschedule.worker`) takes its compiler along; the deadline
    kills the command's own process tree (:func:`_kill_tree`). An interrupt (Ctrl-C)
    kills the tree too.

    Raises:
        OSError: the command cannot start.
        subprocess.TimeoutExpired: past the deadline (with the output so far).
    """
    with subprocess.Popen(
        cmd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",
    ) as proc:
        try:
            out, err = proc.communicate(timeout=timeout_sec)
        except subprocess.TimeoutExpired:
            _kill_tree(proc.pid)
            out, err = _drain(proc)
            raise subprocess.TimeoutExpired(cmd, timeout_sec or 0, out, err) from None
        except BaseException:
            _kill_tree(proc.pid)
            raise
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def _drain(proc: subprocess.Popen) -> tuple[str, str]:
    """What a killed process wrote (bounded: a daemon it started may hold the pipes)."""
    try:
        return proc.communicate(timeout=5)
    except subprocess.TimeoutExpired:
        return "", ""


def _kill_tree(pid: int) -> None:
    """SIGKILL ``pid`` and its descendants. Each is stopped first (SIGSTOP), so that none
    starts another process while the tree is collected."""
    tree = {pid}
    _signal(pid, signal.SIGSTOP)
    while True:
        found = {child for child, parent in _parent_pids().items() if parent in tree} - tree
        if not found:
            break
        for child in found:
            _signal(child, signal.SIGSTOP)
        tree |= found
    for p in tree:
        _signal(p, signal.SIGKILL)


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _parent_pids() -> dict[int, int]:
    """Every process's parent: from /proc, else from ``ps`` (empty if neither works)."""
    out: dict[int, int] = {}
    try:
        names = [n for n in os.listdir("/proc") if n.isdigit()]
    except OSError:
        names = []
    for name in names:
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()  # after "pid (comm)"
            out[int(name)] = int(fields[1])
        except (OSError, IndexError, ValueError):
            continue
    if out:
        return out
    try:
        text = subprocess.run(
            ["ps", "-A", "-o", "pid=,ppid="], capture_output=True, text=True, timeout=10
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return out
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
            out[int(parts[0])] = int(parts[1])
    return out


def _text(data: str | bytes | None) -> str:
    if data is None:
        return ""
    return data if isinstance(data, str) else data.decode(errors="replace")
