"""Analyses shared by the schedule primitives.

* regions: the part of a buffer a block touches while some loops run
  (``relax_region``), unions of such regions, clamping to a buffer's bounds;
* buffers: a block's n-th read or write buffer, where a buffer is allocated;
* dataflow within a scope: the writers and readers of a buffer, a block's producers
  and consumers (siblings under the same scope block, in program order);
* block kinds: complete blocks (spatial, the only writer of what they write, no
  read-back), reduction blocks (affine bindings: ``affine.py``);
* tree queries: ancestors, lowest common ancestors, the blocks of a subtree.

Everything here reads the IR; statement surgery lives in ``edit.py``. One module per
theme: ``regions.py``, ``dataflow.py`` (buffers too), ``block_kinds.py``, ``tree.py``;
this package re-exports them.
"""

from .block_kinds import (
    check_complete_or_reduction,
    check_only_writer,
    data_par_loops,
    is_leaf_block,
    iter_kinds_by_var,
    loop_iter_type,
    not_complete_reason,
    not_reduction_reason,
)
from .dataflow import (
    STORAGE_SCOPES,
    allocation_site,
    buffers_of,
    check_storage_scope,
    consumers,
    nth_buffer,
    producers,
    readers_in_scope,
    scope_blocks,
    scope_of,
    writers_in_scope,
)
from .regions import (
    analyzer_for_loops,
    and_all,
    buffer_loads,
    clamp_region,
    conjuncts,
    expr_vars,
    load_regions,
    loop_doms,
    relax_region,
    union_range,
    union_regions,
)
from .tree import (
    is_ancestor,
    lowest_common_ancestor,
    subtree_blocks,
)

__all__ = [
    "STORAGE_SCOPES",
    "allocation_site",
    "analyzer_for_loops",
    "and_all",
    "buffer_loads",
    "buffers_of",
    "check_complete_or_reduction",
    "check_only_writer",
    "data_par_loops",
    "check_storage_scope",
    "clamp_region",
    "conjuncts",
    "consumers",
    "expr_vars",
    "is_ancestor",
    "is_leaf_block",
    "iter_kinds_by_var",
    "load_regions",
    "loop_doms",
    "loop_iter_type",
    "lowest_common_ancestor",
    "not_complete_reason",
    "not_reduction_reason",
    "nth_buffer",
    "producers",
    "readers_in_scope",
    "relax_region",
    "scope_blocks",
    "scope_of",
    "subtree_blocks",
    "union_range",
    "union_regions",
    "writers_in_scope",
]
