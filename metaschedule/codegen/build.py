"""``build``: lower, generate C, compile, load (or, for another architecture, read)."""

from __future__ import annotations

import os
from typing import Any

from ..runtime.cross_module import CrossModule
from ..runtime.cuda_module import CudaModule
from ..runtime.module import METADATA_VERSION, Module, embed_c
from ..runtime.steps import steps_c_source
from ..runtime.timer import timer_c_source
from ..schedule.prepacked import prepacked_args
from ..target import Target
from ..tir.function import IRModule, PrimFunc
from ..tir.transform import GPU_LOWER_PASSES, lower
from .c_codegen import codegen_c
from .compiler import COMPILE_TIMEOUT_SEC, BuildError, compile_shared, compiler_flags
from .cuda_codegen import codegen_cuda
from .debug import DebugSites
from .isa import host_arch, target_arch
from .nvcc import compile_cuda

__all__ = ["build"]


def build(
    func_or_mod: PrimFunc | IRModule,
    target: Target | str = "cpu",
    *,
    cache_dir: str | None = None,
    debug: bool = False,
    timeout_sec: float | None = COMPILE_TIMEOUT_SEC,
) -> Module | CudaModule:
    """Compile a PrimFunc or IRModule (block form or lowered) for ``target``.

    Args:
        func_or_mod: a PrimFunc (named ``main``) or an IRModule of PrimFuncs.
        target: a Target or target string: "cpu" (C with OpenMP, a shared library) or
            "cuda" (CUDA C compiled with nvcc to PTX and a cubin). A cpu target of
            another architecture (``"llvm -mtriple=aarch64-linux-gnu
            -mcpu=neoverse-n1"`` on x86) is cross-compiled (``$CROSS_CC``, else
            ``aarch64-linux-gnu-gcc``).
        cache_dir: where compiled libraries are cached (default: the kernel cache).
        debug: check every load and store at run time (scalar code, slower); an
            out-of-bounds access makes the call raise ``IndexError`` naming the access
            and the index, instead of reading or writing memory it does not own.
        timeout_sec: seconds the C compiler may run (None: no limit); past them it is
            killed with the processes it started, and the build fails.

    Returns:
        A loaded :class:`metaschedule.runtime.Module`; for another architecture a
        :class:`~metaschedule.runtime.cross_module.CrossModule` (exported and inspected
        here, run there or under ``ms.testing.run_emulated``); for cuda a
        :class:`metaschedule.runtime.CudaModule` (runnable where a GPU is).

    Raises:
        ValueError: dynamic (symbolic) shapes, or IR the C back end cannot express.
        BuildError: the C compiler is missing, failed or timed out (see its
            ``compiler_output``).
    """
    target = Target(target)
    if isinstance(func_or_mod, PrimFunc):
        mod = IRModule({"main": func_or_mod})
    elif isinstance(func_or_mod, IRModule):
        mod = func_or_mod
    else:
        raise TypeError(
            f"build expects a PrimFunc or an IRModule, got {type(func_or_mod).__name__}"
        )
    for name, func in mod.items():
        _check_static(name, func)
    if target.kind == "cuda":
        if debug:
            raise ValueError(
                "build: debug=True (bounds-checked C) is for cpu targets; "
                "check a GPU schedule with ms.tir.interpreter.interpret instead"
            )
        return _build_cuda(mod, target, cache_dir)
    lowered = IRModule({name: lower(func) for name, func in mod.items()})
    sites = DebugSites() if debug else None
    csrc = codegen_c(lowered, target, debug=sites)
    metadata = {
        "version": METADATA_VERSION,
        "target": target.as_json(),
        "functions": [
            {
                "name": f.name,
                "symbol": f.symbol,
                "params": [
                    {"name": p.name, "dtype": p.dtype, "shape": list(p.shape), "written": p.written}
                    for p in f.params
                ],
                "prepacked": _prepacked_metadata(mod[f.name]) if f.name in mod else {},
            }
            for f in csrc.functions
        ],
    }
    if sites is not None:
        metadata["debug_sites"] = sites.sites
    source = csrc.code + timer_c_source([f.symbol for f in csrc.functions]) + steps_c_source()
    library = source + embed_c(metadata, csrc.code)
    path = compile_shared(
        library, compiler_flags(target), cache_dir, timeout_sec=timeout_sec, target=target
    )
    if target_arch(target) != host_arch():
        return CrossModule(path)
    try:
        return Module(path)
    except OSError as err:  # e.g. a symbol the loader cannot resolve
        os.unlink(path)
        raise BuildError(
            f"the built library cannot be loaded: {err}", library, str(err), []
        ) from None


def _prepacked_metadata(func: PrimFunc) -> dict[str, Any]:
    """The function's pre-packed parameters (``attrs["prepacked_args"]``) as JSON: index ->
    original shape and index map, so that a loaded module can pack weights."""
    return {
        str(j): {"original_shape": list(a.original_shape), "index_map": a.index_map.as_json()}
        for j, a in prepacked_args(func).items()
    }


def _build_cuda(mod: IRModule, target: Target, cache_dir: str | None) -> CudaModule:
    """Lower for the GPU, generate CUDA C, compile it with nvcc (PTX and cubin)."""
    lowered = IRModule({name: lower(func, GPU_LOWER_PASSES) for name, func in mod.items()})
    src = codegen_cuda(lowered, target)
    binary = compile_cuda(src.code, target.arch, cache_dir)
    metadata = {
        "version": METADATA_VERSION,
        "target": target.as_json(),
        "functions": [
            {
                "name": f.name,
                "params": [
                    {"name": p.name, "dtype": p.dtype, "shape": list(p.shape), "written": p.written}
                    for p in f.params
                ],
                "workspace": [list(w) for w in f.workspace],
                "kernels": [
                    {
                        "symbol": k.symbol,
                        "grid": list(k.grid),
                        "block": list(k.block),
                        "args": list(k.args),
                        "shared_bytes": k.shared_bytes,
                    }
                    for k in f.kernels
                ],
            }
            for f in src.functions
        ],
    }
    resources = {name: vars(r) for name, r in binary.resources.items()}
    return CudaModule(metadata, src.code, binary.ptx, binary.cubin, resources)


def _check_static(name: str, func: PrimFunc) -> None:
    if not isinstance(func, PrimFunc):
        raise TypeError(f"function {name} is a {type(func).__name__}, not a PrimFunc")
    for b in func.params:
        try:
            b.static_shape()
        except ValueError:
            raise ValueError(
                f"dynamic shapes are not supported: parameter {b.name} of {name} has shape "
                f"({', '.join(str(s) for s in b.shape)}); bind the symbolic dimensions first"
            ) from None
