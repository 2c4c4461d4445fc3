"""The slots of a per-store feature vector, declared once as ``(group, name, width)``.

:func:`slot_table` lists the slots in order; :class:`Layout` derives the names (a slot of
width ``w > 1`` is named ``name_0 .. name_{w-1}``) and the position of each group, so a
row is filled by group (``row[layout.span("vec")] = ...``) and never by hand offsets.
"""

from __future__ import annotations

from ...tir.stmt import ForKind

__all__ = [
    "ALLOC_NAMES",
    "ANN_KINDS",
    "BUF_NAMES",
    "GPU_TAGS",
    "OP_KINDS",
    "OP_NAMES",
    "OUTER_NAMES",
    "POS",
    "Layout",
    "feature_names",
    "slot_table",
]

OP_KINDS = ("mad", "addsub", "mul", "divmod", "cmp", "math_func", "other_func")
#: op-count slots: seven float kinds, seven int kinds, bool and select (indexes of counts)
OP_NAMES = tuple(
    [f"float_{k}" for k in OP_KINDS] + [f"int_{k}" for k in OP_KINDS] + ["bool_op", "select_op"]
)
#: where the loops of one annotation kind sit (one-hot); see ``store_row.position``
POS = (
    "none",
    "inner_spatial",
    "middle_spatial",
    "outer_spatial",
    "inner_reduce",
    "middle_reduce",
    "outer_reduce",
    "mixed",
)
ANN_KINDS = (
    ("vec", ForKind.VECTORIZED),
    ("unroll", ForKind.UNROLLED),
    ("parallel", ForKind.PARALLEL),
)
GPU_TAGS = (
    "blockIdx.x",
    "blockIdx.y",
    "blockIdx.z",
    "threadIdx.x",
    "threadIdx.y",
    "threadIdx.z",
    "vthread",
)
BUF_NAMES = (
    "acc_type_read",
    "acc_type_write",
    "acc_type_rw",
    "bytes",
    "unique_bytes",
    "lines",
    "unique_lines",
    "reuse_type_loop_multiple_read",
    "reuse_type_serial_multiple_read_write",
    "reuse_type_no_reuse",
    "reuse_dis_iter",
    "reuse_dis_bytes",
    "reuse_ct",
    "bytes_d_reuse_ct",
    "unique_bytes_d_reuse_ct",
    "lines_d_reuse_ct",
    "unique_lines_d_reuse_ct",
    "stride",
)
ALLOC_NAMES = ("alloc_size", "alloc_prod", "alloc_outer_prod", "alloc_inner_prod")
OUTER_NAMES = ("outer_prod", "num_loops", "auto_unroll_max_step")
#: ISA extensions named by a 0/1 slot (a dot-product instruction of either kind counts)
ISA_FLAGS = ("fma", "avx2", "avx512f", "avx512bw", "vnni", "neon", "dotprod")
ISA_NAMES = tuple(
    f"isa_{n}"
    for n in (
        "vector_bytes",
        "vector_registers",
        "fma_units",
        "fma_latency",
        "datapath_bits",
        "fma_chains",
        "peak_flops_per_cycle",
        "l1_bytes",
        "l2_bytes",
        "l3_bytes",
        "num_cores",
        "is_aarch64",
        *ISA_FLAGS,
    )
)
#: the analytic prior's estimate of the candidate: log2 of its estimated nanoseconds and
#: of its estimated GFLOPS (the workload's float operations over that time)
PRIOR_NAMES = ("prior_log_ns", "prior_log_gflops")
WORKLOAD_NAMES = tuple(f"workload_{n}" for n in OP_NAMES) + (
    "workload_num_stores",
    "workload_param_bytes",
)


def slot_table(
    buffers_per_store: int = 5,
    arith_intensity_curve_num_samples: int = 10,
    extract_workload: bool = False,
    extract_isa: bool = False,
    extract_prior: bool = False,
) -> list[tuple[str, str, int]]:
    """Every slot as ``(group, name, width)``, in the order of the feature vector."""
    slots = [("ops", n, 1) for n in OP_NAMES]
    for prefix, _ in ANN_KINDS:
        slots += [(prefix, f"{prefix}_{n}", 1) for n in ("num", "prod", "len")]
        slots += [(prefix, f"{prefix}_pos_{p}", 1) for p in POS]
    slots += [("gpu", "is_gpu", 1)] + [("gpu", f"{t}_len", 1) for t in GPU_TAGS]
    for b in range(buffers_per_store):
        slots += [(f"B{b}", f"B{b}.{n}", 1) for n in BUF_NAMES]
    if arith_intensity_curve_num_samples:
        slots.append(("curve", "arith_intensity_curve", arith_intensity_curve_num_samples))
    slots += [("alloc", n, 1) for n in ALLOC_NAMES] + [("outer", n, 1) for n in OUTER_NAMES]
    if extract_workload:
        slots += [("workload", n, 1) for n in WORKLOAD_NAMES]
    if extract_isa:
        slots += [("isa", n, 1) for n in ISA_NAMES]
    if extract_prior:
        slots += [("prior", n, 1) for n in PRIOR_NAMES]
    return slots


class Layout:
    """Names and group positions derived from a slot table (groups are contiguous)."""

    def __init__(self, slots: list[tuple[str, str, int]]):
        self.slots = tuple(slots)
        self.names: list[str] = []
        self._spans: dict[str, slice] = {}
        for group, name, width in self.slots:
            start = len(self.names)
            self.names += [name] if width == 1 else [f"{name}_{i}" for i in range(width)]
            prev = self._spans.get(group)
            if prev is not None and prev.stop != start:
                raise ValueError(f"feature group {group!r} is not contiguous in the slot table")
            self._spans[group] = slice(start if prev is None else prev.start, len(self.names))

    def __len__(self) -> int:
        return len(self.names)

    def span(self, group: str) -> slice:
        """The positions of ``group``; an empty slice for a group the table does not have."""
        return self._spans.get(group, slice(0, 0))


def feature_names(
    buffers_per_store: int = 5,
    arith_intensity_curve_num_samples: int = 10,
    extract_workload: bool = False,
    extract_isa: bool = False,
    extract_prior: bool = False,
) -> list[str]:
    """The name of every slot of a feature vector, in order."""
    return Layout(
        slot_table(
            buffers_per_store,
            arith_intensity_curve_num_samples,
            extract_workload,
            extract_isa,
            extract_prior,
        )
    ).names
