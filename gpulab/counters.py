"""Hardware counters beside the lessons' models: Nsight Compute (``ncu``) runs gpulab's kernels and reads what
the GPU counted (DRAM bytes, sectors per request, threads per instruction, occupancy, L2 hit rate).

Run every case on a GPU and record the results into ``gpulab/data/reference-<gpu>.json`` (key "counters"):

    python -m gpulab.counters --all --record

    python -m gpulab.counters --case fusion            # one case: model / counters / time
    python -m gpulab.counters --case fusion --json F   # ... and write its rows and comparison to F
    python -m gpulab.counters --list                   # the cases and what they compare

Without a GPU, without ``ncu`` on PATH, or without permission to read the counters, ``available()`` says why
in one line and ``report(case)`` shows the recording instead, labelled as such.

How a case is measured. The runner starts ``ncu`` on a child process, ``python -m gpulab.counters --child
<case>``, which builds the case's inputs, calls every kernel once to compile it (outside any NVTX range), then
calls each kernel of interest exactly once inside an NVTX push/pop range named ``gpulab:<case>:<label>``. ncu
profiles only the kernels inside those ranges (``--nvtx --nvtx-include "gpulab:<case>:<label>/"``; the
trailing slash selects a push/pop range, Nsight Compute CLI documentation, "NVTX Filtering"). Launch
shapes are fixed (no autotuning in the child). ncu's defaults stay: kernel replay, and every cache flushed
before each replay pass (``--cache-control all``), so each kernel starts from a cold L2, as the byte models
assume; ``--clock-control none`` leaves the GPU's clocks as they are. The report is read back twice with
``ncu --import R --csv --page raw --print-units base``: once with the kernels' names and once with
``--print-nvtx-rename kernel`` (each kernel named by its innermost push/pop range); rows are matched by ID.

``parse_csv`` turns that CSV into rows ``{"id", "kernel", "range", "block", "grid", "metrics": {name: value in
base units}}`` (bytes, ns, sectors, %, counts); ``compare`` sums each range's kernels and sets each model
value beside its counter; ``report`` prints it as a short table.

What a counter can differ from a model by: writes still held in L2 when a kernel ends are not DRAM bytes of
that kernel (so buffers here are many times the L2); L2 serves re-reads that a byte model counts as memory
traffic (the tiling and attention models count requested loads; the counters show how much reached DRAM);
DRAM moves data in granules that can be larger than a 32-byte sector.
"""

from __future__ import annotations

import csv
import functools
import io
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import gpulab

from . import reference

# ---- metric names (Nsight Compute, "Metrics Reference" and the sections' metrics; Hopper) -------------------

DRAM_READ = "dram__bytes_read.sum"
DRAM_WRITE = "dram__bytes_write.sum"
TIME = "gpu__time_duration.sum"
LD_SECTORS = "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"
LD_REQUESTS = "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"
ST_SECTORS = "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum"
ST_REQUESTS = "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum"
L2_HIT = "lts__t_sector_hit_rate.pct"
L2_READ_SECTORS = "lts__t_sectors_srcunit_tex_op_read.sum"  # sectors the SMs' L1/TEX units read from L2
L2_WRITE_SECTORS = "lts__t_sectors_srcunit_tex_op_write.sum"  # sectors the SMs' L1/TEX units write to L2
THREADS_PER_INST = "smsp__thread_inst_executed_per_inst_executed.ratio"  # active threads per warp instruction
WARP_INST = "smsp__inst_executed.sum"
REGISTERS = "launch__registers_per_thread"
BLOCK_LIMIT_REGISTERS = "launch__occupancy_limit_registers"
THEORETICAL_OCCUPANCY = "sm__maximum_warps_per_active_cycle_pct"
ACHIEVED_OCCUPANCY = "sm__warps_active.avg.pct_of_peak_sustained_active"

SECTOR_BYTES = 32
WARP_SIZE = 32
NCU_TIMEOUT_S = 240  # seconds for one ncu command (a case profiles a few kernels of at most a few ms each)
PERMISSION_ERROR = "ERR_NVGPUCTRPERM"
RANGE_PREFIX = "gpulab"
DRIVER_PARAMS = Path("/proc/driver/nvidia/params")  # the NVIDIA driver's module parameters (Linux)


class CountersUnavailable(RuntimeError):
    """Raised when ncu cannot read counters here (interpreter mode, no ncu, no permission)."""


# ---- can counters be read here? ------------------------------------------------------------------------------


def ncu_path() -> str | None:
    """The ``ncu`` executable on PATH, or None."""
    return shutil.which("ncu")


def _profiling_admin_only() -> bool:
    """True when the driver restricts counters to administrators (``RmProfilingAdminOnly: 1`` in
    ``DRIVER_PARAMS``; NVIDIA's ERR_NVGPUCTRPERM page) and this process is not root."""
    try:
        text = DRIVER_PARAMS.read_text()
    except OSError:
        return False
    m = re.search(r"RmProfilingAdminOnly:\s*(\d+)", text)
    return bool(m and m.group(1) == "1" and hasattr(os, "geteuid") and os.geteuid() != 0)


def available() -> tuple[bool, str]:
    """``(True, "")`` where ncu can read this GPU's counters, else ``(False, reason)`` with a one-line reason:
    gpulab in interpreter mode, no ``ncu`` on PATH, or counters restricted to administrators
    (ERR_NVGPUCTRPERM). A run that still meets the permission error raises ``CountersUnavailable``."""
    if not gpulab.ON_GPU:
        return False, f"gpulab runs in {gpulab.MODE} mode (no CUDA GPU), so there are no hardware counters to read"
    if ncu_path() is None:
        return False, "Nsight Compute's `ncu` is not on PATH (it ships with the CUDA toolkit)"
    if _profiling_admin_only():
        return False, (
            f"the driver lets only administrators read GPU counters ({PERMISSION_ERROR}: "
            "RmProfilingAdminOnly=1 and this process is not root)"
        )
    return True, ""


@functools.cache
def ncu_version(ncu: str | None = None) -> str:
    """ncu's version line, e.g. "Version 2025.2.1.0 (build ...)", or "unknown"."""
    ncu = ncu or ncu_path()
    if ncu is None:
        return "unknown"
    try:
        out = subprocess.run([ncu, "--version"], capture_output=True, text=True, timeout=60, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    lines = [ln.strip() for ln in out.splitlines() if ln.strip()]
    return next((ln for ln in lines if ln.lower().startswith("version")), lines[-1] if lines else "unknown")


def ncu_short(version: str) -> str:
    """``ncu_version``'s line in a few words: "Version 2025.3.1.0 (build 36398880) (public-release)" ->
    "ncu 2025.3.1"; a line without a dotted version number is returned as ``"ncu " + version``."""
    m = re.search(r"\d+(?:\.\d+){1,2}", version)
    return f"ncu {m.group(0) if m else version}"


# ---- ncu's CSV (raw page) ------------------------------------------------------------------------------------

# Units ncu prints, scaled to the base unit of their kind: time to ns, bytes and counts by decimal prefixes
# (ncu's "Kbyte" is 1e3 bytes). "%" and plain counts stay as they are.
TIME_UNITS = {"ns": 1.0, "nsecond": 1.0, "us": 1e3, "usecond": 1e3, "ms": 1e6, "msecond": 1e6, "s": 1e9, "second": 1e9}
PREFIXES = {"K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
ID_COLUMNS = (
    "ID",
    "Process ID",
    "Process Name",
    "Host Name",
    "Kernel Name",
    "Context",
    "Stream",
    "Block Size",
    "Grid Size",
    "Device",
    "CC",
)


def to_base(text: str, unit: str) -> tuple[float | None, str]:
    """One value of ncu's CSV in base units: ``("1,234.5", "Kbyte") -> (1234500.0, "byte")``,
    ``("2.5", "usecond") -> (2500.0, "ns")``. Thousands separators are dropped; "n/a" or an empty field gives
    None. Raises ValueError for text that is neither a number nor "n/a"."""
    t = text.strip().replace(",", "")
    unit = unit.strip()
    if t in ("", "n/a", "N/A"):
        return None, unit
    value = float(t)
    if unit in TIME_UNITS:
        return value * TIME_UNITS[unit], "ns"
    if len(unit) > 1 and unit[0] in PREFIXES and unit[1].islower():
        return value * PREFIXES[unit[0]], unit[1:]
    return value, unit


def _is_header(line: str) -> bool:
    if not line.startswith('"'):
        return False
    fields = next(csv.reader([line]), [])
    return "ID" in fields and "Kernel Name" in fields


def _csv_lines(text: str) -> list[str]:
    """The CSV part of ncu's output: from the header line (with "ID" and "Kernel Name") on, the lines that are
    CSV records (ncu quotes every field); "==PROF==", "==WARNING==" and the program's own output are dropped."""
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if _is_header(ln)), None)
    if start is None:
        raise ValueError(
            'no ncu CSV header (a line with "ID" and "Kernel Name") in the output; first lines: '
            + " | ".join(lines[:5])
        )
    return [ln for ln in lines[start:] if ln.startswith('"')]


def parse_csv(text: str) -> list[dict]:
    """Rows of ``ncu --csv --page raw`` output (any ``--print-units``): one dict per profiled kernel,
    ``{"id": int, "kernel": str, "range": None, "block": str, "grid": str, "metrics": {name: float | None},
    "units": {name: base unit}}``, values in base units (``to_base``). The record after the header holds the
    units (its ID is empty). Raises ValueError when there is no CSV header."""
    records = list(csv.reader(io.StringIO("\n".join(_csv_lines(text)))))
    header, body = records[0], records[1:]
    id_col = header.index("ID")
    units = body.pop(0) if body and not body[0][id_col].strip() else [""] * len(header)
    metric_cols = [i for i, h in enumerate(header) if h not in ID_COLUMNS]
    rows = []
    for rec in body:
        if len(rec) != len(header) or not rec[id_col].strip():
            continue
        cell = dict(zip(header, rec))
        metrics, base_units = {}, {}
        for i in metric_cols:
            try:
                metrics[header[i]], base_units[header[i]] = to_base(rec[i], units[i])
            except ValueError:  # a text-valued column (ncu adds a few device attributes as strings)
                continue
        rows.append(
            {
                "id": int(cell["ID"]),
                "kernel": cell.get("Kernel Name", ""),
                "range": None,
                "block": cell.get("Block Size", ""),
                "grid": cell.get("Grid Size", ""),
                "metrics": metrics,
                "units": base_units,
            }
        )
    return rows


def match_range(renamed: str, ranges) -> str | None:
    """The range of ``ranges`` that ncu's NVTX-renamed kernel name refers to: the longest range name found in
    it (so "gpulab:c:stride1" never claims a kernel of "gpulab:c:stride16"), or None."""
    found = [r for r in ranges if r in renamed]
    return max(found, key=len) if found else None


def attach_ranges(rows: list[dict], renamed_rows: list[dict], ranges) -> str:
    """Set each row's ``"range"`` from the NVTX-renamed export of the same report (matched by ID). When no name
    matches and there are as many kernels as ranges, each range launched one kernel, in order (the child runs
    the ranges in the case's order), so the kernels are given to the ranges by ID. Returns how: "nvtx",
    "launch order" or "none"."""
    names = {r["id"]: r["kernel"] for r in renamed_rows}
    for row in rows:
        row["range"] = match_range(names.get(row["id"], ""), ranges)
    if any(row["range"] for row in rows):
        return "nvtx"
    if rows and len(rows) == len(ranges):
        for row, rng in zip(sorted(rows, key=lambda r: r["id"]), ranges):
            row["range"] = rng
        return "launch order"
    return "none"


# ---- cases: what runs in each range, and the model beside each counter ---------------------------------------


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
class Case:
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
    sectors = _sum(m.get(L2_READ_SECTORS), m.get(L2_WRITE_SECTORS))
    return None if sectors is None else sectors * SECTOR_BYTES


def _div(a, b):
    return None if a is None or not b else a / b


# fusion (lesson 04) ---------------------------------------------------------------------------------------


def fusion_case(n: int = 2**26) -> Case:
    """sin(x)^2 + cos(x)^2 on n fp32 elements: the five-kernel chain against the fused kernel. Model:
    ``gpulab.fusion.bytes_moved`` (44n and 8n bytes) and ``launches`` (5 and 1)."""
    name = "fusion"
    ranges = (Range(name, "unfused", {"fused": False}), Range(name, "fused", {"fused": True}))

    def setup(case):
        import torch

        from .kernels import sincos as S

        x = torch.randn(n, device=gpulab.DEVICE)
        return [
            (case.range("unfused"), lambda: S.sincos_unfused(x)),
            (case.range("fused"), lambda: S.sincos(x, block=1024, num_warps=4)),
        ]

    def model(case, per_range):
        from . import fusion

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

    return Case(
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


def precision_case(n: int = 2**26, dtypes=("fp32", "fp16", "bf16")) -> Case:
    """ReLU on n elements per dtype. Model: ``gpulab.kernels.relu.relu_counts`` (2ns bytes: 8n fp32, 4n 16-bit)."""
    name = "precision"
    ranges = tuple(Range(name, d, {"dtype": d}) for d in dtypes)

    def setup(case):
        import torch

        from .dtypes import torch_dtype
        from .kernels.relu import relu

        runs = []
        for r in case.ranges:
            x = torch.randn(n, device=gpulab.DEVICE, dtype=torch_dtype(r.params["dtype"]))
            runs.append((r, lambda x=x: relu(x)))
        return runs

    def model(case, per_range):
        from .kernels.relu import relu_counts

        out = []
        for r in case.ranges:
            m, kernels = per_range[r.name]
            model_bytes = relu_counts(n, r.params["dtype"])[1]
            out.append(_row(r, "DRAM bytes", "byte", model_bytes, _dram(m), m.get(TIME), kernels))
            out.append(_row(r, "SM<->L2 bytes", "byte", model_bytes, _l2(m), m.get(TIME), kernels))
        return out

    return Case(
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


def coalescing_case(n: int = 2**24, strides=(1, 2, 4, 8, 16, 32), matrix: int = 8192) -> Case:
    """fp32 strided copies ``y[k] = x[k * stride]`` (n outputs, ``COALESCING_LAUNCH``) and the naive and tiled
    transposes of a ``matrix x matrix`` fp32 matrix. Models, from ``gpulab.sectors``: sectors per 32 elements
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
        import torch

        from .kernels.strided import strided_copy
        from .kernels.transpose import transpose, transpose_naive

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
        from . import sectors
        from .kernels.strided import elements_per_lane

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
    return Case(
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
) -> Case:
    """The branch variants of ``gpulab.kernels.divergence`` on n fp32 elements.

    Threads per instruction: a Triton program has no per-lane branch. ``tl.where`` evaluates both paths with
    every lane active, the uniform ``if`` is taken by a whole program, and the data-dependent loop masks with a
    select; so the lane-mask model (``gpulab.simt``) has all 32 lanes on in every step, and the cost appears
    as instructions instead. Warp instructions, in lesson 02's model with instruction counts in place of times
    (calibrated by the counters of path A alone, path B alone, and the loop with every trip count 0 and with
    every trip count ``expensive``): where = A + B; uniform = f A + (1 - f) B; the loop linear in the steps
    that blocks pay (``gpulab.simt.loop(trips, block).steps``)."""
    name = "divergence"
    labels = ("path-a", "path-b", "where", "uniform", "loop-zero", "loop-full", "loop-interleaved", "loop-sorted")
    ranges = tuple(Range(name, lab) for lab in labels)

    def trips_of(label):
        import numpy as np

        from .kernels.divergence import mixed_trips
        from .simt import group_by_cost

        if label == "loop-zero":
            return np.zeros(n, dtype=np.int32)
        if label == "loop-full":
            return np.full(n, expensive, dtype=np.int32)
        t = mixed_trips(n, frac_expensive, cheap, expensive, seed)
        return t[group_by_cost(t)] if label == "loop-sorted" else t

    def setup(case):
        import torch

        from .kernels import divergence as dv

        gen = torch.Generator(device=gpulab.DEVICE).manual_seed(seed)
        x = torch.randn(n, device=gpulab.DEVICE, generator=gen) * 3
        take_a = torch.rand(n, device=gpulab.DEVICE, generator=gen) < fraction_a
        flags = dv.block_flags(-(-n // block), fraction_a, device=gpulab.DEVICE)
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
        from .simt import loop

        inst = {r.label: per_range[r.name][0].get(WARP_INST) for r in case.ranges}
        n_blocks = -(-n // block)
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
    return Case(
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


# resource pressure and occupancy (lessons 04 and 00) ------------------------------------------------------


def occupancy_case(n: int = 2**24, blocks=(1024, 4096, 8192), num_warps: int = 4) -> Case:
    """The fused sin^2 + cos^2 kernel at growing BLOCK (more elements per thread, more registers), num_warps
    fixed. Model: ``gpulab.fusion.resident_warps(registers, num_warps)`` (warps per SM the register file
    allows), fed the registers per thread ncu reports, against ncu's theoretical and achieved occupancy as
    warps per SM (percent of ``gpulab.fusion.MAX_WARPS_PER_SM``)."""
    name = "occupancy"
    ranges = tuple(Range(name, f"block{b}", {"block": b, "num_warps": num_warps}) for b in blocks)

    def setup(case):
        import torch

        from .kernels import sincos as S

        x = torch.randn(n, device=gpulab.DEVICE)
        return [(r, lambda b=r.params["block"]: S.sincos(x, block=b, num_warps=num_warps)) for r in case.ranges]

    def model(case, per_range):
        from . import fusion

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
    return Case(
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


def tiling_case(n_noreuse: int = 2048, n_tiled: int = 4096) -> Case:
    """fp32 matmuls: ``matmul_noreuse`` at ``n_noreuse``, and the tiled pointer kernel (``TILED_CONFIG``, TF32
    inputs) at ``n_tiled`` with GROUP_M 8 and 1 (grouping off). Model: ``gpulab.tiling.input_loads`` x 4 bytes,
    2N^3 s without reuse and 2N^3 s / T with T x T tiles, against DRAM read bytes and the bytes the SMs read
    from L2; the L2 hit rate beside them."""
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
        import torch

        from .kernels import matmul as mm

        a0, b0 = (
            torch.randn(n_noreuse, n_noreuse, device=gpulab.DEVICE),
            torch.randn(n_noreuse, n_noreuse, device=gpulab.DEVICE),
        )
        a, b = torch.randn(n_tiled, n_tiled, device=gpulab.DEVICE), torch.randn(n_tiled, n_tiled, device=gpulab.DEVICE)
        runs = [(case.range("noreuse"), lambda: mm.matmul_noreuse(a0, b0))]
        for r in case.ranges[1:]:
            cfg = mm.MatmulConfig(**TILED_CONFIG, GROUP_M=r.params["GROUP_M"])
            runs.append((r, lambda cfg=cfg: mm.matmul(a, b, path="pointer", config=cfg)))
        return runs

    def model(case, per_range):
        from . import tiling

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
    return Case(
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


def flash_case(B: int = 1, H: int = 16, L: int = 4096, d: int = 128, dtype: str = "bf16") -> Case:
    """Naive attention (S and P through HBM) against the flash forward (``FLASH_CONFIG``, pointer loads), q, k,
    v: (B, H, L, d). Models, ``gpulab.attention``: ``naive_bytes`` (O(L^2)); for flash, ``flash_bytes`` with
    one query block (each tensor read or written once: O(L)) against DRAM, and with the config's BLOCK_M (K and
    V re-read per query block) against the bytes the SMs read from L2."""
    name = "flash"
    ranges = (Range(name, "naive"), Range(name, "flash"))

    def setup(case):
        import torch

        from .attention import naive_attention
        from .dtypes import torch_dtype
        from .kernels import flash_attention as fa

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
        from . import attention
        from .dtypes import itemsize

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
    return Case(
        name,
        "08",
        "DRAM bytes of naive against flash attention, against the O(L^2) and O(L) byte models",
        metrics,
        ranges,
        setup,
        model,
        {"B": B, "H": H, "L": L, "d": d, "dtype": dtype, "flash_config": {**FLASH_CONFIG}},
    )


CASES: dict[str, Case] = {
    c.name: c
    for c in (
        fusion_case(),
        precision_case(),
        coalescing_case(),
        divergence_case(),
        occupancy_case(),
        tiling_case(),
        flash_case(),
    )
}


def get_case(case) -> Case:
    """A ``Case`` or its name in ``CASES``. Raises ValueError naming ``case`` and the names known."""
    if isinstance(case, Case):
        return case
    if case not in CASES:
        raise ValueError(f"case must be one of {sorted(CASES)}, got {case!r}")
    return CASES[case]


# ---- compare ---------------------------------------------------------------------------------------------------


def aggregate(rows: list[dict], range_name: str) -> tuple[dict, list[str]]:
    """The counters of one range's kernels: ``.sum`` metrics (and the time) added over the kernels; any other
    metric (rates, percentages, per-launch numbers) averaged with the kernels' times as weights. Returns
    ``(metrics, kernel names)``; empty when no kernel of the rows ran in the range."""
    mine = [r for r in rows if r.get("range") == range_name]
    names = sorted({k for r in mine for k in r["metrics"]})
    out = {}
    for k in names:
        values = [r["metrics"].get(k) for r in mine]
        if any(v is None for v in values):
            out[k] = None
        elif k.endswith(".sum"):
            out[k] = sum(values)
        else:
            weights = [r["metrics"].get(TIME) or 0.0 for r in mine]
            total = sum(weights)
            out[k] = sum(v * w for v, w in zip(values, weights)) / total if total else sum(values) / len(values)
    return out, [r["kernel"] for r in mine]


def compare(case, rows: list[dict]) -> list[dict]:
    """Model beside counter for every range of ``case`` (a name or a ``Case``), from parsed ncu ``rows`` (with
    their ``"range"`` set). One dict per (range, quantity): ``range``, ``label``, ``quantity``, ``unit``,
    ``model``, ``counter`` (None when not measured), ``ratio`` = counter / model (None without both),
    ``time_ns`` (gpu__time_duration summed over the range's kernels), ``kernels``, ``note``."""
    case = get_case(case)
    per_range = {r.name: aggregate(rows, r.name) for r in case.ranges}
    return case.model(case, per_range)


# ---- report --------------------------------------------------------------------------------------------------


def _fmt(v, unit: str = "") -> str:
    if v is None:
        return "-"
    if unit == "byte":
        for scale, suffix in ((1e9, " GB"), (1e6, " MB"), (1e3, " kB")):
            if abs(v) >= scale:
                return f"{v / scale:.3g}{suffix}"
        return f"{v:.0f} B"
    if unit == "%":
        return f"{v:.1f}%"
    return f"{v:.3g}"


def _ratio(r: float) -> str:
    """counter / model as a short factor: two decimals, or two significant digits below 0.01 (0.00049x)."""
    return f"{r:.2f}x" if r == 0 or abs(r) >= 0.01 else f"{r:.2g}x"


def table(comparison: list[dict]) -> str:
    """The comparison as one line per range: each quantity as model / counter (ratio), then the time."""
    lines, labels = [], list(dict.fromkeys(c["label"] for c in comparison))
    width = max((len(lab) for lab in labels), default=0)
    for lab in labels:
        mine = [c for c in comparison if c["label"] == lab]
        parts = []
        for c in mine:
            ratio = f" ({_ratio(c['ratio'])})" if c["ratio"] is not None else ""
            value = (
                _fmt(c["counter"], c["unit"])
                if c["model"] is None
                else f"{_fmt(c['model'], c['unit'])} / {_fmt(c['counter'], c['unit'])}{ratio}"
            )
            parts.append(f"{c['quantity']} {value}")
        t = mine[0]["time_ns"]
        parts.append("time " + ("-" if t is None else f"{t / 1e3:.4g} us"))
        lines.append(f"  {lab:<{width}}  " + " | ".join(parts))
    return "\n".join(lines)


def _comparison(case: Case, data: dict) -> list[dict]:
    """The record's comparison, with the models recomputed from its counters (``rows``) when it was measured
    with the case's parameters: a recording keeps its counters, the models follow the code."""
    if data.get("rows") and data.get("params") == case.params:
        return compare(case, data["rows"])
    return data["comparison"]


def report(case, data: dict | None = None, live: bool | None = None, print_it: bool = True) -> str:
    """Model / counters / time for ``case``, at most about 15 lines. ``data``: a case record (``measure``'s
    result); without it, measured now when ``live`` (default: where ``available()``), else, or when ncu turns
    out unable to read the counters, the recording from ``gpulab.reference`` with a one-line reason and its
    provenance. Returns the text."""
    case = get_case(case)
    lines = [f"[{case.name}, lesson {case.lesson}] each line: model / counter (counter / model), time"]
    if data is None:
        ok, why = available()
        if live if live is not None else ok:
            try:
                data = measure(case)
            except CountersUnavailable as e:
                why = str(e)
            except (RuntimeError, OSError, subprocess.SubprocessError) as e:  # a lesson shows the recording instead
                why = f"ncu could not measure here ({type(e).__name__}: {str(e).splitlines()[0][:200]})"
        if data is None:
            data, where = recorded(case.name)
            lines += [f"  {why or 'not measured live'}", f"  {where}"]
    if data is not None:
        lines.append(table(data["comparison"]))
    text = "\n".join(lines)
    if print_it:
        print(text)
    return text


def recorded(case_name: str) -> tuple[dict | None, str]:
    """``(record, line)``: the recorded record of ``case_name`` (as ``measure`` returns it, its comparison
    recomputed by ``_comparison``) from the first reference file that has one, with a one-line provenance; or
    ``(None, why there is none)``."""
    for gpu in reference.available():
        data = reference.load(gpu)
        rec = data.get("counters", {}).get("cases", {}).get(case_name)
        if rec is not None:
            rec = {**rec, "comparison": _comparison(get_case(case_name), rec)}
            p = rec.get("provenance", {})
            return rec, (
                f"recorded on {p.get('gpu', '?')} ({p.get('date', '?')}; {ncu_short(p.get('ncu', '?'))}, "
                f"torch {p.get('torch', '?')}, Triton {p.get('triton', '?')})"
            )
    return None, (
        f"no recording of the {case_name!r} counters yet: run `python -m gpulab.counters --case "
        f"{case_name} --record` on a GPU with ncu"
    )


# ---- running ncu -----------------------------------------------------------------------------------------------


def _repo_root() -> Path:
    return Path(gpulab.__file__).resolve().parents[1]


def _child_env() -> dict:
    env = dict(os.environ)
    root = str(_repo_root())
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def ncu_command(case, ncu: str, export: str, metrics=None) -> list[str]:
    """The ncu command line that profiles ``case``'s ranges in a child process and writes report ``export``."""
    case = get_case(case)
    cmd = [ncu, "--clock-control", "none", "--target-processes", "all", "--nvtx"]
    for r in case.ranges:
        cmd += ["--nvtx-include", f"{r.name}/"]
    cmd += [
        "--metrics",
        ",".join(metrics or case.metrics),
        "--export",
        export,
        "--force-overwrite",
        sys.executable,
        "-m",
        "gpulab.counters",
        "--child",
        case.name,
    ]
    return cmd


def _import(ncu: str, report_path: str, rename: bool) -> str:
    cmd = [ncu, "--import", report_path, "--csv", "--page", "raw", "--print-units", "base"]
    if rename:
        cmd += ["--print-nvtx-rename", "kernel"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=NCU_TIMEOUT_S, check=False)
    if r.returncode != 0:
        raise RuntimeError(f"`{' '.join(cmd)}` failed (exit {r.returncode}): {_tail(r.stdout + r.stderr)}")
    return r.stdout


def _tail(text: str, n: int = 15) -> str:
    return "\n".join(text.strip().splitlines()[-n:])


def profile(case, ncu: str | None = None) -> tuple[list[dict], dict]:
    """Run ``case`` under ncu and return ``(rows, info)``: the parsed rows with their ranges, and ``info``
    (``metrics`` collected, ``dropped`` metrics this ncu does not know, ``command``, ``ranges_by``: how kernels
    were given to ranges, see ``attach_ranges``). GPU only. Raises
    ``CountersUnavailable`` (no GPU, no ncu, ERR_NVGPUCTRPERM) or RuntimeError with ncu's last lines."""
    case = get_case(case)
    ok, why = available()
    if not ok:
        raise CountersUnavailable(why)
    ncu = ncu or ncu_path()
    metrics, dropped = list(case.metrics), []
    with tempfile.TemporaryDirectory(prefix="gpulab-ncu-") as tmp:
        export = str(Path(tmp) / case.name)
        for _attempt in range(2):
            cmd = ncu_command(case, ncu, export, metrics)
            r = subprocess.run(
                cmd,
                capture_output=True,
                text=True,
                timeout=NCU_TIMEOUT_S,
                env=_child_env(),
                cwd=_repo_root(),
                check=False,
            )
            out = r.stdout + r.stderr
            if PERMISSION_ERROR in out:
                raise CountersUnavailable(f"ncu has no permission to read this GPU's counters ({PERMISSION_ERROR})")
            report_file = export + ".ncu-rep"
            if r.returncode == 0 and Path(report_file).exists():
                break
            errors = "\n".join(ln for ln in out.splitlines() if "==ERROR==" in ln)
            unknown = [m for m in metrics if m in errors]
            if not unknown or len(unknown) == len(metrics):
                raise RuntimeError(f"ncu failed on case {case.name!r} (exit {r.returncode}): {_tail(out)}")
            dropped += unknown
            metrics = [m for m in metrics if m not in unknown]
        else:
            raise RuntimeError(f"ncu failed on case {case.name!r} twice: {_tail(out)}")
        rows = parse_csv(_import(ncu, report_file, rename=False))
        renamed = parse_csv(_import(ncu, report_file, rename=True))
    for row in rows:  # ncu adds device attributes and launch statistics of its own: keep what was asked for
        row["metrics"] = {k: v for k, v in row["metrics"].items() if k in metrics}
        row["units"] = {k: v for k, v in row["units"].items() if k in metrics}
    matched = attach_ranges(rows, renamed, [rg.name for rg in case.ranges])
    command = " ".join(ncu_command(case, "ncu", "<report>", metrics))
    return rows, {"metrics": metrics, "dropped": dropped, "command": command, "ranges_by": matched}


def _provenance(ncu: str | None, metrics) -> dict:
    from .device import provenance

    p = provenance()
    p.update(
        ncu=ncu_version(ncu),
        metrics=list(metrics),
        clock_control="none",
        cache_control="all (ncu default: caches flushed before every replay pass)",
        replay_mode="kernel",
    )
    return p


def measure(case, ncu: str | None = None) -> dict:
    """Profile ``case`` and compare: ``{"case", "lesson", "params", "rows", "comparison", "dropped_metrics",
    "missing_ranges", "ranges_by", "command", "provenance"}`` (JSON-able; ``missing_ranges``: ranges in which
    no kernel was profiled). GPU with ncu only; raises as ``profile``."""
    case = get_case(case)
    rows, info = profile(case, ncu)
    seen = {r["range"] for r in rows}
    return {
        "case": case.name,
        "lesson": case.lesson,
        "params": case.params,
        "rows": rows,
        "comparison": compare(case, rows),
        "dropped_metrics": info["dropped"],
        "missing_ranges": [rg.name for rg in case.ranges if rg.name not in seen],
        "ranges_by": info["ranges_by"],
        "command": info["command"],
        "provenance": _provenance(ncu, info["metrics"]),
    }


def record(results: dict[str, dict], path: Path) -> Path:
    """Merge case records (``{case name: measure(...)}``) into the reference file at ``path`` under
    "counters" -> "cases", keeping every other key and every case not in ``results``; "counters" ->
    "provenance" becomes the newest record's. Written atomically (``gpulab.device.write_json_atomic``).
    Raises FileNotFoundError when ``path`` does not exist (record the benchmark suite first)."""
    import json

    from .device import write_json_atomic

    path = Path(path)
    data = json.loads(path.read_text())
    counters = dict(data.get("counters", {}))
    cases = dict(counters.get("cases", {}))
    cases.update(results)
    counters["cases"] = cases
    if results:
        counters["provenance"] = list(results.values())[-1]["provenance"]
    data["counters"] = counters
    return write_json_atomic(path, data)


# ---- the child: runs inside ncu -------------------------------------------------------------------------------


def run_child(case) -> None:
    """Build ``case``'s inputs, compile every kernel once outside any range, then run each kernel of interest
    once inside its NVTX range (GPU only; ``python -m gpulab.counters --child <case>`` under ncu)."""
    case = get_case(case)
    import torch

    from .timing import require_gpu

    require_gpu("the counters' child run")
    runs = case.setup(case)
    for _, fn in runs:  # compile and load every kernel; ncu profiles none of these (outside the ranges)
        fn()
    torch.cuda.synchronize()
    for rng, fn in runs:
        torch.cuda.nvtx.range_push(rng.name)
        fn()
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()


# ---- command line ---------------------------------------------------------------------------------------------


def _reference_path(gpu_name: str | None) -> Path:
    """The reference file of ``gpu_name`` (a short name such as "h200"), by default of this GPU (named as
    ``python -m gpulab.bench --record`` names it)."""
    if gpu_name is None:
        import torch

        from . import hardware

        name = torch.cuda.get_device_name(0)
        spec = hardware.find(name)
        gpu_name = spec.name.split()[0].lower() if spec else name.lower().replace(" ", "-")
    return reference.path_for(gpu_name)


USAGE = """Hardware counters (Nsight Compute, ncu) beside the lessons' models.

  python -m gpulab.counters --list                  the cases and what each compares
  python -m gpulab.counters --case fusion           one case: model beside counter, and the time
  python -m gpulab.counters --all                   every case
  python -m gpulab.counters --all --record          ... and store them in gpulab/data/reference-<gpu>.json
  python -m gpulab.counters --case fusion --json F  ... and write the rows and comparison to the file F

Needs a CUDA GPU, ncu on PATH and permission to read the counters; without them it prints the recorded
counters, labelled as such, and --record refuses."""


def main(argv=None) -> int:
    import argparse

    ap = argparse.ArgumentParser(
        prog="python -m gpulab.counters", description=USAGE, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    what = ap.add_mutually_exclusive_group(required=True)
    what.add_argument("--case", choices=sorted(CASES), help="profile one case")
    what.add_argument("--all", action="store_true", help="profile every case")
    what.add_argument("--list", action="store_true", help="list the cases")
    what.add_argument("--child", choices=sorted(CASES), help=argparse.SUPPRESS)
    ap.add_argument("--record", action="store_true", help="merge the results into gpulab/data/reference-<gpu>.json")
    ap.add_argument("--json", type=Path, help="also write the results to this JSON file")
    ap.add_argument("--gpu-name", default=None, help="short name of the reference file (default from the GPU)")
    args = ap.parse_args(argv)

    if args.child:
        run_child(args.child)
        return 0
    if args.list:
        for c in CASES.values():
            print(f"{c.name:11} lesson {c.lesson}: {c.what}")
        return 0
    names = sorted(CASES) if args.all else [args.case]
    ok, why = available()
    if not ok:
        if args.record:
            print(f"error: --record needs counters: {why}", file=sys.stderr)
            return 2
        for name in names:
            report(name, live=False)
        return 0
    results, failed = {}, []
    for name in names:
        try:
            results[name] = measure(name)
        except CountersUnavailable as e:  # no case can be measured
            print(f"error: {e}", file=sys.stderr)
            return 2
        except Exception as e:  # noqa: BLE001  (one failing case must not lose the others' counters)
            failed.append(name)
            print(f"[{name}] failed: {type(e).__name__}: {e}", file=sys.stderr)
            continue
        report(name, results[name])
        if results[name]["dropped_metrics"]:
            print(f"  metrics this ncu does not know, left out: {results[name]['dropped_metrics']}")
        if results[name]["missing_ranges"]:
            print(
                f"  ranges with no profiled kernel (kernels given to ranges by {results[name]['ranges_by']}): "
                f"{results[name]['missing_ranges']}"
            )
        if args.record:
            print(f"  recorded into {record({name: results[name]}, _reference_path(args.gpu_name))}")
    if args.json:
        from .device import write_json_atomic

        print(f"wrote {write_json_atomic(args.json, results)}")
    if failed:
        print(f"failed cases: {failed}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
