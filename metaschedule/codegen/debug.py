"""The ``debug`` build mode: every load and store checks its index at run time.

``build(mod, target, debug=True)`` generates scalar code (vectorized loops run as
serial loops) in which each buffer index goes through ``ms_checked(index, size,
site)``. The first out-of-range index is recorded (its access site and value) and
replaced by 0, so the kernel finishes without touching memory it does not own; the
kernel then returns :data:`OOB_STATUS` and the runtime raises an ``IndexError``
naming the access, the buffer and the index (see :func:`oob_message`).
"""

from __future__ import annotations

OOB_STATUS = -2
"""The status a debug kernel returns after an out-of-bounds access."""

DEBUG_C = r"""
/* debug build: bounds-checked accesses */
static volatile int32_t ms_oob_site = -1;
static volatile int64_t ms_oob_index = 0;
static inline int64_t ms_checked(int64_t i, int64_t n, int32_t site) {
  if (i < 0 || i >= n) {
    if (ms_oob_site < 0) { ms_oob_index = i; ms_oob_site = site; }
    return 0;
  }
  return i;
}
int32_t ms_debug_oob_site(void) { return ms_oob_site; }
int64_t ms_debug_oob_index(void) { return ms_oob_index; }
"""


class DebugSites:
    """The access sites of a module, numbered in the order the code generator meets them."""

    def __init__(self) -> None:
        self.sites: list[dict] = []

    def add(self, kind: str, buffer: str, numel: int, access: str, function: str) -> int:
        self.sites.append(
            {"kind": kind, "buffer": buffer, "numel": numel, "access": access, "function": function}
        )
        return len(self.sites) - 1


def oob_message(kernel: str, site: dict, index: int) -> str:
    """The error for an out-of-bounds access recorded by a debug kernel."""
    return (
        f"kernel {kernel}: {site['kind']} {site['access']} reached flat index {index}, but "
        f"buffer {site['buffer']} has {site['numel']} elements (in function "
        f"{site['function']}; debug build)"
    )
