"""PerStoreFeature: slot layout, per-store values on matmul schedules, speed."""

import dataclasses
import math
import time
from types import SimpleNamespace

import numpy as np
import pytest

import metaschedule as ms
from metaschedule import te
from metaschedule.arg_info import ArgInfo
from metaschedule.feature_extractor import FeatureExtractor, PerStoreFeature, PyFeatureExtractor
from metaschedule.feature_extractor.per_store_feature import feature_names
from metaschedule.search_strategy import MeasureCandidate
from metaschedule.target import Target
from metaschedule.testing import matmul
from metaschedule.utils import derived_object


def schedule(func, *, tile_i=None, tile_j=None, parallel=False, vectorize=False, unroll_k=None):
    """A matmul schedule: i -> (i0, i1), j -> (j0, j1), order i0 j0 k i1 j1."""
    sch = ms.tir.Schedule(func, seed=0)
    i, j, k = sch.get_loops(sch.get_block("C"))
    outer, inner = [i], []
    if tile_i:
        i0, i1 = sch.split(i, [None, tile_i])
        outer, inner = [i0], [i1]
    if tile_j:
        j0, j1 = sch.split(j, [None, tile_j])
        outer, inner = outer + [j0], inner + [j1]
    else:
        outer.append(j)
    if unroll_k:
        k0, k1 = sch.split(k, [None, unroll_k])
        sch.reorder(*outer, k0, k1, *inner)
        sch.unroll(k1)
    elif inner:
        sch.reorder(*outer, k, *inner)
    if parallel:
        sch.parallel(outer[0])
    if vectorize:
        sch.vectorize(inner[-1] if inner else k)
    return sch


def candidate(sch):
    return MeasureCandidate(sch, ArgInfo.from_entry_func(sch.mod))


def rows(sch, **kwargs):
    fe = PerStoreFeature(**kwargs)
    (x,) = fe.extract_from(SimpleNamespace(target=None, mod=None), [candidate(sch)])
    return fe, x


def slot(fe, row, name):
    return float(row[fe.feature_names.index(name)])


def slog(x):
    return math.log2(1 + x)


def test_layout_and_shape():
    fe = PerStoreFeature()
    assert fe.feature_vector_length == 164 == len(fe.feature_names)
    assert len(set(fe.feature_names)) == len(fe.feature_names)
    fe2 = PerStoreFeature(
        buffers_per_store=2, arith_intensity_curve_num_samples=4, extract_workload=True
    )
    assert fe2.feature_vector_length == 57 + 18 * 2 + 4 + 4 + 3 + 18
    assert fe2.feature_names == feature_names(2, 4, True)
    _, x = rows(schedule(matmul(64, 64, 64)))
    # the lowered matmul has two stores: the init (C = 0) and the update
    assert x.shape == (2, 164) and x.dtype == np.float32
    assert np.all(np.isfinite(x))


def test_create_and_bad_arguments():
    assert isinstance(FeatureExtractor.create("per-store-feature"), PerStoreFeature)
    with pytest.raises(ValueError, match="per-store-feature"):
        FeatureExtractor.create("nope")
    with pytest.raises(ValueError, match="cache_line_bytes"):
        PerStoreFeature(cache_line_bytes=0)


def test_naive_matmul_values():
    fe, x = rows(schedule(matmul(64, 64, 64)))
    init, update = x
    n = 64**3
    assert slot(fe, update, "float_mad") == pytest.approx(slog(n))
    assert slot(fe, update, "outer_prod") == pytest.approx(slog(n))
    # the init runs only where k == 0
    assert slot(fe, init, "outer_prod") == pytest.approx(slog(64 * 64))
    assert slot(fe, init, "float_mad") == 0
    # buffers of the update, most bytes first: C (read + write), then A, B
    assert slot(fe, update, "B0.acc_type_rw") == 1
    assert slot(fe, update, "B0.bytes") == pytest.approx(slog(n * 2 * 4))
    assert slot(fe, update, "B0.unique_bytes") == pytest.approx(slog(64 * 64 * 4))
    # C[i, j] is reused across k: reuse count 64, distance 1 iteration
    assert slot(fe, update, "B0.reuse_type_loop_multiple_read") == 1
    assert slot(fe, update, "B0.reuse_ct") == pytest.approx(slog(64))
    assert slot(fe, update, "B0.reuse_dis_iter") == pytest.approx(slog(1))
    # A[i, k] (B1) moves by 1 element per k; B[k, j] (B2) by a row of 64
    assert slot(fe, update, "B1.stride") == pytest.approx(slog(1))
    assert slot(fe, update, "B2.stride") == pytest.approx(slog(64))
    # A is reused across j (the loop between i and k): distance 64 iterations of k
    assert slot(fe, update, "B1.reuse_ct") == pytest.approx(slog(64))
    assert slot(fe, update, "B1.reuse_dis_iter") == pytest.approx(slog(64))
    # B[k, j] touches one line per k iteration; 64 * 64 * 64 line fetches in all
    assert slot(fe, update, "B2.lines") == pytest.approx(slog(64**3))
    assert slot(fe, update, "B2.unique_lines") == pytest.approx(slog(64 * 64 * 4 / 64))
    for kind in ("vec", "unroll", "parallel"):
        assert slot(fe, update, f"{kind}_pos_none") == 1
        assert slot(fe, update, f"{kind}_len") == 0
    assert slot(fe, update, "num_loops") == pytest.approx(slog(3))
    # padding: only three buffers
    assert not update[fe.feature_names.index("B3.acc_type_read") :][:36].any()


def test_schedules_differ_in_expected_slots():
    func = matmul(64, 64, 64)
    fe, base = rows(schedule(func, tile_i=8, tile_j=16))
    _, vec = rows(schedule(func, tile_i=8, tile_j=16, vectorize=True))
    _, par = rows(schedule(func, tile_i=8, tile_j=16, parallel=True))
    _, unr = rows(schedule(func, tile_i=8, tile_j=16, unroll_k=4))
    upd = 1  # the update store
    assert slot(fe, base[upd], "vec_len") == 0 and slot(fe, base[upd], "vec_pos_none") == 1
    assert slot(fe, vec[upd], "vec_len") == pytest.approx(slog(16))
    assert slot(fe, vec[upd], "vec_num") == pytest.approx(slog(1))
    assert slot(fe, vec[upd], "vec_pos_inner_spatial") == 1
    assert slot(fe, par[upd], "parallel_len") == pytest.approx(slog(8))
    assert slot(fe, par[upd], "parallel_pos_outer_spatial") == 1
    assert slot(fe, base[upd], "parallel_pos_none") == 1
    assert slot(fe, unr[upd], "unroll_len") == pytest.approx(slog(4))
    assert slot(fe, unr[upd], "unroll_pos_middle_reduce") == 1
    # the op counts and byte counts do not depend on these annotations
    for name in ("float_mad", "B0.bytes", "B1.bytes", "B2.bytes"):
        assert slot(fe, base[upd], name) == slot(fe, vec[upd], name) == slot(fe, par[upd], name)
    # tiling changes the reuse structure: A[i0*8+i1, k] is reused across j1 (distance 1)
    _, naive = rows(schedule(func))
    a_reuse = "B1.reuse_dis_iter"
    assert slot(fe, naive[upd], a_reuse) == pytest.approx(slog(64))
    assert slot(fe, base[upd], a_reuse) == pytest.approx(slog(1))
    assert not np.array_equal(naive[upd], base[upd])


def test_arith_intensity_curve_grows_with_loop_depth():
    fe, x = rows(schedule(matmul(64, 64, 64), tile_i=8, tile_j=16))
    start = fe.feature_names.index("arith_intensity_curve_0")
    curve = x[1, start : start + 10]
    assert curve[0] > 0 and curve[-1] > curve[0]
    # the whole nest: 2 * 64^3 flops over (3 * 64 * 64 * 4) bytes
    assert curve[-1] == pytest.approx(2 * 64**3 / (3 * 64 * 64 * 4), rel=1e-5)


def test_allocation_and_elementwise_consumer():
    A = te.placeholder((32, 32), "float32", "A")
    B = te.compute((32, 32), lambda i, j: A[i, j] * 2.0, name="B")
    C = te.compute((32, 32), lambda i, j: te.exp(B[i, j]) + B[i, j], name="C")
    func = te.create_prim_func([A, C])
    fe, x = rows(ms.tir.Schedule(func))
    assert x.shape == (2, 164)
    b_row, c_row = x
    # B is an intermediate: allocated at the root, 32*32*4 bytes
    assert slot(fe, b_row, "alloc_size") == pytest.approx(slog(32 * 32 * 4))
    assert slot(fe, b_row, "alloc_inner_prod") == pytest.approx(slog(32 * 32))
    assert slot(fe, c_row, "alloc_size") == 0
    assert slot(fe, b_row, "float_mul") == pytest.approx(slog(32 * 32))
    assert slot(fe, c_row, "float_math_func") == pytest.approx(slog(32 * 32))
    assert slot(fe, c_row, "float_addsub") == pytest.approx(slog(32 * 32))
    # C reads B twice in one iteration: serial reuse
    assert slot(fe, c_row, "B0.acc_type_read") == 1  # B: 2 reads, most bytes
    assert slot(fe, c_row, "B0.reuse_type_serial_multiple_read_write") == 1


def test_gpu_binding_and_workload_features():
    func = matmul(32, 32, 32)
    sch = ms.tir.Schedule(func)
    i, j, _ = sch.get_loops(sch.get_block("C"))
    sch.bind(i, "blockIdx.x")
    sch.bind(j, "threadIdx.x")
    fe = PerStoreFeature(extract_workload=True)
    ctx = SimpleNamespace(target=None, mod=func)
    (x,) = fe.extract_from(ctx, [candidate(sch)])
    assert slot(fe, x[1], "is_gpu") == 1
    assert slot(fe, x[1], "blockIdx.x_len") == pytest.approx(slog(32))
    assert slot(fe, x[1], "threadIdx.x_len") == pytest.approx(slog(32))
    assert slot(fe, x[1], "workload_float_mad") == pytest.approx(slog(32**3))
    assert slot(fe, x[0], "workload_num_stores") == pytest.approx(slog(2))
    # the workload part is the same on every row
    assert np.array_equal(x[0, -18:], x[1, -18:])
    with pytest.raises(ValueError, match="context.mod"):
        fe.extract_from(SimpleNamespace(target=None), [candidate(sch)])


def test_cpu_target_means_not_gpu_and_cuda_target_means_gpu():
    sch = schedule(matmul(16, 16, 16))
    fe = PerStoreFeature()
    (cpu,) = fe.extract_from(SimpleNamespace(target=Target("cpu")), [candidate(sch)])
    (gpu,) = fe.extract_from(SimpleNamespace(target=Target("cuda")), [candidate(sch)])
    assert slot(fe, cpu[1], "is_gpu") == 0 and slot(fe, gpu[1], "is_gpu") == 1


def test_fast_enough_for_a_tiled_matmul():
    sch = schedule(
        matmul(256, 256, 256), tile_i=8, tile_j=32, parallel=True, vectorize=True, unroll_k=4
    )
    cands = [candidate(sch)] * 10
    fe = PerStoreFeature()
    fe.extract_from(None, cands[:1])
    t0 = time.perf_counter()
    fe.extract_from(None, cands)
    per_candidate = (time.perf_counter() - t0) / len(cands)
    assert per_candidate < 0.05  # a few ms in practice; generous for a shared machine


def test_measure_candidate_is_a_frozen_value():
    sch = schedule(matmul(8, 8, 8))
    c = candidate(sch)
    assert c.sch is sch and isinstance(c.args_info, tuple) and len(c.args_info) == 3
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.sch = None


def test_py_feature_extractor_subclass():
    @derived_object
    class Ones(PyFeatureExtractor):
        def extract_from(self, context, candidates):
            return [np.ones((1, 3), np.float32) for _ in candidates]

    out = Ones().extract_from(None, [candidate(schedule(matmul(8, 8, 8)))])
    assert len(out) == 1 and out[0].shape == (1, 3)


def test_features_of_a_module_are_computed_once():
    import pickle

    fe = PerStoreFeature()
    ctx = SimpleNamespace(target=None, mod=None)
    a, b = schedule(matmul(64, 64, 64), tile_i=8), schedule(matmul(64, 64, 64), tile_j=8)
    first = fe.extract_from(ctx, [candidate(a), candidate(b)])
    again = fe.extract_from(ctx, [candidate(b), candidate(a)])
    assert again[0] is first[1] and again[1] is first[0]  # cached by module
    assert not first[0].flags.writeable  # shared, so read-only
    np.testing.assert_array_equal(first[0], fe.extract_mod(a.mod))
    clone = pickle.loads(pickle.dumps(fe))  # the cache does not travel
    assert clone._cache == {} and clone.feature_names == fe.feature_names
