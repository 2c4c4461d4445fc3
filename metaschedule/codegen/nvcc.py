"""Compiling CUDA C with ``nvcc``: PTX and cubin, and ``ptxas``'s resource report.

``nvcc`` is ``$NVCC``, else ``nvcc`` on the PATH. Results are cached like the C back
end's libraries, under the hash of (source, arch, nvcc version), in the kernel cache;
entries are written to a temporary name and renamed, so concurrent builders never
read a half-written file.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from functools import lru_cache

from ..runtime.module import kernel_cache_dir
from .compiler import BuildError

__all__ = ["CudaBinary", "KernelResources", "compile_cuda", "nvcc_path", "parse_ptxas"]


@dataclass(frozen=True)
class KernelResources:
    """What ``ptxas -v`` says one kernel uses."""

    registers: int = 0
    shared_bytes: int = 0
    spill_stores: int = 0
    spill_loads: int = 0
    stack_bytes: int = 0
    barriers: int = 0


@dataclass(frozen=True)
class CudaBinary:
    arch: str
    ptx: str
    cubin: bytes
    resources: dict[str, KernelResources]
    log: str


def nvcc_path() -> str | None:
    """The nvcc to use, or None when there is none."""
    return os.environ.get("NVCC") or shutil.which("nvcc")


@lru_cache(maxsize=4)
def _nvcc_version(path: str) -> str:
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60)
        return out.stdout.strip().splitlines()[-1] if out.stdout.strip() else path
    except (OSError, subprocess.SubprocessError):
        return path


_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_PROPS = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")
_BARRIERS = re.compile(r"used (\d+) barriers")


def parse_ptxas(log: str) -> dict[str, KernelResources]:
    """Per kernel, the resources in a ``ptxas -v`` log."""
    out: dict[str, dict[str, int]] = {}
    current: str | None = None
    for line in log.splitlines():
        m = _ENTRY.search(line)
        if m:
            current = m.group(1)
            out[current] = {}
            continue
        if current is None:
            continue
        m = _PROPS.search(line)
        if m:
            out[current].update(
                stack_bytes=int(m[1]), spill_stores=int(m[2]), spill_loads=int(m[3])
            )
        m = _USED.search(line)
        if m:
            out[current]["registers"] = int(m[1])
            sm = _SMEM.search(line)
            if sm:
                out[current]["shared_bytes"] = int(sm[1])
            bar = _BARRIERS.search(line)
            if bar:
                out[current]["barriers"] = int(bar[1])
    return {name: KernelResources(**fields) for name, fields in out.items()}


def compile_cuda(source: str, arch: str, cache_dir: str | None = None) -> CudaBinary:
    """Compile CUDA C to PTX and a cubin for ``arch`` (e.g. ``"sm_80"``); cached.

    Raises:
        BuildError: nvcc is missing or fails; the message carries its output.
    """
    nvcc = nvcc_path()
    if nvcc is None:
        raise BuildError(
            "nvcc not found: install the CUDA toolkit or set $NVCC", source, "", ["nvcc"]
        )
    key = hashlib.sha256("\0".join([source, arch, _nvcc_version(nvcc)]).encode()).hexdigest()[:32]
    cache_dir = cache_dir or kernel_cache_dir()
    os.makedirs(cache_dir, exist_ok=True)
    final = os.path.join(cache_dir, f"{key}.cuda.json")
    if os.path.exists(final):
        with open(final, encoding="utf-8") as f:
            return _from_json(json.load(f))
    with tempfile.TemporaryDirectory(prefix="ms-nvcc-") as tmp:
        src = os.path.join(tmp, "kernel.cu")
        with open(src, "w", encoding="utf-8") as f:
            f.write(source)
        cubin_path, ptx_path = os.path.join(tmp, "kernel.cubin"), os.path.join(tmp, "kernel.ptx")
        log = _run(
            [nvcc, f"-arch={arch}", "-cubin", "-Xptxas", "-v", "-o", cubin_path, src], source
        )
        _run([nvcc, f"-arch={arch}", "-ptx", "-o", ptx_path, src], source)
        with open(cubin_path, "rb") as f:
            cubin = f.read()
        with open(ptx_path, encoding="utf-8") as f:
            ptx = f.read()
    binary = CudaBinary(arch, ptx, cubin, parse_ptxas(log), log)
    fd, tmp_path = tempfile.mkstemp(dir=cache_dir, prefix=".ms-nvcc-", suffix=".json")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(_to_json(binary), f)
    os.replace(tmp_path, final)
    return binary


def _run(cmd: list[str], source: str) -> str:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    except OSError as err:
        raise BuildError(f"cannot run nvcc ({err.strerror})", source, str(err), cmd) from None
    except subprocess.TimeoutExpired:
        raise BuildError("nvcc took more than 300 s", source, "", cmd) from None
    output = (proc.stdout + proc.stderr).strip()
    if proc.returncode != 0:
        raise BuildError.failed("CUDA", proc.returncode, cmd, source, output)
    return output


def _to_json(b: CudaBinary) -> dict:
    return {
        "arch": b.arch,
        "ptx": b.ptx,
        "cubin": b.cubin.hex(),
        "log": b.log,
        "resources": {k: vars(v) for k, v in b.resources.items()},
    }


def _from_json(obj: dict) -> CudaBinary:
    return CudaBinary(
        obj["arch"],
        obj["ptx"],
        bytes.fromhex(obj["cubin"]),
        {k: KernelResources(**v) for k, v in obj["resources"].items()},
        obj["log"],
    )
