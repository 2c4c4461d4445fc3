"""Built CUDA modules: the source, PTX, cubin and launch plan, runnable where a GPU is.

A :class:`CudaModule` is what ``ms.build(mod, "cuda ...")`` returns. It always carries
the generated CUDA C (``source``), ``ptx``, the ``cubin`` and ``ptxas``'s report per
kernel (``resources``: registers, shared memory, spills), and exports to one JSON file
that :func:`load_module` reads back. Calling or timing it needs an NVIDIA GPU and its
driver (``libcuda.so.1``), used through the CUDA driver API with ``ctypes``: each
function copies its arrays to the device, launches its kernels in order, and copies the
written arrays back; timing uses CUDA events around ``number`` launches. On a machine
without a GPU those calls raise :class:`CudaUnavailableError` with one clear line.
"""

from __future__ import annotations

import ctypes
import json
import os
from collections.abc import Callable
from functools import lru_cache
from typing import Any

import numpy as np

from ..target import Target
from .timer import BenchmarkResult

__all__ = ["CudaModule", "CudaUnavailableError", "cuda_unavailable_reason", "load_cuda_module"]

FORMAT = "metaschedule-cuda-1"


class CudaUnavailableError(RuntimeError):
    """This machine cannot run CUDA kernels (no driver, or no GPU)."""


class CudaModule:
    """A built CUDA module (see the module docstring).

    Args:
        metadata: the target and, per function, its parameters, workspace and kernels.
        source: the CUDA C.
        ptx, cubin: nvcc's outputs for the target's arch.
        resources: per kernel symbol, ``ptxas`` resource usage (a dict).
    """

    def __init__(
        self,
        metadata: dict[str, Any],
        source: str,
        ptx: str,
        cubin: bytes,
        resources: dict[str, dict[str, int]],
    ):
        self.metadata = metadata
        self.target = Target.from_json(metadata["target"])
        self.source = source
        self.ptx = ptx
        self.cubin = cubin
        self.resources = resources
        self._functions = {f["name"]: f for f in metadata["functions"]}
        self._loaded: Any = None

    # what it is ------------------------------------------------------------------------
    @property
    def function_names(self) -> list[str]:
        return list(self._functions)

    @property
    def entry_name(self) -> str:
        return "main" if "main" in self._functions else next(iter(self._functions))

    def get_source(self, fmt: str = "cu") -> str:
        """The CUDA C (``"cu"``) or the PTX (``"ptx"``)."""
        if fmt in ("cu", "cuda", ""):
            return self.source
        if fmt == "ptx":
            return self.ptx
        raise ValueError(f"get_source: format must be 'cu' or 'ptx', got {fmt!r}")

    def export_library(self, path: str | os.PathLike) -> None:
        """Write the module to one JSON file (``load_module`` reads it back)."""
        payload = {
            "format": FORMAT,
            "metadata": self.metadata,
            "source": self.source,
            "ptx": self.ptx,
            "cubin": self.cubin.hex(),
            "resources": self.resources,
        }
        tmp = f"{os.fspath(path)}.tmp{os.getpid()}"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(payload, f)
        os.replace(tmp, path)

    # running ---------------------------------------------------------------------------
    def __call__(self, *arrays: np.ndarray) -> None:
        self.get_function(self.entry_name)(*arrays)

    def get_function(self, name: str) -> Callable[..., None]:
        info = self._function_info(name)

        def run(*arrays: np.ndarray) -> None:
            self._run(info, arrays, number=1)

        return run

    def time_evaluator(
        self,
        func_name: str = "main",
        dev: object = None,
        number: int = 3,
        repeat: int = 1,
        min_repeat_ms: int = 0,
        enable_cpu_cache_flush: bool = False,
    ) -> Callable[..., BenchmarkResult]:
        """Like the CPU module's: seconds per call of the kernels (CUDA events)."""
        info = self._function_info(func_name if func_name in self._functions else self.entry_name)

        def evaluate(*arrays: np.ndarray) -> BenchmarkResult:
            results = []
            for _ in range(repeat):
                n = number
                secs = self._run(info, arrays, number=n)
                while min_repeat_ms and secs * n * 1e3 < min_repeat_ms and n < 1 << 20:
                    n *= 2
                    secs = self._run(info, arrays, number=n)
                results.append(secs)
            return BenchmarkResult(tuple(results))

        return evaluate

    def _function_info(self, name: str) -> dict[str, Any]:
        if name not in self._functions:
            raise KeyError(f"no function {name!r}; the module has {self.function_names}")
        return self._functions[name]

    def _run(self, info: dict[str, Any], arrays: tuple[np.ndarray, ...], number: int) -> float:
        """Run a function's kernels ``number`` times; seconds per run of the kernels."""
        driver = _driver()
        if self._loaded is None:
            self._loaded = driver.load(self.cubin)
        params = info["params"]
        if len(arrays) != len(params):
            raise TypeError(
                f"function {info['name']} takes {len(params)} arrays, got {len(arrays)}"
            )
        device: dict[str, int] = {}
        try:
            for p, a in zip(params, arrays):
                if a.shape != tuple(p["shape"]) or str(a.dtype) != p["dtype"]:
                    raise ValueError(
                        f"argument {p['name']}: expected {p['dtype']}"
                        f"{tuple(p['shape'])}, got {a.dtype}{a.shape}"
                    )
                device[p["name"]] = driver.to_device(np.ascontiguousarray(a))
            for name, dtype, numel in info["workspace"]:
                device[name] = driver.alloc(max(1, numel) * np.dtype(dtype).itemsize)
            kernels = [(driver.function(self._loaded, k["symbol"]), k) for k in info["kernels"]]

            def launch_all() -> None:
                for fn, k in kernels:
                    driver.launch(fn, k["grid"], k["block"], [device[a] for a in k["args"]])

            secs = driver.time(launch_all, number)
            for p, a in zip(params, arrays):
                if p["written"]:
                    driver.to_host(device[p["name"]], a)
            return secs
        finally:
            for ptr in device.values():
                driver.free(ptr)


def load_cuda_module(path: str | os.PathLike) -> CudaModule:
    """Read a module written by :meth:`CudaModule.export_library`."""
    with open(path, encoding="utf-8") as f:
        payload = json.load(f)
    if payload.get("format") != FORMAT:
        raise ValueError(f"{path} is not a metaschedule CUDA module")
    return CudaModule(
        payload["metadata"],
        payload["source"],
        payload["ptx"],
        bytes.fromhex(payload["cubin"]),
        payload["resources"],
    )


def cuda_unavailable_reason() -> str | None:
    """Why CUDA kernels cannot run here, or None when they can."""
    try:
        _driver()
    except CudaUnavailableError as err:
        return str(err)
    return None


# ------------------------------------------------------------------------- driver API
class _Driver:
    """The few CUDA driver API calls a module needs (ctypes; device 0, primary context)."""

    def __init__(self) -> None:
        try:
            self.lib = ctypes.CDLL("libcuda.so.1")
        except OSError:
            raise CudaUnavailableError(
                "no CUDA driver on this machine (libcuda.so.1 not found): CUDA modules build "
                "here but run only where an NVIDIA GPU is, e.g. through the RPC runner"
            ) from None
        self._check(self.lib.cuInit(0), "cuInit")
        count = ctypes.c_int()
        self._check(self.lib.cuDeviceGetCount(ctypes.byref(count)), "cuDeviceGetCount")
        if count.value == 0:
            raise CudaUnavailableError("the CUDA driver sees no GPU on this machine")
        dev = ctypes.c_int()
        self._check(self.lib.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
        self.ctx = ctypes.c_void_p()
        self._check(
            self.lib.cuDevicePrimaryCtxRetain(ctypes.byref(self.ctx), dev),
            "cuDevicePrimaryCtxRetain",
        )
        self._check(self.lib.cuCtxSetCurrent(self.ctx), "cuCtxSetCurrent")

    def _check(self, status: int, what: str) -> None:
        if status != 0:
            name = ctypes.c_char_p()
            self.lib.cuGetErrorName(status, ctypes.byref(name))
            text = name.value.decode() if name.value else str(status)
            raise CudaUnavailableError(f"{what} failed: {text}")

    def load(self, cubin: bytes) -> ctypes.c_void_p:
        module = ctypes.c_void_p()
        self._check(self.lib.cuModuleLoadData(ctypes.byref(module), cubin), "cuModuleLoadData")
        return module

    def function(self, module: ctypes.c_void_p, name: str) -> ctypes.c_void_p:
        fn = ctypes.c_void_p()
        self._check(
            self.lib.cuModuleGetFunction(ctypes.byref(fn), module, name.encode()),
            f"cuModuleGetFunction({name})",
        )
        return fn

    def alloc(self, nbytes: int) -> int:
        ptr = ctypes.c_uint64()
        self._check(
            self.lib.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(nbytes)), "cuMemAlloc"
        )
        return ptr.value

    def free(self, ptr: int) -> None:
        self.lib.cuMemFree_v2(ctypes.c_uint64(ptr))

    def to_device(self, a: np.ndarray) -> int:
        ptr = self.alloc(max(1, a.nbytes))
        self._check(
            self.lib.cuMemcpyHtoD_v2(
                ctypes.c_uint64(ptr), a.ctypes.data_as(ctypes.c_void_p), ctypes.c_size_t(a.nbytes)
            ),
            "cuMemcpyHtoD",
        )
        return ptr

    def to_host(self, ptr: int, a: np.ndarray) -> None:
        out = np.empty_like(a, order="C")
        self._check(
            self.lib.cuMemcpyDtoH_v2(
                out.ctypes.data_as(ctypes.c_void_p), ctypes.c_uint64(ptr), ctypes.c_size_t(a.nbytes)
            ),
            "cuMemcpyDtoH",
        )
        a[...] = out

    def launch(
        self, fn: ctypes.c_void_p, grid: list[int], block: list[int], args: list[int]
    ) -> None:
        values = [ctypes.c_uint64(a) for a in args]
        params = (ctypes.c_void_p * len(values))(
            *[ctypes.cast(ctypes.byref(v), ctypes.c_void_p) for v in values]
        )
        self._check(
            self.lib.cuLaunchKernel(
                fn,
                *[ctypes.c_uint(g) for g in grid],
                *[ctypes.c_uint(b) for b in block],
                ctypes.c_uint(0),
                None,
                params,
                None,
            ),
            "cuLaunchKernel",
        )

    def time(self, body: Callable[[], None], number: int) -> float:
        start, stop = ctypes.c_void_p(), ctypes.c_void_p()
        self._check(self.lib.cuEventCreate(ctypes.byref(start), 0), "cuEventCreate")
        self._check(self.lib.cuEventCreate(ctypes.byref(stop), 0), "cuEventCreate")
        body()  # warm-up
        self._check(self.lib.cuCtxSynchronize(), "a kernel")
        self.lib.cuEventRecord(start, None)
        for _ in range(number):
            body()
        self.lib.cuEventRecord(stop, None)
        self._check(self.lib.cuEventSynchronize(stop), "a kernel")
        ms = ctypes.c_float()
        self.lib.cuEventElapsedTime(ctypes.byref(ms), start, stop)
        self.lib.cuEventDestroy_v2(start)
        self.lib.cuEventDestroy_v2(stop)
        return ms.value / 1e3 / number


@lru_cache(maxsize=1)
def _driver_or_error() -> _Driver | CudaUnavailableError:
    try:
        return _Driver()
    except CudaUnavailableError as err:
        return err


def _driver() -> _Driver:
    got = _driver_or_error()
    if isinstance(got, CudaUnavailableError):
        raise got
    return got
