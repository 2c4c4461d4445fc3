"""Built modules: a shared library loaded with ctypes, called on numpy arrays.

Every library built by :func:`metaschedule.build` embeds two C string constants:
``__metaschedule_metadata`` (JSON: the target and, per function, its C symbol and
parameter names, dtypes and shapes) and ``__metaschedule_source`` (the kernel C
source), so :func:`load_module` needs nothing but the ``.so``.

Calls check every argument (count, ndarray, dtype, shape, C-contiguity, writeability
of outputs, no aliasing with an output) and raise ``TypeError``/``ValueError``
naming the parameter, so a bad call never reaches the kernel.
"""

from __future__ import annotations

import atexit
import ctypes
import functools
import hashlib
import json
import logging
import os
import shutil
import stat
import tempfile
from collections.abc import Callable
from typing import Any

import numpy as np

from ..schedule.prepacked import PackedArg
from ..target import Target
from .cuda_module import load_cuda_module
from .pack import pack_weights, packed_from_metadata
from .timer import BenchmarkResult, default_flush_bytes

METADATA_SYMBOL = "__metaschedule_metadata"
SOURCE_SYMBOL = "__metaschedule_source"
METADATA_VERSION = 1

__all__ = [
    "Function",
    "Module",
    "UnsupportedIsaError",
    "embed_c",
    "kernel_cache_dir",
    "load_module",
    "private_dir",
]

_LOG = logging.getLogger(__name__)


class UnsupportedIsaError(RuntimeError):
    """A module built for an ISA this machine does not run (AVX-512 code on an AVX2
    host, aarch64 code on x86) was called: it would die of an illegal instruction."""


def kernel_cache_dir() -> str:
    """Where built libraries live: ``$XDG_CACHE_HOME/metaschedule/kernels`` or
    ``~/.cache/metaschedule/kernels`` (created on demand, private: see
    :func:`private_dir`)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return private_dir(os.path.join(base, "metaschedule", "kernels"))


def private_dir(path: str) -> str:
    """``path``, created with mode 0700 where missing; or, when another user owns it, a
    private temporary folder for this process, with a warning.

    Libraries in the kernel cache are loaded into this process: whoever owns the folder
    could put code there (the content hashes beside the libraries would be theirs too).
    """
    os.makedirs(path, mode=0o700, exist_ok=True)
    info = os.stat(path)
    getuid = getattr(os, "getuid", None)  # (Windows: no owners to compare)
    if getuid is None:
        return path
    if info.st_uid != getuid():
        return _private_substitute(path, info.st_uid)
    if info.st_mode & 0o022:
        _tighten(path, info.st_mode)
    return path


def _tighten(path: str, mode: int) -> None:
    """Make ``path`` (ours, but writable by others) private, and drop the libraries and
    hashes found in it: anyone could have put them there."""
    os.chmod(path, 0o700)
    dropped = 0
    for name in os.listdir(path):
        if name.endswith((".so", ".so.sha256")):
            try:
                os.unlink(os.path.join(path, name))
                dropped += 1
            except OSError:
                pass
    _LOG.warning(
        "the kernel cache %s was writable by other users (mode %o): made private (0700), "
        "and its %d cached libraries and hashes removed (they will be built again)",
        path,
        stat.S_IMODE(mode),
        dropped,
    )


@functools.cache
def _private_substitute(refused: str, owner: int) -> str:
    # The pid in the name: a LocalBuilder removes the folders of dead processes.
    folder = tempfile.mkdtemp(prefix=f"metaschedule-build-{os.getpid()}-kernels-")
    atexit.register(shutil.rmtree, folder, True)
    _LOG.warning(
        "the kernel cache %s belongs to another user (uid %d), who could replace the "
        "libraries this process loads; using the private folder %s instead (point "
        "XDG_CACHE_HOME at a folder of yours to keep kernels between runs)",
        refused,
        owner,
        folder,
    )
    return folder


def embed_c(metadata: dict[str, Any], source: str) -> str:
    """C definitions of the metadata and source string constants."""
    return (
        "\n// ---- metaschedule runtime: embedded metadata and source ----\n"
        f"const char {METADATA_SYMBOL}[] =\n{_c_string(json.dumps(metadata))};\n"
        f"const char {SOURCE_SYMBOL}[] =\n{_c_string(source)};\n"
    )


def _c_string(text: str) -> str:
    out = []
    for line in text.encode().split(b"\n"):
        chars = []
        for byte in line:
            c = chr(byte)
            if c in '"\\':
                chars.append("\\" + c)
            elif 32 <= byte < 127 and c != "?":
                chars.append(c)
            else:
                chars.append(f"\\{byte:03o}")
        out.append('  "' + "".join(chars) + '\\n"')
    return "\n".join(out)


# ----------------------------------------------------------------------------- functions


class Function:
    """One kernel of a module; call it with numpy arrays (outputs are written in place)."""

    def __init__(self, module: Module, index: int, info: dict[str, Any]) -> None:
        self.module = module
        self.index = index
        self.name: str = info["name"]
        self.symbol: str = info["symbol"]
        self.params: list[dict[str, Any]] = info["params"]
        #: the parameters taken pre-packed: index -> original shape and index map
        self.prepacked: dict[int, PackedArg] = packed_from_metadata(info.get("prepacked"))
        self._fn: Any = None  # stays None in a library of another architecture (not loaded)
        if module._lib is not None:
            self._fn = getattr(module._lib, self.symbol)
            self._fn.restype = ctypes.c_int32
            self._fn.argtypes = [ctypes.POINTER(ctypes.c_void_p)]

    @property
    def param_names(self) -> list[str]:
        return [p["name"] for p in self.params]

    def pack_weights(self, *args: np.ndarray) -> list[np.ndarray]:
        """The arguments with the weights this function takes pre-packed re-laid out
        (see :func:`metaschedule.runtime.pack.pack_weights`); pack once, call often."""
        return pack_weights(self, args)

    def pack_args(self, args: tuple[Any, ...]) -> ctypes.Array:
        """Check ``args`` against the parameters; return the ``void*`` array."""
        if len(args) != len(self.params):
            raise TypeError(
                f"{self.name} takes {len(self.params)} arrays "
                f"({', '.join(self.param_names)}), got {len(args)}"
            )
        for arr, p in zip(args, self.params):
            self._check(arr, p)
        self._check_aliasing(args)
        ptrs = (ctypes.c_void_p * max(1, len(args)))()
        for i, arr in enumerate(args):
            ptrs[i] = arr.__array_interface__["data"][0]
        return ptrs

    def _check(self, arr: Any, p: dict[str, Any]) -> None:
        where = f"parameter {p['name']} of {self.name}"
        if not isinstance(arr, np.ndarray):
            raise TypeError(f"{where} expects a numpy.ndarray, got {type(arr).__name__}")
        if arr.dtype != np.dtype(p["dtype"]):
            raise TypeError(f"{where} expects dtype {p['dtype']}, got {arr.dtype}")
        if tuple(arr.shape) != tuple(p["shape"]):
            k = self.params.index(p)
            if k in self.prepacked and tuple(arr.shape) == self.prepacked[k].original_shape:
                raise ValueError(
                    f"{where} is taken pre-packed, shape {tuple(p['shape'])}; got the original "
                    f"layout {arr.shape}: pack the weights once with "
                    "args = module.pack_weights(*args) (or ms.pack_weights) and call with those"
                )
            raise ValueError(f"{where} expects shape {tuple(p['shape'])}, got {arr.shape}")
        if not arr.flags.c_contiguous:
            raise ValueError(f"{where} must be C-contiguous; pass np.ascontiguousarray(x)")
        if p["written"] and not arr.flags.writeable:
            raise ValueError(f"{where} is written by the kernel but the array is read-only")

    def _check_aliasing(self, args: tuple[np.ndarray, ...]) -> None:
        for i, (a, p) in enumerate(zip(args, self.params)):
            if not p["written"] or a.size == 0:
                continue
            for j, b in enumerate(args):
                if j != i and b.size and np.may_share_memory(a, b):
                    raise ValueError(
                        f"parameter {p['name']} of {self.name} is written but shares memory "
                        f"with parameter {self.params[j]['name']}; pass separate arrays"
                    )

    def __call__(self, *args: np.ndarray) -> None:
        self.module.check_runnable()
        ptrs = self.pack_args(args)
        status = self._fn(ptrs)
        sites = self.module.metadata.get("debug_sites")
        if status != 0 and sites is not None:
            from ..codegen.debug import OOB_STATUS, oob_message  # local: a cycle, codegen->runtime

            if status == OOB_STATUS:
                lib = self.module._lib
                assert lib is not None  # the kernel ran: the library is loaded
                lib.ms_debug_oob_site.restype = ctypes.c_int32
                lib.ms_debug_oob_index.restype = ctypes.c_int64
                site, index = lib.ms_debug_oob_site(), lib.ms_debug_oob_index()
                raise IndexError(oob_message(self.name, sites[site], index))
        if status != 0:
            raise RuntimeError(
                f"kernel {self.name} failed with status {status} (an allocation failed)"
            )

    def __repr__(self) -> str:
        return f"<metaschedule Function {self.name}({', '.join(self.param_names)})>"


# ----------------------------------------------------------------------------- modules


class Module:
    """A loaded library of kernels (see the module docstring)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._lib: ctypes.CDLL | None = ctypes.CDLL(path)
        self._set_metadata(_read_cstring(self._lib, METADATA_SYMBOL))
        self._runs_here: bool | None = None
        self._why = ""
        self._timer = getattr(self._lib, "__ms_time")
        self._timer.restype = ctypes.c_int32
        self._timer.argtypes = [
            ctypes.c_int32,
            ctypes.POINTER(ctypes.c_void_p),
            ctypes.c_int32,
            ctypes.c_int32,
            ctypes.c_int32,
            ctypes.c_int32,
            ctypes.POINTER(ctypes.c_double),
            ctypes.c_int32,
            ctypes.c_int32,
            ctypes.c_int32,
            ctypes.POINTER(ctypes.c_int32),
        ]

    def _set_metadata(self, text: str | None) -> None:
        """Parse the embedded metadata ``text``; make the functions it lists."""
        if text is None:
            raise ValueError(f"{self.path} is not a metaschedule library (no {METADATA_SYMBOL})")
        self.metadata: dict[str, Any] = json.loads(text)
        version = self.metadata.get("version")
        if version != METADATA_VERSION:
            raise ValueError(f"{self.path}: unsupported metadata version {version}")
        self.target = Target.from_json(self.metadata["target"])
        self._functions = {
            info["name"]: Function(self, i, info)
            for i, info in enumerate(self.metadata["functions"])
        }

    def check_runnable(self) -> None:
        """Raise :class:`UnsupportedIsaError` when this machine cannot run the code (its
        target's ISA has an extension the host lacks, or another architecture)."""
        if self._runs_here is None:
            from ..codegen.isa import host_runs, isa_of  # local: codegen imports runtime

            self._runs_here = self.target.kind != "cpu" or host_runs(self.target)
            if not self._runs_here:
                isa, host = isa_of(self.target), isa_of(Target("cpu"))
                missing = sorted(isa.extensions - host.extensions)
                self._why = (
                    f"this module was built for {self.target.mcpu} ({isa.arch} {isa.name}); "
                    f"this machine is {host.arch} {host.name}"
                    + (f" and lacks {', '.join(missing[:6])}" if isa.arch == host.arch else "")
                    + ": build it for this machine's target (e.g. 'llvm'), or run it there"
                )
        if not self._runs_here:
            raise UnsupportedIsaError(self._why)

    @property
    def function_names(self) -> list[str]:
        return list(self._functions)

    @property
    def entry_name(self) -> str:
        if "main" in self._functions:
            return "main"
        if len(self._functions) == 1:
            return next(iter(self._functions))
        raise ValueError(
            f"module has no 'main' and several functions ({', '.join(self._functions)}); "
            "pick one with module[name]"
        )

    def get_function(self, name: str) -> Function:
        try:
            return self._functions[name]
        except KeyError:
            raise KeyError(
                f"no function {name!r} in module; it has: {', '.join(self._functions)}"
            ) from None

    __getitem__ = get_function

    def __contains__(self, name: str) -> bool:
        return name in self._functions

    def __call__(self, *args: np.ndarray) -> None:
        """Call ``main`` (or the only function)."""
        self.get_function(self.entry_name)(*args)

    def pack_weights(self, *args: np.ndarray, func_name: str | None = None) -> list[np.ndarray]:
        """The arguments of ``func_name`` (default: the entry function) with the weights it
        takes pre-packed re-laid out (see :mod:`metaschedule.runtime.pack`)."""
        return pack_weights(self, args, func_name)

    def get_source(self) -> str:
        """The C source of the kernels."""
        assert self._lib is not None
        return _read_cstring(self._lib, SOURCE_SYMBOL) or ""

    def export_library(self, path: str | os.PathLike) -> str:
        """Write a self-contained shared library to ``path`` (atomically); return the path."""
        path = os.fspath(path)
        directory = os.path.dirname(os.path.abspath(path))
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".ms-export-", suffix=".so")
        os.close(fd)
        try:
            shutil.copyfile(self.path, tmp)
            os.chmod(tmp, 0o755)
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        return path

    def time_evaluator(
        self,
        func_name: str = "main",
        dev: object = None,
        number: int = 3,
        repeat: int = 1,
        min_repeat_ms: int = 0,
        enable_cpu_cache_flush: bool = False,
        *,
        warmup: int = 1,
        num_probes: int = 3,
        max_total_ms: int = 0,
    ) -> Callable[..., BenchmarkResult]:
        """A callable timing ``func_name`` on given arrays (the protocol: :mod:`.timer`).

        Each call of the result returns a :class:`BenchmarkResult` of ``repeat`` entries
        (fewer when ``max_total_ms`` ran out), each the mean seconds per call over
        ``number`` calls (more if ``min_repeat_ms`` asks for it). ``warmup`` untimed calls
        come first; ``num_probes`` (at most 3) single calls size ``number`` by their median
        when ``min_repeat_ms`` > 0; ``max_total_ms`` > 0 bounds the timed part. With
        ``enable_cpu_cache_flush`` every call is preceded by a write pass over a buffer
        larger than the last-level cache, which costs far more than a small kernel: keep
        ``number`` small (1 to 3) then. ``dev`` is accepted for compatibility with TVM's
        signature and ignored. ``"main"`` also names the only function of a
        single-function module.
        """
        if func_name == "main" and "main" not in self._functions:
            func_name = self.entry_name
        fn = self.get_function(func_name)
        for key, value, low in (
            ("number", number, 1),
            ("repeat", repeat, 1),
            ("min_repeat_ms", min_repeat_ms, 0),
            ("warmup", warmup, 0),
            ("num_probes", num_probes, 0),
            ("max_total_ms", max_total_ms, 0),
        ):
            if not isinstance(value, int) or value < low:
                raise ValueError(f"time_evaluator: {key} must be an int >= {low}, got {value!r}")
        flush_kib = default_flush_bytes() // 1024 if enable_cpu_cache_flush else 0

        def evaluate(*args: np.ndarray) -> BenchmarkResult:
            self.check_runnable()
            ptrs = fn.pack_args(args)
            out = (ctypes.c_double * repeat)()
            info = (ctypes.c_int32 * 2)()
            status = self._timer(
                fn.index,
                ptrs,
                number,
                repeat,
                min_repeat_ms,
                flush_kib,
                out,
                warmup,
                num_probes,
                max_total_ms,
                info,
            )
            if status != 0:
                raise RuntimeError(f"timing {fn.name} failed with status {status}")
            return BenchmarkResult(tuple(out[: max(info[1], 1)]), number=int(info[0]))

        return evaluate

    def __repr__(self) -> str:
        return f"<metaschedule Module {', '.join(self._functions)} at {self.path}>"


def _read_cstring(lib: ctypes.CDLL, symbol: str) -> str | None:
    try:
        head = ctypes.c_char.in_dll(lib, symbol)
    except ValueError:
        return None
    return ctypes.string_at(ctypes.addressof(head)).decode()


# realpath -> content hash of the library this process loaded from it. The dynamic loader
# keeps libraries by path for the life of the process; this mirrors that table.
_LOADED: dict[str, str] = {}


def load_module(path: str | os.PathLike) -> Module:
    """Load a library written by ``Module.export_library`` (or a CUDA module's file); a
    library of another architecture is not loaded but read
    (:class:`~metaschedule.runtime.cross_module.CrossModule`).

    For trusted files only: a shared library runs its code in this process when loaded.

    The dynamic loader returns the library it already loaded from a path even when the
    file has been replaced since; a path whose contents changed is therefore loaded
    from a copy in the kernel cache, named by its content hash.
    """
    path = os.path.realpath(os.fspath(path))
    with open(path, "rb") as f:
        data = f.read()
    if data[:1] == b"{":  # a CUDA module's JSON file
        return load_cuda_module(path)
    from ..codegen.isa import host_arch  # local: codegen imports runtime
    from .cross_module import CrossModule, elf_arch  # local: cross_module builds on Module

    if elf_arch(data) not in (None, host_arch()):
        return CrossModule(path)
    digest = hashlib.sha256(data).hexdigest()[:32]
    if _LOADED.setdefault(path, digest) == digest:
        return Module(path)
    cached = os.path.join(kernel_cache_dir(), f"loaded-{digest}.so")
    if _digest_of(cached) != digest:  # missing, or changed since it was written
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(cached), prefix=".ms-load-", suffix=".so")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o755)
        os.replace(tmp, cached)
    return Module(cached)


def _digest_of(path: str) -> str | None:
    """The content hash :func:`load_module` names copies by; None for a missing file."""
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()[:32]
    except FileNotFoundError:
        return None
