"""Heap buffers from a workspace kept between calls.

Heap buffers too large for the stack are taken from a workspace kept between calls: one
slot per buffer and thread, allocated on first use, freed when the library is unloaded,
as TVM's workspace pool does. A fresh ``malloc`` of a large buffer on every call maps new
pages and faults them in, which costs more than a small kernel itself (a padded input of
1 MB for a depthwise convolution of 100 us). A call that finds the workspace in use (the
same kernel called from two host threads at once) allocates its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..tir.buffer import Buffer
from ..tir.dtype import c_type
from .c_ir import alloc_bytes

if TYPE_CHECKING:
    from .c_writer import CpuEmitter

__all__ = ["WS_GET", "close_heap", "open_heap", "workspace_globals"]

#: A workspace slot (allocated on first use) when the call holds the workspace and the
#: thread has a slot; a fresh allocation, freed by the caller, otherwise.
WS_GET = """\
static inline void* ms_ws_get(int mine, void** slots, int n, int tid, size_t size) {
  if (!mine || tid < 0 || tid >= n) return aligned_alloc(64, size);
  if (slots[tid] == NULL) slots[tid] = aligned_alloc(64, size);
  return slots[tid];
}"""


def open_heap(fw: CpuEmitter, bufs: list[Buffer], per_thread: bool = True) -> str:
    """Declare hoisted heap buffers, from the workspace when this call holds it (see
    the module docstring); returns the C test that all succeeded."""
    names = []
    slots = fw.target.num_cores if per_thread else 1
    tid = "omp_get_thread_num()" if per_thread else "0"
    if per_thread:
        fw.helpers.need("omp_get_thread_num", "int omp_get_thread_num(void);")
    fw.helpers.need("ms_ws_get", WS_GET)
    for b in bufs:
        name = fw.buf_names[b] = fw.names.fresh(b.name)
        t, size = c_type(b.dtype), -(-alloc_bytes(b) // 64) * 64
        arr = f"{fw.symbol}_ws{len(fw.workspace)}"
        fw.workspace.append((arr, slots))
        fw.line(
            f"{t}* restrict {name} = ({t}*)ms_ws_get(ms_ws_mine, {arr}, {slots}, {tid}, {size});"
        )
        fw.hoisted.add(b)
        names.append(name)
    return " && ".join(f"{n} != NULL" for n in names)


def close_heap(fw: CpuEmitter, bufs: list[Buffer]) -> None:
    """Free the heap buffers this call did not take from the workspace."""
    for b in bufs:
        fw.line(f"if (!ms_ws_mine) free({fw.buf_names[b]});")
        fw.hoisted.discard(b)


def workspace_globals(symbol: str, workspace: list[tuple[str, int]]) -> list[str]:
    """The slot arrays of the workspace, its busy flag and the destructor that frees
    it when the library is unloaded."""
    if not workspace:
        return []
    sym = symbol
    out = [f"static int {sym}_ws_busy = 0;"]
    out += [f"static void* {arr}[{n}];" for arr, n in workspace]
    out.append(f"__attribute__((destructor)) static void {sym}_ws_free(void) {{")
    for arr, n in workspace:
        out.append(f"  for (int i = 0; i < {n}; ++i) free({arr}[i]);")
    out.append("}")
    return out
