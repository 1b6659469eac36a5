"""gpulab.measure.trace: the counts of hand-built address patterns (aligned, misaligned, strided, transposed, masked
tails, vectorized, replicated), the layout's element-to-thread map, the TTGIR and PTX readers, gpulab's kernels
traced in the interpreter (emulated layout and compiled for sm_90), what the trace refuses (TMA, atomics, no
Triton launch, a kernel that raises, its bounds), the lessons' one call (``report``), and the agreement with the
recorded Nsight Compute counters of the H200.

Every expected value is worked out by hand in the test's comment (sectors of a 32-lane request, requests a warp
issues), or computed in NumPy from the inputs, never by the code under test."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import triton.language as tl

import gpulab
from gpulab.core import hardware, plan
from gpulab.measure import trace as tr
from gpulab.measure import trace_layout as tl_
from gpulab.models import sectors

pytestmark = pytest.mark.usefixtures("seed")

ROW = tl_.Layout((1,), (32,), (4,), (0,))  # 1-D, a lane an element, 4 warps: 128 elements a tile
VEC4 = tl_.Layout((4,), (32,), (4,), (0,))  # 4 consecutive elements a lane: 512 a tile
# gpulab's launchers take tensors on gpulab.DEVICE (on a GPU they refuse CPU tensors); the trace runs every launch
# in the interpreter either way. A learner's launcher (exercises, notebook cells) takes what it is given.
DEV = gpulab.DEVICE


# ---- hand-built patterns --------------------------------------------------------------------------------------


def test_aligned_fp32_is_four_sectors_a_request():
    # 128 consecutive fp32 from an aligned base: each warp's 32 lanes read 128 bytes, four 32-byte sectors (the seed)
    c = tr.count_accesses(4 * np.arange(128), 4, ROW)
    assert (c.requests, c.sectors, c.sectors_per_request) == (4, 16, 4)
    assert c.efficiency == 1.0 and c.requested == 512
    assert c.sectors_per_request == sectors.warp_request(4, 1, 0).n_sectors


def test_misaligned_base_costs_a_fifth_sector():
    # base 4 bytes past a sector: every warp's 128 bytes straddle five sectors; 512 useful of 640 moved
    c = tr.count_accesses(4 + 4 * np.arange(128), 4, ROW)
    assert (c.requests, c.sectors) == (4, 20)
    assert c.efficiency == pytest.approx(0.8)
    assert c.sectors_per_request == sectors.warp_request(4, 1, 4).n_sectors


@pytest.mark.parametrize("stride, per_request", [(2, 8), (4, 16), (8, 32), (32, 32)])
def test_strided_lanes_spread_over_sectors(stride, per_request):
    # lanes 4 * stride bytes apart: 32 lanes span 128 * stride bytes, one sector a lane from 8 bytes apart on
    c = tr.count_accesses(4 * stride * np.arange(128), 4, ROW)
    assert c.sectors_per_request == per_request == sectors.warp_request(4, stride).n_sectors
    assert c.efficiency == pytest.approx(4 * 32 / (32 * per_request))


def test_transposed_tile_store_costs_a_sector_a_lane():
    # one warp, lanes along dim 1 of a 32 x 32 fp32 tile, one row a register: row-major addresses give each
    # instruction one 128-byte row (4 sectors), column-major (a transpose's write) one sector per lane (32)
    lay = tl_.Layout((1, 1), (1, 32), (1, 1), (1, 0))
    i, j = np.meshgrid(np.arange(32), np.arange(32), indexing="ij")
    rows = tr.count_accesses(4 * (32 * i + j), 4, lay, kind="store")
    cols = tr.count_accesses(4 * (32 * j + i), 4, lay, kind="store")
    assert (rows.requests, rows.sectors_per_request) == (32, 4)
    assert (cols.requests, cols.sectors_per_request) == (32, 32)


def test_masked_tail_counts_lanes_and_drops_empty_requests():
    addr = 4 * np.arange(128)
    # 100 of 128 on: warps 0-2 whole (4 sectors each), warp 3 lanes 96..99 (16 bytes: one sector)
    c = tr.count_accesses(addr, 4, ROW, mask=np.arange(128) < 100)
    assert (c.requests, c.sectors, c.instructions) == (4, 13, 4)
    assert c.lanes_per_instruction == pytest.approx((3 * 32 + 4) / 4)
    assert c.requested == 400
    # 96 on: warp 3 issues its instruction with every lane off, which makes no request
    c = tr.count_accesses(addr, 4, ROW, mask=np.arange(128) < 96)
    assert (c.requests, c.sectors, c.instructions) == (3, 12, 4)


def test_vector_access_is_one_request_of_sixteen_sectors():
    addr = 4 * np.arange(512)
    # 4 fp32 a lane in one 16-byte access: 512 bytes a warp instruction, 16 sectors, one instruction a warp
    v4 = tr.count_accesses(addr, 4, VEC4, vec=4)
    assert (v4.requests, v4.sectors_per_request, v4.efficiency) == (4, 16, 1.0)
    # the same layout issued one element at a time: 4 instructions a warp, lanes 16 bytes apart, 16 sectors each
    v1 = tr.count_accesses(addr, 4, VEC4, vec=1)
    assert (v1.requests, v1.sectors_per_request) == (16, 16)
    assert v1.efficiency == pytest.approx(0.25)
    assert v1.sectors_per_request == sectors.warp_request(4, 1, elements_per_lane=4, load=1).n_sectors


def test_a_replicated_tensor_is_stored_once_and_loaded_by_every_copy():
    # 64 elements on a 128-thread tile: warps 2 and 3 hold warps 0 and 1's elements again
    addr = 4 * np.arange(64)
    st = tr.count_accesses(addr, 4, ROW, kind="store")
    ld = tr.count_accesses(addr, 4, ROW, kind="load")
    assert (st.requests, st.sectors, st.instructions, st.lanes_per_instruction) == (2, 8, 4, 16)
    assert (ld.requests, ld.sectors) == (4, 16)


def test_executions_add_up():
    # two executions of one site, the second 128 bytes on: twice the requests and sectors of one
    addr = 4 * np.arange(128)
    c = tr.count_accesses(np.stack([addr, addr + 512]), 4, ROW)
    assert (c.executions, c.requests, c.sectors) == (2, 8, 32)


def test_count_accesses_refuses_bad_arguments():
    with pytest.raises(ValueError, match="kind"):
        tr.count_accesses(4 * np.arange(128), 4, ROW, kind="atomic")
    with pytest.raises(ValueError, match="vec 3"):
        tr.count_accesses(4 * np.arange(512), 4, VEC4, vec=3)


# ---- the layout ------------------------------------------------------------------------------------------------


def test_slots_follow_the_blocked_layout():
    # sizePerThread [1, 4], threadsPerWarp [4, 8], warpsPerCTA [4, 1], order [1, 0] on 32 x 32 (the tiled matmul's
    # tiles compiled for sm_90): lane l holds row l // 8, columns 4 (l % 8) .. +3; warp w starts at row 4 w; the
    # tile covers 16 rows, so each thread's second access is 16 rows down
    lay = tl_.Layout((1, 4), (4, 8), (4, 1), (1, 0))
    s = lay.slots((32, 32), 4)
    assert s.shape == (4, 2, 32, 4)
    assert s[0, 0, 0].tolist() == [0, 1, 2, 3]
    assert s[0, 0, 1].tolist() == [4, 5, 6, 7]
    assert s[0, 0, 8].tolist() == [32, 33, 34, 35]
    assert s[1, 0, 0].tolist() == [128, 129, 130, 131]
    assert s[0, 1, 0].tolist() == [512, 513, 514, 515]
    assert sorted(s.reshape(-1).tolist()) == list(range(1024))  # every element once


def test_default_layout_is_triton_s():
    # as Triton 3.9 compiled them for sm_90 (TTGIR of the tiled matmul's tiles and the strided copy)
    assert tl_.default_layout((32, 32), 4, (1, 0), 4) == tl_.Layout((1, 4), (4, 8), (4, 1), (1, 0))
    assert tl_.default_layout((1024,), 4, (0,), 4) == tl_.Layout((4,), (32,), (4,), (0,))
    # a 64 x 64 tile: 16 lanes along a row of 64 / 4, the other 2 lanes and the 4 warps down the rows
    assert tl_.default_layout((64, 64), 4, (1, 0), 4) == tl_.Layout((1, 4), (2, 16), (4, 1), (1, 0))
    # rows of 1024: one warp's 32 lanes take 128 of a row, and the 4 warps the rest of it, side by side
    assert tl_.default_layout((4, 1024), 4, (1, 0), 4) == tl_.Layout((1, 4), (1, 32), (1, 4), (1, 0))


def test_emulated_width_follows_alignment_and_the_store_group():
    ld = tr._Site(("f", 1, 1), "load", (1024,), 4)
    st = tr._Site(("f", 1, 2), "store", (1024,), 4)
    for i in range(2):
        ld.add(i, 4 * 4 * np.arange(1024) + 4096 * i, np.ones(1024, bool), [0])  # stride 4: no contiguity
        st.add(i, 4 * np.arange(1024) + 4096 * i, np.ones(1024, bool), [0])
    for s in (ld, st):
        s.facts = tr._facts(s)
    layout, vec = tl_.coalesced_layout(ld, [ld, st], 4)
    # the group's widest access (the dense store: 16 bytes) sets 4 elements a thread; the load issues them one by one
    assert layout.size_per_thread == (4,) and vec == 1
    assert tl_.coalesced_layout(st, [ld, st], 4)[1] == 4


# ---- reading the compiler's output -------------------------------------------------------------------------------

TTGIR = """#blocked = #ttg.blocked<{sizePerThread = [4], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]}>
#loc = loc("/k.py":5:1)
    %4 = tt.load %3, %mask_7 : tensor<1024x!tt.ptr<f32>, #blocked> loc(#loc8)
    tt.store %1, %4, %mask_7 : tensor<1024x!tt.ptr<f32>, #blocked> loc(#loc9)
    %a_36 = ttg.async_copy_global_to_local %a_32, %a_33 mask %m : tensor<32x32x!tt.ptr<f32>, #blocked> -> <32x32xf32> loc(#loc12)
#loc8 = loc("/k.py":9:28)
#loc9 = loc("/k.py":9:5)
#loc10 = loc("/h.py":3:12)
#loc11 = loc("/k.py":20:7)
#loc12 = loc(callsite(#loc10 at #loc11))
"""

PTX = """\t.loc\t1 9 28
\t// begin inline asm
\t.loc\t1 9 28
\tmov.u32 %r1, 0x0;
\t.loc\t1 10 28
\t@%p1 ld.global.v4.b32 { %r1, %r2, %r3, %r4 }, [ %rd1 + 0 ];
\t// end inline asm
\t.loc\t1 9 5
\t@%p1 st.global.v4.b32 [ %rd3 + 0 ], { %r1, %r2, %r3, %r4 };
\t.loc\t2 3 12
\tcp.async.cg.shared.global [ %r28 + 0 ], [ %rd6 + 0 ], 0x10, %r29;
\t.file\t1 "/k.py"
\t.file\t2 "/h.py"
"""


def test_ttgir_gives_each_operation_its_layout_and_place():
    sites = tl_.parse_ttgir(TTGIR)
    assert [(s.kind, s.file, s.line, s.col, s.shape) for s in sites] == [
        ("load", "/k.py", 9, 28, (1024,)),
        ("store", "/k.py", 9, 5, (1024,)),
        ("async", "/h.py", 3, 12, (32, 32)),  # an inlined helper's operation is placed in the helper
    ]
    assert sites[0].layout == tl_.Layout((4,), (32,), (4,), (0,))


def test_ptx_places_inline_assembly_at_the_call():
    # inside Triton's inline assembly LLVM counts lines on (10 28): the load belongs to 9 28, before the block
    ops = tl_.parse_ptx(PTX)
    assert set(ops) == {("/k.py", 9, 28), ("/k.py", 9, 5), ("/h.py", 3, 12)}
    assert [op for op, _ in ops[("/k.py", 9, 28)]] == ["ld.global.v4.b32"]


@pytest.mark.parametrize(
    "op, operands, width",
    [
        ("ld.global.v4.b32", "", 16),
        ("ld.global.b32", "", 4),
        ("st.global.v2.b32", "", 8),
        ("ld.global.b16", "", 2),
        ("ld.global.nc.v2.b64", "", 16),
        ("cp.async.cg.shared.global", " [ %r28 + 0 ], [ %rd6 + 0 ], 0x10, %r29", 16),
    ],
)
def test_ptx_width(op, operands, width):
    assert tl_.ptx_width(op, operands) == width


def test_specialization_is_triton_s():
    x = torch.zeros(64)

    def k(x_ptr, y_ptr, n, one, m, f, BLOCK: tl.constexpr):
        pass

    sig, const, attrs = tl_.specialize(k, dict(x_ptr=x, y_ptr=x[1:], n=64, one=1, m=17, f=0.5, BLOCK=128))
    assert sig == {
        "x_ptr": "*fp32",
        "y_ptr": "*fp32",
        "n": "i32",
        "one": "constexpr",
        "m": "i32",
        "f": "fp32",
        "BLOCK": "constexpr",
    }
    assert const == {"one": 1, "BLOCK": 128}
    assert set(attrs) == {"x_ptr", "n"}  # 16-byte aligned, divisible by 16; x[1:] is 4 bytes off, 17 is not


# ---- gpulab's kernels in the interpreter ----------------------------------------------------------------------


@pytest.mark.parametrize("layout", ["emulated", "compiled"])
def test_strided_copy_traced(layout):
    from gpulab.kernels.strided import strided_copy

    x = torch.randn(4096 * 4, device=DEV)
    t = tr.trace(strided_copy, x, 4, block=1024, num_warps=4, layout=layout)
    (lc,) = t.launches
    assert (lc.kernel, lc.programs) == ("strided_copy_kernel", 4)
    # 4 outputs a lane (the dense store's 16 bytes): the store is one 16-byte access a lane, 16 sectors a warp;
    # the load is 4 scalar loads a lane, lanes 4 * 4 * 4 = 64 bytes apart: a sector a lane
    assert t.per_request("load") == 32 and t.total("load", "requests") == 4096 / 32
    assert t.per_request("store") == 16 and t.total("store", "requests") == 4096 / 128
    # DRAM: every 64-byte granule of x[:4 * 4096] holds 4 of the elements read; y is read never, written once
    assert t.dram("read") == (4096 * 64 / 4 * 4 // 4, 4096 * 64)
    assert t.dram("write") == (4096 * 4, 4096 * 4)
    if layout == "compiled":
        assert lc.layout_source.startswith("compiled sm_90") and lc.regs and lc.residency is not None


def test_stride_one_is_vectorized():
    from gpulab.kernels.strided import strided_copy

    x = torch.randn(4096, device=DEV)
    t = tr.trace(strided_copy, x, 1, block=1024, num_warps=4)  # CONTIGUOUS: one 16-byte load a lane
    assert (t.per_request("load"), t.total("load", "requests")) == (16, 4096 / 128)


def test_masked_tail_of_a_kernel():
    from gpulab.kernels.strided import strided_copy

    x = torch.randn(2000, device=DEV)
    t = tr.trace(strided_copy, x, 2, block=1024, num_warps=4)  # 1000 outputs in one program of 1024
    (load,) = [s for s in t.launches[0].sites if s.kind == "load"]
    # lane k of warp 7 holds outputs 896 + 4k .. +3; those below 1000 are on: 26 lanes in each of its 4 loads
    assert load.lanes_per_instruction == pytest.approx((7 * 32 + 26) / 8)
    assert load.requested == 1000 * 4


def test_transposes_traced():
    from gpulab.kernels.transpose import transpose, transpose_naive

    a = torch.randn(256, 256, device=DEV)
    naive = tr.trace(transpose_naive, a, block=256)
    # a row of 256 over 128 threads: 2 elements (8 bytes) a lane along A's row; B's column: a sector a lane
    assert (naive.per_request("load"), naive.per_request("store")) == (8, 32)
    tiled = tr.trace(transpose, a, block_m=64, block_n=64, num_warps=4)
    assert (tiled.per_request("load"), tiled.per_request("store")) == (16, 16)


def test_where_and_loop_steps_of_lesson_02s_kernel():
    from gpulab.exercises.ex02_solutions import loop_grouped
    from gpulab.kernels.divergence import mixed_trips

    n, block = 2048, 128
    trips = torch.from_numpy(mixed_trips(n, 1 / 16, 4, 64, 0)).to(torch.int32)
    order = torch.argsort(trips, stable=True)
    x, out = torch.randn(n), torch.empty(n)
    t = tr.trace(loop_grouped, x, trips, order, out, block=block)
    (where,) = [s for s in t.launches[0].sites if s.kind == "where"]
    # each block of the sorted order loops to its largest trip count; an element is on while i < its trips
    per_block = trips[order].reshape(-1, block).numpy()
    steps = per_block.max(axis=1)
    assert where.per_program == pytest.approx(steps.mean())
    assert where.true_share == pytest.approx(per_block.sum() / (block * steps.sum()))


def test_work_balance_of_a_persistent_kernel():
    from gpulab.exercises.ex07b_solutions import persistent_matmul

    a, b, out = torch.randn(256, 256), torch.randn(256, 256), torch.empty(256, 256)
    t = tr.trace(persistent_matmul, a, b, 48, out, layout="emulated")
    (lc,) = t.launches
    # 64 tiles of 32 x 32 on 48 programs: 16 programs take 2 tiles, 32 take 1; each tile the same loads and store
    assert lc.balance == pytest.approx((64 / 48) / 2)
    dots = [s for s in lc.sites if s.kind == "load"]
    assert dots and all(not s.modelled for s in dots)  # tl.dot operands: bytes only
    assert lc.total("load", "requests") is None
    assert lc.total("load", "requested") == 2 * 64 * 8 * 32 * 32 * 4  # A and B tiles: 64 tiles x 8 steps of K


def test_grid_cap_samples_programs_and_scales():
    from gpulab.kernels.strided import strided_copy

    x = torch.randn(2**16 * 2, device=DEV)
    whole = tr.trace(strided_copy, x, 2, block=1024, num_warps=4, layout="emulated")
    part = tr.trace(strided_copy, x, 2, block=1024, num_warps=4, layout="emulated", max_programs=8)
    assert (part.launches[0].programs, part.launches[0].traced) == (64, 8)
    assert part.total("load", "requests") == whole.total("load", "requests")
    assert part.dram("read")[0] is None and whole.dram("read")[0] is not None  # no lower bound from a sample


# A notebook cell as the learner writes it (its kernel is the learner's: no targets row compiles it); the cell is
# executed from this text, as IPython executes a cell, with its source in linecache.
CELL = """
import triton
import triton.language as tl

SCALE = tl.constexpr(2.0)

@triton.jit
def _twice(v):
    return v * SCALE

@triton.jit
def every_other_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, _twice(tl.load(x_ptr + offs * 2, mask=mask)), mask=mask)

def every_other(x, y):
    every_other_kernel[(triton.cdiv(y.numel(), 256),)](x, y, y.numel(), BLOCK=256)
"""


def _cell(source: str, name: str):
    import linecache

    path = f"/tmp/ipykernel_0/{name}.py"  # where IPython keeps a cell's source
    linecache.cache[path] = (len(source), None, source.splitlines(True), path)
    scope = {"__name__": "__main__"}
    exec(compile(source, path, "exec"), scope)
    return scope["every_other"]


def test_a_notebook_cell_s_kernel_is_compiled_with_its_helpers_and_constants():
    launch = _cell(CELL, "good")
    x, y = torch.randn(8192), torch.empty(4096)
    t = tr.trace(launch, x, y)
    assert torch.equal(y, x[::2] * 2)
    (lc,) = t.launches
    assert lc.layout_source.startswith("compiled sm_90") and lc.compile_error is None
    # 256 outputs on 128 threads: 2 a lane (8 bytes of the store); the load's 2 elements are scalar loads 16 bytes
    # apart between lanes: 16 sectors a request
    assert (t.per_request("store"), t.per_request("load")) == (8, 16)


def test_a_kernel_a_gpu_would_refuse_is_counted_emulated_and_the_error_named():
    launch = _cell(CELL.replace("tl.constexpr(2.0)", "2.0"), "bad")  # a plain global: the interpreter takes it
    x, y = torch.randn(8192), torch.empty(4096)
    t = tr.trace(launch, x, y)
    (lc,) = t.launches
    assert lc.layout_source == "emulated" and "Cannot access global variable SCALE" in lc.compile_error
    assert "in _twice, line 2" in lc.compile_error
    text = tr.report(launch, x, y, print_it=False)
    assert "not compiled for sm_90: NameError in _twice" in text


# ---- residency ------------------------------------------------------------------------------------------------


def test_residency_reproduces_ncu_s_register_limit():
    # the occupancy case's registers as ncu recorded them on the H200, and its launch__occupancy_limit_registers
    h200 = hardware.get("H200")
    rec, _ = tr.recording("occupancy")
    for row in rec["rows"]:
        m = row["metrics"]
        got = tr.residency(int(m["launch__registers_per_thread"]), 0, rec["params"]["num_warps"], h200)
        assert got[0] == m["launch__occupancy_limit_registers"]
        assert got[0] * rec["params"]["num_warps"] == pytest.approx(
            m["sm__maximum_warps_per_active_cycle_pct"] / 100 * 64
        )


def test_residency_limits():
    h200 = hardware.get("H200")
    assert tr.residency(16, 0, 4, h200) == (16, "warps")  # 64 warps an SM
    assert tr.residency(32, 100_000, 4, h200) == (2, "shared memory")  # 228 KiB // (100000 + 1 KiB reserved)
    assert tr.residency(32, 0, 4, hardware.get("T4")) == (8, "warps")  # 32 warps an SM on 7.5
    assert tr.residency(None, 0, 4, h200) is None


# ---- what the trace refuses -------------------------------------------------------------------------------------


def test_tma_is_named_never_counted():
    from gpulab.kernels import matmul as mm

    a, b = (torch.randn(64, 64, dtype=torch.float16, device=DEV) for _ in range(2))
    t = tr.trace(mm.matmul, a, b, path="tma", config=mm.MatmulConfig(64, 64, 32, num_warps=4, num_stages=2))
    (lc,) = t.launches
    assert lc.refused and all(kind == "tma" for kind, _, _ in lc.refused)
    assert t.total("load", "requests") is None and t.total("store", "sectors") is None
    text = tr.report(
        mm.matmul, a, b, path="tma", config=mm.MatmulConfig(64, 64, 32, num_warps=4, num_stages=2), print_it=False
    )
    assert "not modelled: a TMA descriptor" in text


def test_atomics_are_named_never_counted():
    from gpulab.kernels import flash_attention as fa

    q, k, v, do = (torch.randn(1, 1, 32, 16, device=DEV) for _ in range(4))
    # the interpreter's configs on a GPU too: given a config, no launch autotunes (no candidates timed in the trace)
    o, lse = fa.flash_attention_forward(q, k, v, config=fa.INTERPRETER_FWD, use_tma=False)
    t = tr.trace(
        fa.flash_attention_backward, q, k, v, o, lse, do, mode="atomic", config=fa.INTERPRETER_BWD, use_tma=False,
        layout="emulated",
    )  # fmt: skip
    refused = [r for lc in t.launches for r in lc.refused]
    assert refused and refused[0][0] == "atomic" and "atomic" in refused[0][2]
    assert t.total("store", "sectors") is None


def test_a_call_without_triton_is_refused():
    with pytest.raises(tr.TraceRefused, match="no Triton kernel"):
        tr.trace(lambda x: x + 1, torch.ones(4))
    assert tr.report(lambda: None, print_it=False).startswith("not traced: the call launched no Triton kernel")


def test_a_kernel_error_and_the_time_limit_are_named():
    from gpulab.kernels.strided import strided_copy

    with pytest.raises(tr.TraceLimit, match="over 0 s"):
        tr.trace(strided_copy, torch.randn(4096, device=DEV), 2, block=1024, time_limit_s=0, layout="emulated")

    def broken():
        raise ZeroDivisionError("on purpose")

    with pytest.raises(tr.TraceError, match="ZeroDivisionError: on purpose"):
        tr.trace(broken)
    text = tr.report(strided_copy, torch.randn(4096, device=DEV), 2, block=1024, time_limit_s=0, print_it=False)
    assert text.startswith("not traced: over 0 s")
    with pytest.raises(ValueError, match="layout"):
        tr.trace(strided_copy, torch.randn(4096, device=DEV), 2, layout="fast")


def test_a_call_of_many_launches_is_stopped(monkeypatch):
    from gpulab.kernels.sincos import sincos_unfused

    monkeypatch.setattr(tr, "MAX_LAUNCHES", 2)  # the unfused chain launches 5 kernels
    with pytest.raises(tr.TraceLimit, match="more than 2 Triton launches"):
        tr.trace(sincos_unfused, torch.randn(1024, device=DEV), layout="emulated")


def test_the_interpreter_is_left_as_it_was():
    from triton.runtime import interpreter

    from gpulab.kernels.strided import strided_copy

    before = {
        n: getattr(interpreter.InterpreterBuilder, n)
        for n in ("create_masked_load", "create_masked_store", "set_grid_idx")
    }
    run = interpreter.InterpretedFunction.run
    x = torch.randn(4096, device=DEV)
    tr.trace(strided_copy, x, 2, block=1024, layout="emulated")
    assert interpreter.InterpretedFunction.run is run
    assert all(getattr(interpreter.InterpreterBuilder, n) is f for n, f in before.items())
    assert torch.equal(strided_copy(x, 2, block=1024), x[::2])  # the launch still computes


# ---- the lessons' one call --------------------------------------------------------------------------------------


def test_report_sets_yours_beside_the_model_and_gpulab_s():
    from gpulab.exercises.ex06_solutions import strided_copy

    x, out = torch.randn(4096 * 4), torch.empty(4096)
    text = tr.report(
        strided_copy, x, 4, out, model={"ld sectors/request": 16}, recorded=("coalescing", "stride4"), print_it=False
    )
    lines = text.splitlines()
    assert len(lines) <= 15
    # counted as the GPU planned for would issue it: the H200 on a CPU, on a GPU that GPU ("H100 SXM" on an H100)
    assert f"traced on this machine as the {plan.current().gpu.name} would issue it" in lines[0]
    row = next(ln for ln in lines if ln.strip().startswith("ld sectors/request")).split()
    # the learner's BLOCK 128 on 4 warps: a lane an output, lanes 16 bytes apart: 16 sectors, the textbook's count;
    # gpulab's recorded kernel (4 outputs a lane) issued 32 a request on the H200
    assert row[2:] == ["16", "16", "32"]
    assert "coalescing / stride4 recorded on NVIDIA H200" in text


def test_report_bytes_of_another_size_as_a_multiple_of_its_model():
    from gpulab.exercises.ex07_solutions import tiled_matmul
    from gpulab.models import tiling

    a, b, out = torch.randn(128, 128), torch.randn(128, 128), torch.empty(128, 128)
    model = tiling.input_loads(128, tile=(32, 32)) * 4
    text = tr.report(
        tiled_matmul, a, b, out, model={"L2 read bytes": model}, recorded=("tiling", "tiled-group8"), print_it=False
    )
    row = next(ln for ln in text.splitlines() if ln.strip().startswith("L2 read bytes"))
    assert "x its model" in row and "copied to shared memory" in text
    assert len(text.splitlines()) <= 15


# ---- held against the recorded counters -------------------------------------------------------------------------


def _rows(case):
    from gpulab.measure import trace_agreement as ta

    return {(r.label, r.quantity): r for r in ta.agreement([case])}


def test_agreement_coalescing():
    rows = _rows("coalescing")
    labels = {label for label, _ in rows}
    assert len(labels) == 8
    for label in labels:
        for q in ("ld sectors/request", "st sectors/request", "ld requests", "st requests", "DRAM read bytes"):
            if (label, q) == ("transpose-naive", "DRAM read bytes"):
                continue
            assert rows[(label, q)].agree, (label, q, rows[(label, q)])
    # DRAM reads above the range where the naive transpose's partial-sector writes are evicted early
    assert rows[("transpose-naive", "DRAM read bytes")].ratio > 1.05
    # writes still in L2 when the copy ends are not the kernel's DRAM bytes: below the range, never above
    for label in ("stride1", "stride2", "stride4", "transpose-tiled"):
        r = rows[(label, "DRAM write bytes")]
        assert r.recorded < r.traced[0]


def test_agreement_bytes_of_precision_and_fusion():
    rows = {**_rows("precision"), **_rows("fusion")}
    for label in ("fp32", "fp16", "bf16", "unfused"):
        assert rows[(label, "SM<->L2 bytes")].agree, label
    assert rows[("unfused", "kernels")].traced == 5 and rows[("unfused", "kernels")].agree
    assert rows[("fused", "SM<->L2 bytes")].ratio == pytest.approx(1.063, abs=0.005)


@pytest.mark.slow
def test_agreement_divergence_tiling_flash():
    rows = {**_rows("divergence"), **_rows("tiling")}
    assert all(r.agree for (label, q), r in rows.items() if q == "threads/inst")
    assert rows[("loop-sorted", "loop steps / loop-full")].agree
    assert rows[("tiled-group8", "L2 read bytes")].agree and rows[("tiled-group1", "L2 read bytes")].agree
    assert all(rows[(label, "DRAM read bytes")].agree for label in ("noreuse", "tiled-group8", "tiled-group1"))
    flash = _rows("flash")
    assert flash[("flash", "L2 read bytes")].ratio == pytest.approx(0.5, abs=0.02)
