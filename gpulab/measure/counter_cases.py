"""The lessons' counter cases: what ``gpulab.measure.counters`` runs under Nsight Compute for each lesson, and the model
it sets beside each counter. One ``CounterCase`` per lesson idea (``CASES``):

- ``fusion`` (lesson 04): DRAM bytes of the five-kernel sin^2 + cos^2 chain and of the fused kernel, 44n and 8n;
- ``precision`` (03): DRAM bytes of ReLU per dtype, 2n x itemsize;
- ``coalescing`` (06): sectors per request of strided copies and of both transposes, the sector model;
- ``divergence`` (02): threads per warp instruction and warp instructions of each branch variant;
- ``lane_branch`` (02): the same counters for a CUDA kernel with a per-lane ``if (lane < b)``, b swept;
- ``occupancy`` (04, 00): registers and resident warps of the fused kernel, the register-file model;
- ``tiling`` (07): DRAM and L2 read bytes of no reuse, tiled, grouped on and off, 2N^3 s and 2N^3 s / T;
- ``flash`` (08): DRAM bytes of naive against flash attention, O(L^2) and O(L).

A case's ``setup`` builds the inputs on gpulab.DEVICE and returns ``[(range, fn)]``, each ``fn()`` launching
that range's kernels with a fixed launch shape; its ``model`` turns the counters of each range (summed over the
range's kernels by ``gpulab.measure.counters.aggregate``) into comparison rows. Metric names come from ``gpulab.measure.ncu``.

What a counter can differ from a model by: writes still held in L2 when a kernel ends are not DRAM bytes of
that kernel (so buffers here are many times the L2); L2 serves re-reads that a byte model counts as memory
traffic (the tiling and attention models count requested loads; the counters show how much reached DRAM);
DRAM moves data in granules that can be larger than a 32-byte sector.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

import gpulab

from ..core import validate
from ..core.dtypes import itemsize, torch_dtype
from ..kernels import divergence as dv
from ..kernels import flash_attention as fa
from ..kernels import lane_branch as lb
from ..kernels import matmul as mm
from ..kernels import matmul_steps, sincos
from ..kernels.divergence import mixed_trips
from ..kernels.relu import relu, relu_counts
from ..kernels.strided import elements_per_lane, strided_copy
from ..kernels.transpose import transpose, transpose_naive
from ..models import attention, fusion, sectors, simt, tiling
from ..models.attention import naive_attention
from ..models.sectors import SECTOR_BYTES
from ..models.simt import WARP_SIZE, group_by_cost, loop
from ..models.waves import cdiv
from .ncu import (
    ACHIEVED_OCCUPANCY,
    BLOCK_LIMIT_REGISTERS,
    DRAM_READ,
    DRAM_WRITE,
    L2_HIT,
    L2_READ_SECTORS,
    L2_WRITE_SECTORS,
    LD_REQUESTS,
    LD_SECTORS,
    REGISTERS,
    ST_REQUESTS,
    ST_SECTORS,
    THEORETICAL_OCCUPANCY,
    THREAD_INST,
    THREADS_PER_INST,
    TIME,
    WARP_INST,
)

RANGE_PREFIX = "gpulab"  # every NVTX range is named "gpulab:<case>:<label>"


@dataclass(frozen=True)
class Range:
    """One NVTX range of a case: ``label`` (short, for tables), ``params`` (what the model needs)."""

    case: str
    label: str
    params: dict = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"{RANGE_PREFIX}:{self.case}:{self.label}"


@dataclass(frozen=True)
class CounterCase:
    """A lesson's model/counter pair: the metrics ncu collects, the ranges, a ``setup`` that builds the inputs on
    gpulab.DEVICE and returns ``[(range, fn)]`` (nothing launched yet; each ``fn()`` launches that range's
    kernels with a fixed launch shape) and a ``model`` that turns per-range counters into comparison rows."""

    name: str
    lesson: str
    what: str
    metrics: tuple
    ranges: tuple
    setup: Callable
    model: Callable
    params: dict = field(default_factory=dict)

    def range(self, label: str) -> Range:
        return next(r for r in self.ranges if r.label == label)


def _row(rng: Range, quantity: str, unit: str, model, counter, time_ns, kernels, note: str = "") -> dict:
    ratio = counter / model if model not in (None, 0) and counter is not None else None
    return {
        "range": rng.name,
        "label": rng.label,
        "quantity": quantity,
        "unit": unit,
        "model": model,
        "counter": counter,
        "ratio": ratio,
        "time_ns": time_ns,
        "kernels": kernels,
        "note": note,
    }


def _sum(*values):
    return None if any(v is None for v in values) else sum(values)


def _dram(m: dict):
    return _sum(m.get(DRAM_READ), m.get(DRAM_WRITE))


def _l2(m: dict):
    """Bytes between the SMs and L2 (read + written): the boundary where a kernel's own loads and stores are
    counted whole, however much of the output L2 still holds when the kernel ends."""
    n = _sum(m.get(L2_READ_SECTORS), m.get(L2_WRITE_SECTORS))
    return None if n is None else n * SECTOR_BYTES


def _div(a, b):
    return None if a is None or not b else a / b


# fusion (lesson 04) ---------------------------------------------------------------------------------------


def fusion_case(n: int = 2**26) -> CounterCase:
    """sin(x)^2 + cos(x)^2 on n fp32 elements: the five-kernel chain against the fused kernel. Model:
    ``gpulab.models.fusion.bytes_moved`` (44n and 8n bytes) and ``launches`` (5 and 1)."""
    name = "fusion"
    ranges = (Range(name, "unfused", {"fused": False}), Range(name, "fused", {"fused": True}))

    def setup(case):
        x = torch.randn(n, device=gpulab.DEVICE)
        return [
            (case.range("unfused"), lambda: sincos.sincos_unfused(x)),
            (case.range("fused"), lambda: sincos.sincos(x, block=1024, num_warps=4)),
        ]

    def model(case, per_range):
        out = []
        for r in case.ranges:
            m, kernels = per_range[r.name]
            fused = r.params["fused"]
            out.append(
                _row(r, "DRAM bytes", "byte", fusion.bytes_moved(n, "fp32", fused), _dram(m), m.get(TIME), kernels)
            )
            out.append(
                _row(r, "SM<->L2 bytes", "byte", fusion.bytes_moved(n, "fp32", fused), _l2(m), m.get(TIME), kernels)
            )
            out.append(
                _row(
                    r,
                    "kernels",
                    "launch",
                    fusion.launches(fused),
                    len(kernels) if kernels else None,
                    m.get(TIME),
                    kernels,
                )
            )
        return out

    return CounterCase(
        name,
        "04",
        "DRAM bytes of the five-kernel chain and of the fused kernel against 44n and 8n",
        (DRAM_READ, DRAM_WRITE, L2_READ_SECTORS, L2_WRITE_SECTORS, TIME),
        ranges,
        setup,
        model,
        {"n": n, "dtype": "fp32"},
    )


# precision (lesson 03) ------------------------------------------------------------------------------------


def precision_case(n: int = 2**26, dtypes=("fp32", "fp16", "bf16")) -> CounterCase:
    """ReLU on n elements per dtype. Model: ``gpulab.kernels.relu.relu_counts`` (2ns bytes: 8n fp32, 4n 16-bit)."""
    name = "precision"
    ranges = tuple(Range(name, d, {"dtype": d}) for d in dtypes)

    def setup(case):
        runs = []
        for r in case.ranges:
            x = torch.randn(n, device=gpulab.DEVICE, dtype=torch_dtype(r.params["dtype"]))
            runs.append((r, lambda x=x: relu(x)))
        return runs

    def model(case, per_range):
        out = []
        for r in case.ranges:
            m, kernels = per_range[r.name]
            model_bytes = relu_counts(n, r.params["dtype"])[1]
            out.append(_row(r, "DRAM bytes", "byte", model_bytes, _dram(m), m.get(TIME), kernels))
            out.append(_row(r, "SM<->L2 bytes", "byte", model_bytes, _l2(m), m.get(TIME), kernels))
        return out

    return CounterCase(
        name,
        "03",
        "DRAM bytes of ReLU per dtype against 2n x itemsize (8n fp32, 4n fp16/bf16)",
        (DRAM_READ, DRAM_WRITE, L2_READ_SECTORS, L2_WRITE_SECTORS, TIME),
        ranges,
        setup,
        model,
        {"n": n, "dtypes": list(dtypes)},
    )


# coalescing (lesson 06) -----------------------------------------------------------------------------------


COALESCING_LAUNCH = {"block": 1024, "num_warps": 4}  # the strided copies' launch shape in the coalescing case


def coalescing_case(n: int = 2**24, strides=(1, 2, 4, 8, 16, 32), matrix: int = 8192) -> CounterCase:
    """fp32 strided copies ``y[k] = x[k * stride]`` (n outputs, ``COALESCING_LAUNCH``) and the naive and tiled
    transposes of a ``matrix x matrix`` fp32 matrix. Models, from ``gpulab.models.sectors``: sectors per 32 elements
    of the side that the access pattern touches (the strided read; the transposes' write) and sectors per
    request, for the request Triton issues: each lane holds v = ``kernels.strided.elements_per_lane`` (4)
    consecutive outputs (its blocked layout), one 16-byte access at stride 1 and the tiled transpose's write,
    else v scalar loads whose lanes are ``v * stride * 4`` bytes apart. ``1 el/lane``: the textbook request
    (lane k reads ``x[k * stride]``, 32 elements) beside the counters' sectors per 32 elements. DRAM bytes count every sector of the textbook
    requests once: L2 serves the sectors the v loads of a lane share."""
    name = "coalescing"
    block, warps = COALESCING_LAUNCH["block"], COALESCING_LAUNCH["num_warps"]
    ranges = tuple(Range(name, f"stride{s}", {"stride": s, "side": "ld"}) for s in strides) + (
        Range(name, "transpose-naive", {"side": "st"}),
        Range(name, "transpose-tiled", {"side": "st"}),
    )

    def setup(case):
        x = torch.randn(n * max(strides), device=gpulab.DEVICE)
        runs = [
            (r, lambda s=r.params["stride"]: strided_copy(x[: n * s], s, block=block, num_warps=warps))
            for r in case.ranges
            if "stride" in r.params
        ]
        a = torch.randn(matrix, matrix, device=gpulab.DEVICE)
        runs += [
            (case.range("transpose-naive"), lambda: transpose_naive(a, block=1024)),
            (case.range("transpose-tiled"), lambda: transpose(a, block_m=64, block_n=64, num_warps=4)),
        ]
        return runs

    def model(case, per_range):
        v = elements_per_lane(block, warps, 4)
        out = []
        for r in case.ranges:
            m, kernels = per_range[r.name]
            textbook = None
            if "stride" in r.params:
                s = r.params["stride"]
                elements = n
                textbook = sectors.warp_request(4, s).n_sectors
                if s == 1:  # one 16-byte load a lane: 32 * v elements a request
                    per_request = sectors.warp_request(4 * v, 1).n_sectors
                    per32 = per_request / v
                else:  # v scalar loads, each over 32 elements
                    loads = [sectors.warp_request(4, s, elements_per_lane=v, load=j).n_sectors for j in range(v)]
                    per_request = per32 = sum(loads) / v
                dram = n * sectors.warp_request(4, s).bytes_moved // WARP_SIZE + n * 4
            else:
                elements = matrix * matrix
                naive = r.label == "transpose-naive"
                column = sectors.matrix_request(matrix, 4, "column")  # lanes a row of B apart
                per32 = column.n_sectors if naive else sectors.matrix_request(matrix, 4, "row").n_sectors
                per_request = per32 if naive else sectors.warp_request(16, 1).n_sectors
                write_bytes = elements * (column.bytes_moved // WARP_SIZE if naive else 4)
                dram = elements * 4 + write_bytes
            side = r.params["side"]
            side_sectors, side_requests = (LD_SECTORS, LD_REQUESTS) if side == "ld" else (ST_SECTORS, ST_REQUESTS)
            t = m.get(TIME)
            counted = _div(m.get(side_sectors), m.get(side_requests))
            counted32 = _div(m.get(side_sectors), elements / WARP_SIZE)
            out.append(
                _row(
                    r,
                    f"{side} sectors/32 el",
                    "sector",
                    per32,
                    counted32,
                    t,
                    kernels,
                )
            )
            out.append(
                _row(r, f"{side} sectors/request", "sector", per_request, counted, t, kernels, note=f"{v} el/lane")
            )
            if textbook is not None:
                # the textbook request holds 32 elements: beside the counters' sectors per 32 elements
                out.append(_row(r, "1 el/lane", "sector", textbook, counted32, t, kernels, note="textbook request"))
            out.append(_row(r, "DRAM bytes", "byte", dram, _dram(m), t, kernels))
        return out

    metrics = (DRAM_READ, DRAM_WRITE, LD_SECTORS, LD_REQUESTS, ST_SECTORS, ST_REQUESTS, TIME)
    return CounterCase(
        name,
        "06",
        "sectors per 32 elements and per request, and DRAM bytes, for each stride and both "
        "transposes, against the sector model",
        metrics,
        ranges,
        setup,
        model,
        {"n": n, "strides": list(strides), "matrix": matrix, "dtype": "fp32"},
    )


# divergence (lesson 02) -----------------------------------------------------------------------------------


def divergence_case(
    n: int = 2**20,
    block: int = 1024,
    k_a: int = 32,
    k_b: int = 16,
    fraction_a: float = 0.5,
    frac_expensive: float = 1 / 16,
    cheap: int = 4,
    expensive: int = 64,
    seed: int = 0,
) -> CounterCase:
    """The branch variants of ``gpulab.kernels.divergence`` on n fp32 elements.

    Threads per instruction: a Triton program has no per-lane branch. ``tl.where`` evaluates both paths with
    every lane active, the uniform ``if`` is taken by a whole program, and the data-dependent loop masks with a
    select; so the lane-mask model (``gpulab.models.simt``) has all 32 lanes on in every step, and the cost appears
    as instructions instead. Warp instructions, in lesson 02's model with instruction counts in place of times
    (calibrated by the counters of path A alone, path B alone, and the loop with every trip count 0 and with
    every trip count ``expensive``): where = A + B; uniform = f A + (1 - f) B; the loop linear in the steps
    that blocks pay (``gpulab.models.simt.loop(trips, block).steps``)."""
    name = "divergence"
    labels = ("path-a", "path-b", "where", "uniform", "loop-zero", "loop-full", "loop-interleaved", "loop-sorted")
    ranges = tuple(Range(name, lab) for lab in labels)

    def trips_of(label):
        if label == "loop-zero":
            return np.zeros(n, dtype=np.int32)
        if label == "loop-full":
            return np.full(n, expensive, dtype=np.int32)
        t = mixed_trips(n, frac_expensive, cheap, expensive, seed)
        return t[group_by_cost(t)] if label == "loop-sorted" else t

    def setup(case):
        gen = torch.Generator(device=gpulab.DEVICE).manual_seed(seed)
        x = torch.randn(n, device=gpulab.DEVICE, generator=gen) * 3
        take_a = torch.rand(n, device=gpulab.DEVICE, generator=gen) < fraction_a
        flags = dv.block_flags(cdiv(n, block), fraction_a, device=gpulab.DEVICE)
        runs = {
            "path-a": lambda: dv.path(x, "A", k_a, block=block),
            "path-b": lambda: dv.path(x, "B", k_b, block=block),
            "where": lambda: dv.branch_where(x, take_a, k_a, k_b, block=block),
            "uniform": lambda: dv.branch_uniform(x, flags, k_a, k_b, block=block),
        }
        for lab in labels[4:]:
            t = torch.from_numpy(trips_of(lab)).to(gpulab.DEVICE)
            runs[lab] = lambda t=t: dv.loop_cost(x, t, block=block)
        return [(case.range(lab), runs[lab]) for lab in labels]

    def model(case, per_range):
        inst = {r.label: per_range[r.name][0].get(WARP_INST) for r in case.ranges}
        n_blocks = cdiv(n, block)
        f = round(fraction_a * n_blocks) / n_blocks  # the fraction block_flags gives exactly

        def predicted(label):
            a, b, z, full = inst["path-a"], inst["path-b"], inst["loop-zero"], inst["loop-full"]
            if label == "where":
                return _sum(a, b)
            if label == "uniform":
                return None if a is None or b is None else f * a + (1 - f) * b
            if label in ("loop-interleaved", "loop-sorted"):
                if z is None or full is None:
                    return None
                return z + (full - z) * loop(trips_of(label), block).steps / (n_blocks * expensive)
            return None

        out = []
        for r in case.ranges:
            m, kernels = per_range[r.name]
            t = m.get(TIME)
            out.append(_row(r, "threads/inst", "thread", float(WARP_SIZE), m.get(THREADS_PER_INST), t, kernels))
            p = predicted(r.label)
            out.append(
                _row(
                    r,
                    "warp inst",
                    "inst",
                    p,
                    m.get(WARP_INST),
                    t,
                    kernels,
                    "" if p is None else "model calibrated by path-a/b and loop-zero/full",
                )
            )
        return out

    metrics = (THREADS_PER_INST, WARP_INST, TIME)
    return CounterCase(
        name,
        "02",
        "threads per warp instruction and warp instructions for each branch variant, against the lane-mask model",
        metrics,
        ranges,
        setup,
        model,
        {
            "n": n,
            "block": block,
            "k_a": k_a,
            "k_b": k_b,
            "fraction_a": fraction_a,
            "frac_expensive": frac_expensive,
            "cheap": cheap,
            "expensive": expensive,
            "seed": seed,
        },
    )


LANE_BOUNDARIES = tuple(range(WARP_SIZE + 1))  # b of ``if (lane < b)``: every boundary, 0 and 32 uniform


def lane_branch_case(n: int = 2**20, trips: int = 256, block: int = 256, boundaries=LANE_BOUNDARIES) -> CounterCase:
    """``gpulab.kernels.lane_branch`` (CUDA C++, ``if (lane < b)``) on n fp32 elements in [-1, 1], once per b.

    Model (``gpulab.models.simt.boundary_sweep(trips, trips)``): active threads per warp instruction = 32 x the branch's
    efficiency (32 at b = 0 and 32, 16 in between: each path runs with its own lanes only), from the pair
    ``smsp__thread_inst_executed.sum / smsp__inst_executed.sum``; warp instructions = those of b = 0 times the
    model's time ratio (2 when divergent). The instructions outside the branch (index, load, store) run with
    every lane and pull the counter a little above the model: a few instructions against ~2 x trips."""
    name = "lane_branch"
    bs = tuple(validate.integer("boundary", b, low=0, high=WARP_SIZE) for b in boundaries)
    if 0 not in bs:
        raise ValueError(f"boundaries must include 0 (the warp instructions' calibration), got {bs}")
    ranges = tuple(Range(name, f"b{b}", {"b": b}) for b in bs)
    model_rows = {r["b"]: r for r in simt.boundary_sweep(max(trips, 1), max(trips, 1), bs)}

    def setup(case):
        gen = torch.Generator(device=gpulab.DEVICE).manual_seed(0)
        x = torch.rand(n, device=gpulab.DEVICE, generator=gen) * 2 - 1
        return [(r, lambda b=r.params["b"]: lb.lane_branch(x, b, trips, block)) for r in case.ranges]

    def model(case, per_range):
        base = per_range[case.range("b0").name][0].get(WARP_INST)
        out = []
        for r in case.ranges:
            m, kernels = per_range[r.name]
            t, mr = m.get(TIME), model_rows[r.params["b"]]
            per_inst = _div(m.get(THREAD_INST), m.get(WARP_INST))
            out.append(_row(r, "threads/inst", "thread", WARP_SIZE * mr["efficiency"], per_inst, t, kernels))
            p = None if base is None else base * mr["time_ratio"]
            out.append(_row(r, "warp inst", "inst", p, m.get(WARP_INST), t, kernels, "" if p is None else "x b0"))
        return out

    return CounterCase(
        name,
        "02",
        "active threads per warp instruction of a CUDA if (lane < b), b swept, against the lane-mask model",
        (THREAD_INST, WARP_INST, TIME),
        ranges,
        setup,
        model,
        {"n": n, "trips": trips, "block": block, "boundaries": list(bs)},
    )


# resource pressure and occupancy (lessons 04 and 00) ------------------------------------------------------


def occupancy_case(n: int = 2**24, blocks=(1024, 4096, 8192), num_warps: int = 4) -> CounterCase:
    """The fused sin^2 + cos^2 kernel at growing BLOCK (more elements per thread, more registers), num_warps
    fixed. Model: ``gpulab.models.fusion.resident_warps(registers, num_warps)`` (warps per SM the register file
    allows), fed the registers per thread ncu reports, against ncu's theoretical and achieved occupancy as
    warps per SM (percent of ``gpulab.models.fusion.MAX_WARPS_PER_SM``)."""
    name = "occupancy"
    ranges = tuple(Range(name, f"block{b}", {"block": b, "num_warps": num_warps}) for b in blocks)

    def setup(case):
        x = torch.randn(n, device=gpulab.DEVICE)
        return [(r, lambda b=r.params["block"]: sincos.sincos(x, block=b, num_warps=num_warps)) for r in case.ranges]

    def model(case, per_range):
        out = []
        for r in case.ranges:
            m, kernels = per_range[r.name]
            t, regs = m.get(TIME), m.get(REGISTERS)
            resident = fusion.resident_warps(int(regs), r.params["num_warps"]) if regs else None
            warps = {
                k: None if m.get(k) is None else m[k] / 100 * fusion.MAX_WARPS_PER_SM
                for k in (THEORETICAL_OCCUPANCY, ACHIEVED_OCCUPANCY)
            }
            out.append(_row(r, "registers/thread", "register", None, regs, t, kernels))
            out.append(_row(r, "block limit (registers)", "block", None, m.get(BLOCK_LIMIT_REGISTERS), t, kernels))
            out.append(_row(r, "resident warps/SM", "warp", resident, warps[THEORETICAL_OCCUPANCY], t, kernels))
            out.append(_row(r, "achieved warps/SM", "warp", resident, warps[ACHIEVED_OCCUPANCY], t, kernels))
        return out

    metrics = (REGISTERS, BLOCK_LIMIT_REGISTERS, THEORETICAL_OCCUPANCY, ACHIEVED_OCCUPANCY, TIME)
    return CounterCase(
        name,
        "04",
        "registers, theoretical and achieved occupancy of the fused kernel against the register-file model",
        metrics,
        ranges,
        setup,
        model,
        {"n": n, "blocks": list(blocks), "num_warps": num_warps, "dtype": "fp32"},
    )


# tiling (lesson 07) ---------------------------------------------------------------------------------------

TILED_CONFIG = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32, "num_warps": 8, "num_stages": 3}


def tiling_case(n_noreuse: int = 2048, n_tiled: int = 4096) -> CounterCase:
    """fp32 matmuls: lesson 07's no-reuse step (``matmul_steps.naive_kernel``) at ``n_noreuse``, and the tiled
    pointer kernel (``TILED_CONFIG``, TF32 inputs) at ``n_tiled`` with GROUP_M 8 and 1 (grouping off). Model:
    ``gpulab.models.tiling.input_loads`` x 4 bytes, 2N^3 s without reuse and 2N^3 s / T with T x T tiles, against
    DRAM read bytes and the bytes the SMs read from L2; the L2 hit rate beside them."""
    name = "tiling"
    ranges = (
        Range(name, "noreuse", {"n": n_noreuse, "tile": None}),
        Range(
            name,
            "tiled-group8",
            {"n": n_tiled, "tile": [TILED_CONFIG["BLOCK_M"], TILED_CONFIG["BLOCK_N"]], "GROUP_M": 8},
        ),
        Range(
            name,
            "tiled-group1",
            {"n": n_tiled, "tile": [TILED_CONFIG["BLOCK_M"], TILED_CONFIG["BLOCK_N"]], "GROUP_M": 1},
        ),
    )

    def setup(case):
        a0, b0 = (
            torch.randn(n_noreuse, n_noreuse, device=gpulab.DEVICE),
            torch.randn(n_noreuse, n_noreuse, device=gpulab.DEVICE),
        )
        a, b = torch.randn(n_tiled, n_tiled, device=gpulab.DEVICE), torch.randn(n_tiled, n_tiled, device=gpulab.DEVICE)
        runs = [(case.range("noreuse"), lambda: matmul_steps.matmul_step(a0, b0, "no reuse"))]
        for r in case.ranges[1:]:
            cfg = mm.MatmulConfig(**TILED_CONFIG, GROUP_M=r.params["GROUP_M"])
            runs.append((r, lambda cfg=cfg: mm.matmul(a, b, path="pointer", config=cfg)))
        return runs

    def model(case, per_range):
        out = []
        for r in case.ranges:
            m, kernels = per_range[r.name]
            N, tile = r.params["n"], r.params["tile"]
            loads = tiling.input_loads(N, tile=None if tile is None else tuple(tile)) * 4
            t = m.get(TIME)
            l2_read = None if m.get(L2_READ_SECTORS) is None else m[L2_READ_SECTORS] * SECTOR_BYTES
            out.append(_row(r, "DRAM read bytes", "byte", loads, m.get(DRAM_READ), t, kernels))
            out.append(_row(r, "L2 read bytes", "byte", loads, l2_read, t, kernels))
            out.append(_row(r, "L2 hit rate", "%", None, m.get(L2_HIT), t, kernels))
        return out

    metrics = (DRAM_READ, DRAM_WRITE, L2_READ_SECTORS, L2_HIT, TIME)
    return CounterCase(
        name,
        "07",
        "DRAM and L2 read bytes and the L2 hit rate of no reuse, tiled, grouped on and off, "
        "against 2N^3 s and 2N^3 s / T",
        metrics,
        ranges,
        setup,
        model,
        {"n_noreuse": n_noreuse, "n_tiled": n_tiled, "dtype": "fp32", "tiled_config": {**TILED_CONFIG}},
    )


# FlashAttention (lesson 08) -------------------------------------------------------------------------------

FLASH_CONFIG = {"block_m": 128, "block_n": 64, "num_warps": 4, "num_stages": 2}


def flash_case(B: int = 1, H: int = 16, L: int = 4096, d: int = 128, dtype: str = "bf16") -> CounterCase:
    """Naive attention (S and P through HBM) against the flash forward (``FLASH_CONFIG``, pointer loads), q, k,
    v: (B, H, L, d). Models, ``gpulab.models.attention``: ``naive_bytes`` (O(L^2)); for flash, ``flash_bytes`` with
    one query block (each tensor read or written once: O(L)) against DRAM, and with the config's BLOCK_M (K and
    V re-read per query block) against the bytes the SMs read from L2."""
    name = "flash"
    ranges = (Range(name, "naive"), Range(name, "flash"))

    def setup(case):
        gen = torch.Generator(device=gpulab.DEVICE).manual_seed(0)
        q, k, v = (
            torch.randn(B, H, L, d, device=gpulab.DEVICE, dtype=torch_dtype(dtype), generator=gen) for _ in range(3)
        )
        cfg = fa.fwd_config(
            FLASH_CONFIG["block_m"], FLASH_CONFIG["block_n"], FLASH_CONFIG["num_warps"], FLASH_CONFIG["num_stages"]
        )
        return [
            (case.range("naive"), lambda: naive_attention(q, k, v)),
            (case.range("flash"), lambda: fa.flash_attention_forward(q, k, v, config=cfg, use_tma=False)),
        ]

    def model(case, per_range):
        s = itemsize(dtype)
        out = []
        for r in case.ranges:
            m, kernels = per_range[r.name]
            t = m.get(TIME)
            l2_read = None if m.get(L2_READ_SECTORS) is None else m[L2_READ_SECTORS] * SECTOR_BYTES
            if r.label == "naive":
                out.append(_row(r, "DRAM bytes", "byte", attention.naive_bytes(B, H, L, d, s), _dram(m), t, kernels))
            else:
                out.append(
                    _row(
                        r,
                        "DRAM bytes",
                        "byte",
                        attention.flash_bytes(B, H, L, d, s, block_m=L),
                        _dram(m),
                        t,
                        kernels,
                        "model: each tensor once",
                    )
                )
                out.append(
                    _row(
                        r,
                        "L2 read bytes",
                        "byte",
                        attention.flash_bytes(B, H, L, d, s, block_m=FLASH_CONFIG["block_m"]),
                        l2_read,
                        t,
                        kernels,
                        "model: K, V once per query block",
                    )
                )
            out.append(_row(r, "L2 hit rate", "%", None, m.get(L2_HIT), t, kernels))
        return out

    metrics = (DRAM_READ, DRAM_WRITE, L2_READ_SECTORS, L2_HIT, TIME)
    return CounterCase(
        name,
        "08",
        "DRAM bytes of naive against flash attention, against the O(L^2) and O(L) byte models",
        metrics,
        ranges,
        setup,
        model,
        {"B": B, "H": H, "L": L, "d": d, "dtype": dtype, "flash_config": {**FLASH_CONFIG}},
    )


CASES: dict[str, CounterCase] = {
    c.name: c
    for c in (
        fusion_case(),
        precision_case(),
        coalescing_case(),
        divergence_case(),
        lane_branch_case(),
        occupancy_case(),
        tiling_case(),
        flash_case(),
    )
}


def get_case(case) -> CounterCase:
    """A ``CounterCase`` or its name in ``CASES``. Raises ValueError naming ``case`` and the names known."""
    if isinstance(case, CounterCase):
        return case
    if case not in CASES:
        raise ValueError(f"case must be one of {sorted(CASES)}, got {case!r}")
    return CASES[case]
