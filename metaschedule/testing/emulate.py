"""Run a cross-built kernel under qemu-user: ``ms.testing.run_emulated(lib, *arrays)``.

A module built for aarch64 on an x86 machine (a
:class:`~metaschedule.runtime.cross_module.CrossModule`) cannot be called here. To check
what it computes, :func:`run_emulated` runs it in ``qemu-aarch64 -L
/usr/aarch64-linux-gnu`` (Debian's ``qemu-user`` and the cross compiler's libraries)
through a small C harness, cross-compiled once and kept in the kernel cache: the harness
``dlopen``\\ s the library, reads each argument from a file this process wrote, calls the
kernel's entry symbol with the array of ``void*`` argument pointers a native call passes
(:class:`~metaschedule.runtime.module.Function`; it returns an ``int32_t`` status), and
writes every argument back. Each run is bounded by ``timeout_sec``.

On a host of the library's own architecture the harness runs without an emulator.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from typing import Any

import numpy as np

from ..codegen.compiler import compile_shared, run_bounded
from ..codegen.debug import OOB_STATUS, oob_message
from ..codegen.isa import host_arch, target_arch
from ..runtime.aligned import ALLOC_ALIGNMENT
from ..runtime.module import Module, load_module

__all__ = ["EmulationError", "run_emulated"]

#: the harness; argv: library, symbol, then a file and a byte count per argument
HARNESS_C = r"""
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef int32_t (*ms_kernel_t)(void**);

static int transfer(const char* path, void* data, size_t bytes, int out) {
  FILE* f = fopen(path, out ? "wb" : "rb");
  size_t done = f ? (out ? fwrite(data, 1, bytes, f) : fread(data, 1, bytes, f)) : 0;
  if (f) fclose(f);
  if (done == bytes) return 0;
  fprintf(stderr, "harness: cannot %s %s\n", out ? "write" : "read", path);
  return 1;
}

int main(int argc, char** argv) {
  if (argc < 3 || (argc - 3) % 2) {
    fprintf(stderr, "usage: harness LIBRARY SYMBOL [FILE BYTES]...\n");
    return 2;
  }
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) { fprintf(stderr, "harness: %s\n", dlerror()); return 2; }
  ms_kernel_t kernel = (ms_kernel_t)dlsym(lib, argv[2]);
  if (!kernel) { fprintf(stderr, "harness: %s\n", dlerror()); return 2; }
  int n = (argc - 3) / 2;
  void** args = calloc(n ? n : 1, sizeof(void*));
  for (int i = 0; i < n; ++i) {
    size_t bytes = strtoull(argv[4 + 2 * i], NULL, 10);
    args[i] = aligned_alloc(@ALIGN@, (bytes / @ALIGN@ + 1) * @ALIGN@);
    if (!args[i] || transfer(argv[3 + 2 * i], args[i], bytes, 0)) return 2;
  }
  int32_t status = kernel(args);
  for (int i = 0; i < n; ++i)
    if (transfer(argv[3 + 2 * i], args[i], strtoull(argv[4 + 2 * i], NULL, 10), 1)) return 2;
  printf("status %d\n", (int)status);
  int32_t (*site)(void) = (int32_t (*)(void))dlsym(lib, "ms_debug_oob_site");
  int64_t (*index)(void) = (int64_t (*)(void))dlsym(lib, "ms_debug_oob_index");
  if (status != 0 && site && index) printf("oob %d %lld\n", (int)site(), (long long)index());
  return 0;
}
""".replace("@ALIGN@", str(ALLOC_ALIGNMENT))

#: the harness's flags (glibc before 2.34 keeps dlopen in libdl)
_HARNESS_FLAGS = ["-O2", "-std=gnu11", "-Wl,--no-as-needed", "-ldl"]


class EmulationError(RuntimeError):
    """The emulator is missing, or the emulated run failed or timed out."""


def run_emulated(
    lib: Module | str | os.PathLike,
    *arrays: np.ndarray,
    func_name: str | None = None,
    timeout_sec: float | None = 300.0,
    emulator: list[str] | None = None,
    sysroot: str = "/usr/aarch64-linux-gnu",
) -> list[np.ndarray]:
    """Call a cross-built kernel on ``arrays`` under qemu-user; return every argument
    after the call (new arrays: the kernel may write any of them; ``arrays`` are not
    changed).

    Args:
        lib: a module built for aarch64 (or the path of its library).
        arrays: the arguments, checked as a native call checks them.
        func_name: the function to call (default: ``main``, or the only one).
        timeout_sec: seconds the emulated run may take (None: no limit); past them the
            emulator is killed.
        emulator: the command that runs an aarch64 program (default:
            ``["qemu-aarch64", "-L", sysroot]``; none on an aarch64 host).
        sysroot: the aarch64 libraries' root for qemu's ``-L``.

    Raises:
        EmulationError: qemu or the aarch64 libraries are missing, the run failed (its
            output in the message) or timed out.
        IndexError: an out-of-bounds access in a ``debug=True`` build.
        RuntimeError: the kernel returned a failure status.
        BuildError: the harness cannot be cross-compiled.
    """
    module = lib if isinstance(lib, Module) else load_module(lib)
    fn = module[func_name or module.entry_name]
    fn.pack_args(arrays)  # the checks of a native call: count, dtype, shape, layout
    runner = _emulator(target_arch(module.target), sysroot) if emulator is None else emulator
    harness = compile_shared(HARNESS_C, _HARNESS_FLAGS, target=module.target, suffix="")
    with tempfile.TemporaryDirectory(prefix="ms-emulate-") as tmp:
        files = [os.path.join(tmp, f"arg{i}.bin") for i in range(len(arrays))]
        argv: list[str] = []
        for path, arr in zip(files, arrays):
            arr.tofile(path)
            argv += [path, str(arr.nbytes)]
        cmd = [*runner, harness, os.path.abspath(module.path), fn.symbol, *argv]
        try:
            proc = run_bounded(cmd, timeout_sec)
        except subprocess.TimeoutExpired:
            raise EmulationError(
                f"the emulated run of {fn.name} took more than {timeout_sec:g} s and was "
                f"killed ({' '.join(cmd[:2])}); give a large kernel a larger timeout_sec"
            ) from None
        except OSError as err:
            raise EmulationError(f"cannot run {cmd[0]!r}: {err.strerror}") from None
        status = _status(proc, fn.name, cmd)
        outs = [np.fromfile(p, a.dtype).reshape(a.shape) for p, a in zip(files, arrays)]
    _raise_for_status(module, fn.name, status, proc.stdout)
    return outs


def _emulator(arch: str, sysroot: str) -> list[str]:
    """The command prefix that runs an ``arch`` program here."""
    if arch == host_arch():
        return []
    qemu = shutil.which(f"qemu-{arch}") or shutil.which(f"qemu-{arch}-static")
    if qemu is None:
        raise EmulationError(
            f"qemu-{arch} is not installed: install it (apt-get install qemu-user) to run "
            f"{arch} kernels on this {host_arch()} machine, or run them on an {arch} machine"
        )
    if not os.path.isdir(sysroot):
        raise EmulationError(
            f"no {arch} libraries at {sysroot}: install them (apt-get install "
            f"gcc-{arch.replace('_', '-')}-linux-gnu) or pass sysroot="
        )
    return [qemu, "-L", sysroot]


def _status(proc: subprocess.CompletedProcess, name: str, cmd: list[str]) -> int:
    """The kernel's status as the harness printed it."""
    for line in proc.stdout.splitlines():
        if line.startswith("status "):
            return int(line.split()[1])
    output = (proc.stdout + proc.stderr).strip()[-3000:] or "(no output)"
    raise EmulationError(
        f"the emulated run of {name} failed (exit code {proc.returncode}) running: "
        f"{' '.join(cmd[:4])} ...\n{output}"
    )


def _raise_for_status(module: Module, name: str, status: int, stdout: str) -> None:
    """Raise what a native call raises for a kernel's failure ``status``."""
    if status == 0:
        return
    sites: Any = module.metadata.get("debug_sites")
    oob = [line.split() for line in stdout.splitlines() if line.startswith("oob ")]
    if status == OOB_STATUS and sites is not None and oob:
        raise IndexError(oob_message(name, sites[int(oob[0][1])], int(oob[0][2])))
    raise RuntimeError(f"kernel {name} failed with status {status} (an allocation failed)")
