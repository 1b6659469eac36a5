"""Counters without a GPU: a Triton launch run in the interpreter, every global load and store recorded, and what
Nsight Compute would count for it on the GPU planned for (``gpulab.core.plan``).

    t = trace.trace(strided_copy, x, 4, out)   # any function that launches Triton kernels, and its arguments
    print(t)                                   # per launch: programs, waves, each load and store
    trace.report(strided_copy, x, 4, out, model={"ld sectors/request": 32}, recorded=("coalescing", "stride4"))

What is recorded: for each program the interpreter runs, each ``tl.load`` and ``tl.store`` (by source line and
column): its addresses, mask and element size; each ``tl.where``'s condition; which loads feed a ``tl.dot``.
What is counted, per launch (``LaunchCount``) and per memory operation (``SiteCount``):

- **requests and sectors**: elements are mapped to threads by the operation's blocked layout and access width,
  read from the kernel compiled ahead of time for the planned GPU's target (``gpulab.measure.trace_layout``:
  TTGIR and PTX, located by line and column), else from the compiler's coalescing rule emulated on the traced
  addresses. One warp request per instruction of a warp with at least one lane on; its sectors are the distinct
  32-byte sectors of its lanes' bytes (the sector model of ``gpulab.models.sectors`` applied to real addresses).
  Sectors per request, as ncu's ``l1tex__t_sectors / l1tex__t_requests``.
- **bytes**: requested (the elements the lanes asked for) against moved (sectors x 32), and so efficiency.
- **lanes**: lanes on per memory instruction, from the masks (ncu's predicated-on threads); threads per
  instruction is 32 in every Triton kernel, whose lanes never branch apart (a mask predicates, ``tl.where``
  computes both sides); the share of lanes each ``tl.where`` takes its first side on, and how many times each
  program runs it (lesson 02's loop steps).
- **programs and waves**: programs per launch, resident programs per SM from the compiled registers and shared
  memory (and the SM's warp and block limits), waves over the planned GPU's SMs and the last wave's fill
  (``gpulab.models.waves``); the balance of memory work across programs (a persistent kernel's tail).
- **DRAM bytes as a range**: at least every distinct granule once (perfect reuse in L2), at most every request's
  granules (no reuse between requests). Granules of 64 bytes for reads (the H200's counters follow 64-byte DRAM
  granules: ``docs/trace.md``), 32-byte sectors for writes.

What the count leaves out, so that hardware can differ from it:

- L1 and L2 reuse across requests: the per-request counts are what L1 is asked (ncu's l1tex requests and
  sectors); L2 and DRAM see less when requests share sectors, which only the DRAM range's lower bound assumes;
  writes still held in L2 when a kernel ends never reach DRAM in that kernel.
- vectorization the compiler adds or drops: without the compile, the access width is emulated from the traced
  addresses, which can show more contiguity or alignment than the compiler proves.
- instructions: the interpreter runs Python, not SASS, so no instruction count (ncu's ``inst_executed``).
- TMA (descriptor loads and stores) and atomics: named, never given a number, nor any total they would enter.
  ``tl.dot`` operands the compiler copies into shared memory (``cp.async``): named, and given their bytes only
  (each tile's distinct sectors: what the copy reads from L2), never requests or sectors per request.

Bounds: at most ``MAX_PROGRAMS`` programs a launch are run (an evenly spaced sample beyond; counts scaled, the
DRAM lower bound left out), ``MAX_LAUNCHES`` launches a call, ``TIME_LIMIT_S`` seconds of interpretation and
``MAX_PATTERN_BYTES`` of recorded addresses; past a limit ``trace`` raises ``TraceLimit`` and ``report`` prints one
line instead of a table. The table itself (``table``, ``recording``) lives in ``gpulab.measure.trace_report``.
"""

from __future__ import annotations

import hashlib
import inspect
import math
import os
import sys
import threading
import time
from dataclasses import dataclass, field

import numpy as np

from ..core import hardware, plan
from ..core.patches import Patches
from ..models import waves as wave_model
from ..models.sectors import SECTOR_BYTES
from ..models.simt import WARP_SIZE
from . import trace_layout as tlay
from .trace_report import THREADS_PER_INST, recording, table  # noqa: F401  (the first two: importable from here)

MAX_PROGRAMS = 4096  # programs of one launch run in the interpreter; a sample beyond
TIME_LIMIT_S = 60.0  # seconds of interpretation for one trace
MAX_PATTERN_BYTES = 2**28  # bytes of distinct address patterns held for one trace
MAX_LAUNCHES = 64  # Triton launches in one traced call
DRAM_READ_GRANULE = 64  # bytes a DRAM read moves at least (the H200's counters, docs/trace.md)
DRAM_WRITE_GRANULE = SECTOR_BYTES

#: Per compute capability: (most resident warps per SM, most resident blocks per SM, shared memory reserved per
#: block in bytes). NVIDIA CUDA C++ Programming Guide, "Compute Capabilities", Table "Technical Specifications per
#: Compute Capability"; the 1 KiB reserved per block from 8.0 (same guide, "Shared Memory" of 8.x and 9.0).
SM_LIMITS = {75: (32, 16, 0), 80: (64, 32, 1024), 86: (48, 16, 1024), 89: (48, 24, 1024), 90: (64, 32, 1024)}
REGISTER_UNIT = 256  # registers are allocated to a warp in units of 256 (8 a thread)


class TraceError(Exception):
    """The trace could not count this call (the message says what, and what to do)."""


class TraceRefused(TraceError):
    """What the trace does not model (no Triton launch, a launch it cannot run)."""


class TraceLimit(TraceError):
    """The trace ran past a bound (time, recorded addresses)."""


# ---- recording ----------------------------------------------------------------------------------------------

_TRITON_DIR = None
_SELF_FILES = (os.path.abspath(__file__), os.path.abspath(tlay.__file__))
_POSITIONS: dict = {}


def _user_site(frame) -> tuple:
    """(file, line, column + 1) of the innermost kernel-code frame above ``frame``: the call of tl.load, tl.store
    or tl.where in the kernel or its helper (column as Triton's locations count it)."""
    global _TRITON_DIR
    if _TRITON_DIR is None:
        import triton

        _TRITON_DIR = os.path.dirname(os.path.abspath(triton.__file__))
    f = frame
    while f is not None:
        name = f.f_code.co_filename
        if not (name.startswith(_TRITON_DIR) or os.path.abspath(name) in _SELF_FILES or "numpy" in name):
            code = f.f_code
            pos = _POSITIONS.get(code)
            if pos is None:
                pos = _POSITIONS[code] = list(code.co_positions()) if hasattr(code, "co_positions") else []
            i = f.f_lasti // 2
            line, col = f.f_lineno, -1
            if 0 <= i < len(pos) and pos[i][0] is not None:
                line, col = pos[i][0], pos[i][2] if pos[i][2] is not None else -1
            return (name, line, col + 1)
        f = f.f_back
    return ("?", 0, 0)


@dataclass
class _Site:
    """One memory operation (or tl.where) of one launch, as recorded: distinct (offsets, mask) patterns and, per
    execution, the program, the pattern and the first element's address."""

    key: tuple
    kind: str  # "load", "store", "where", "tma", "atomic"
    shape: tuple = ()
    itemsize: int = 0
    patterns: list = field(default_factory=list)  # [(offsets int64, mask bool)], each of `shape`
    index: dict = field(default_factory=dict)
    programs: list = field(default_factory=list)
    pattern_of: list = field(default_factory=list)
    bases: list = field(default_factory=list)
    dot: bool = False
    true: int = 0  # tl.where: lanes on the first side, and all lanes
    lanes: int = 0
    facts: object = None

    def add(self, program: int, addr: np.ndarray, mask: np.ndarray, budget: list) -> None:
        base = int(addr.flat[0])
        off = addr - base
        last = self.patterns[-1] if self.patterns else None
        if last is not None and np.array_equal(last[0], off) and np.array_equal(last[1], mask):
            p = len(self.patterns) - 1
        else:
            h = hashlib.blake2b(off.tobytes(), digest_size=16)
            h.update(mask.tobytes())
            p = self.index.get(h.digest())
            if p is None:
                budget[0] += off.nbytes + mask.nbytes
                if budget[0] > MAX_PATTERN_BYTES:
                    raise TraceLimit(
                        f"more than {MAX_PATTERN_BYTES / 2**20:.0f} MiB of distinct address patterns: "
                        "trace a smaller size"
                    )
                p = self.index[h.digest()] = len(self.patterns)
                self.patterns.append((off.copy(), mask.copy()))
        self.programs.append(program)
        self.pattern_of.append(p)
        self.bases.append(base)


@dataclass
class _Launch:
    """One launch as recorded."""

    name: str
    pyfn: object
    grid: tuple = (1, 1, 1)
    sample: list = field(default_factory=list)
    num_warps: int = 4
    num_stages: int = 3
    sites: dict = field(default_factory=dict)
    refused: list = field(default_factory=list)  # (kind, where, what is missing)
    compile: object = None
    compile_note: str = ""
    work: dict = field(default_factory=dict)  # program -> memory operations executed

    @property
    def programs(self) -> int:
        return int(np.prod(self.grid))


class _Tracer(Patches):
    """While active: every Triton launch runs in the interpreter and is recorded (module docstring). Patches
    ``InterpretedFunction.run`` (and, on a GPU, ``JITFunction.run`` and ``__call__``: kernels there are
    interpreted too) and the interpreter's loads, stores, selects, dots, atomics, descriptors and program
    indices; leaving the block puts every one back (``core.patches.Patches``)."""

    def __init__(self, cc: int | None, max_programs: int, time_limit_s: float):
        super().__init__()
        self.cc, self.max_programs, self.time_limit_s = cc, max_programs, time_limit_s
        self.launches: list[_Launch] = []
        self.current: _Launch | None = None
        self.program = 0
        self.budget = [0]
        self.start = time.perf_counter()
        self.loaded: dict = {}  # id(array) -> (site, array) of this program's loaded values
        self.inside = 0  # >0 inside an atomic or descriptor operation: its inner load/store is not recorded again
        self.pending: dict = {}
        self.thread = threading.get_ident()

    # -- launches
    def _begin(self, kernel, args, kwargs):
        if len(self.launches) >= MAX_LAUNCHES:
            raise TraceLimit(
                f"more than {MAX_LAUNCHES} Triton launches in one call (an autotuner timing its candidates?): trace "
                "one launch of the kernel"
            )
        pyfn = getattr(kernel, "fn", kernel)
        rec = _Launch(getattr(pyfn, "__name__", "kernel"), pyfn)
        rec.num_warps = int(kwargs.get("num_warps") or 4)
        rec.num_stages = int(kwargs.get("num_stages") or 3)
        self.launches.append(rec)
        self.current, self.loaded = rec, {}
        if self.cc is None:
            rec.compile_note = "no compile: the emulated layout"
            return rec
        try:
            params = inspect.signature(pyfn).parameters
            call = {k: v for k, v in kwargs.items() if k in params}
            bound = inspect.signature(pyfn).bind(*args, **call)
            bound.apply_defaults()
            dns = (
                getattr(kernel, "do_not_specialize", None)
                or getattr(kernel, "kwargs", {}).get("do_not_specialize")
                or ()
            )
            names = list(params)
            dns = [names[d] if isinstance(d, int) else d for d in dns]
            rec.compile = tlay.start_compile(pyfn, dict(bound.arguments), rec.num_warps, rec.num_stages, self.cc, dns)
        except (tlay.SourceUnavailable, TypeError, ValueError, OSError) as e:
            rec.compile_note = f"no compile ({e}): the emulated layout"
        return rec

    def _grid(self, grid, rec):
        def spy(meta):
            g = grid(meta) if callable(grid) else grid
            g = tuple(int(v) for v in g) + (1,) * (3 - len(g))
            rec.grid = g
            n = rec.programs
            if n > self.max_programs:
                rec.sample = sorted(set(np.linspace(0, n - 1, self.max_programs).round().astype(int).tolist()))
            else:
                rec.sample = list(range(n))
            return (len(rec.sample),)

        return spy

    # -- the interpreter's operations
    def _set_grid_dim(self, orig):
        tracer = self

        def set_grid_dim(builder, nx, ny, nz):
            rec = tracer.current
            return orig(builder, *(rec.grid if rec is not None else (nx, ny, nz)))

        return set_grid_dim

    def _set_grid_idx(self, orig):
        tracer = self

        def set_grid_idx(builder, x, y, z):
            rec = tracer.current
            if rec is None:
                return orig(builder, x, y, z)
            if time.perf_counter() - tracer.start > tracer.time_limit_s:
                raise TraceLimit(
                    f"over {tracer.time_limit_s:g} s in the interpreter ({len(rec.work)} programs of {rec.name} "
                    f"traced): trace a smaller size"
                )
            p = rec.sample[x]
            gx, gy, _ = rec.grid
            tracer.program, tracer.loaded = p, {}
            rec.work.setdefault(p, 0)
            builder.grid_idx = (p % gx, (p // gx) % gy, p // (gx * gy))

        return set_grid_idx

    def _record(self, kind, ptrs, mask):
        rec = self.current
        if rec is None or self.inside or threading.get_ident() != self.thread:
            return None
        key = _user_site(sys._getframe(1))
        addr = np.asarray(ptrs.data).astype(np.int64, copy=False)
        m = np.ones(addr.shape, bool) if mask is None else np.broadcast_to(np.asarray(mask.data, bool), addr.shape)
        ty = ptrs.get_element_ty() if hasattr(ptrs, "get_element_ty") else ptrs.dtype.element_ty
        bits = getattr(ty, "primitive_bitwidth", 8)
        site = rec.sites.get((kind,) + key)
        if site is None:
            site = rec.sites[(kind,) + key] = _Site(key, kind, addr.shape, max(1, bits // 8))
        if addr.shape != site.shape:  # one call site with two shapes (a helper called twice): keep them apart
            site = rec.sites.setdefault((kind,) + key + (addr.shape,), _Site(key, kind, addr.shape, max(1, bits // 8)))
        site.add(self.program, addr, m, self.budget)
        rec.work[self.program] = rec.work.get(self.program, 0) + 1
        return site

    def _refuse(self, kind, what):
        rec = self.current
        if rec is None:
            return
        where = _user_site(sys._getframe(2))
        if not any(r[0] == kind and r[1] == where for r in rec.refused):
            rec.refused.append((kind, where, what))

    def __enter__(self):
        from triton.runtime import interpreter
        from triton.runtime.jit import JITFunction

        from ..core.triton_compat import patch_interpreter

        patch_interpreter()
        tracer = self
        orig_interp = interpreter.InterpretedFunction.run
        orig_jit = JITFunction.run

        def wrap(interpret_jit):
            def run(kernel, *args, grid, warmup, **kwargs):
                if warmup:
                    return (orig_jit if interpret_jit else orig_interp)(kernel, *args, grid=grid, warmup=True, **kwargs)
                rec = tracer._begin(kernel, args, kwargs)
                target = tracer.interpreted(kernel) if interpret_jit else kernel
                try:
                    return orig_interp(target, *args, grid=tracer._grid(grid, rec), warmup=False, **kwargs)
                finally:
                    tracer.current = None

            return run

        self.patch(interpreter.InterpretedFunction, "run", wrap(False))
        self.patch(JITFunction, "run", wrap(True))
        self.patch(JITFunction, "__call__", lambda fn, *a, **k: self.helper(fn)(*a, **k))
        b = interpreter.InterpreterBuilder
        load, store = b.create_masked_load, b.create_masked_store
        self.patch(b, "set_grid_idx", self._set_grid_idx(b.set_grid_idx))
        self.patch(b, "set_grid_dim", self._set_grid_dim(b.set_grid_dim))

        def masked_load(s, ptrs, mask, *rest, **kw):
            site = tracer._record("load", ptrs, mask)
            out = load(s, ptrs, mask, *rest, **kw)
            if site is not None:
                tracer.loaded[id(out.data)] = (site, out.data)
            return out

        def masked_store(s, ptrs, value, mask, *rest, **kw):
            tracer._record("store", ptrs, mask)
            return store(s, ptrs, value, mask, *rest, **kw)

        self.patch(b, "create_masked_load", masked_load)
        self.patch(b, "create_masked_store", masked_store)
        select = b.create_select

        def create_select(s, cond, lhs, rhs):
            out = select(s, cond, lhs, rhs)
            rec = tracer.current
            c = np.asarray(cond.data)
            if rec is not None and c.size > 1 and not tracer.inside:
                key = _user_site(sys._getframe(1))
                site = rec.sites.setdefault(("where",) + key, _Site(key, "where", c.shape))
                site.true += int(np.count_nonzero(np.broadcast_to(c, out.data.shape)))
                site.lanes += int(out.data.size)
                site.programs.append(tracer.program)
            return out

        self.patch(b, "create_select", create_select)
        dot = b.create_dot

        def create_dot(s, a, bb, d, *rest, **kw):
            tracer._mark_dot(a.data)
            tracer._mark_dot(bb.data)
            return dot(s, a, bb, d, *rest, **kw)

        self.patch(b, "create_dot", create_dot)
        for name in (
            "create_atomic_rmw",
            "create_atomic_cas",
            "create_atomic_load",
            "create_atomic_store",
            "create_atomic_poll",
        ):
            if hasattr(b, name):
                self.patch(
                    b,
                    name,
                    self._quiet(getattr(b, name), "atomic", f"an atomic ({name[7:]}): resolved in L2, not modelled"),
                )
        for name in (
            "create_make_tensor_descriptor",
            "create_descriptor_load",
            "create_descriptor_store",
            "create_descriptor_gather",
            "create_descriptor_scatter",
        ):
            if hasattr(b, name):
                self.patch(
                    b,
                    name,
                    self._quiet(
                        getattr(b, name), "tma", "a TMA descriptor: the copy engine's requests are not modelled"
                    ),
                )
        return self

    def _quiet(self, orig, kind, what):
        tracer = self

        def op(s, *a, **k):
            tracer._refuse(kind, what)
            tracer.inside += 1
            try:
                return orig(s, *a, **k)
            finally:
                tracer.inside -= 1

        return op

    def _mark_dot(self, arr):
        hit = self.loaded.get(id(arr))
        if hit is not None and hit[1] is arr:
            hit[0].dot = True
            return
        # the operand was converted after its load (a cast): the latest load of this program with its shape
        for site, data in reversed(list(self.loaded.values())):
            if data.shape == np.shape(arr):
                site.dot = True
                return


# ---- counting -----------------------------------------------------------------------------------------------


def _distinct(values: np.ndarray, on: np.ndarray) -> np.ndarray:
    """Per row of ``values`` (2-D int64), how many distinct values its ``on`` entries hold."""
    if values.shape[1] == 0:
        return np.zeros(values.shape[0], dtype=np.int64)
    big = np.iinfo(np.int64).max
    v = np.sort(np.where(on, values, big), axis=1)
    new = np.ones(v.shape, bool)
    new[:, 1:] = v[:, 1:] != v[:, :-1]
    return np.count_nonzero(new & (v != big), axis=1)


@dataclass
class SiteCount:
    """What one load, store or ``tl.where`` of a launch counts. ``where``: (file, line, column + 1); ``kind``: "load",
    "store" or "where"; ``layout``/``vec``/``source``: the blocked layout, elements a thread accesses at once and
    where they came from ("compiled sm_90" or "emulated"); ``modelled``: False for a ``tl.dot`` operand copied
    through shared memory (``note`` says so: bytes only). Counts are over the launch (scaled from a sample):
    ``executions``, ``requests`` (warp instructions with a lane on), ``instructions`` (all warp instructions),
    ``sectors`` (32-byte, per request), ``lanes_on`` (lanes on, summed over instructions), ``requested`` and
    ``moved`` bytes; a where's ``true_share`` and ``per_program`` (its executions a program)."""

    where: tuple
    kind: str
    shape: tuple = ()
    itemsize: int = 0
    layout: str = ""
    vec: int = 1
    source: str = ""
    modelled: bool = True
    note: str = ""
    executions: float = 0.0
    requests: float = 0.0
    instructions: float = 0.0
    sectors: float = 0.0
    granules64: float = 0.0
    lanes_on: float = 0.0
    requested: float = 0.0
    true_share: float | None = None
    per_program: float | None = None

    @property
    def sectors_per_request(self) -> float | None:
        return self.sectors / self.requests if self.modelled and self.requests else None

    @property
    def lanes_per_instruction(self) -> float | None:
        return self.lanes_on / self.instructions if self.modelled and self.instructions else None

    @property
    def moved(self) -> float:
        return self.sectors * SECTOR_BYTES

    @property
    def efficiency(self) -> float | None:
        return self.requested / self.moved if self.moved else None

    def line(self) -> str:
        f, ln, _ = self.where
        head = f"  {self.kind:5} line {ln}"
        if self.kind == "where":
            return f"{head}: first side on {self.true_share:.1%} of lanes, {self.per_program:.3g} runs a program"
        if not self.modelled:
            return (
                f"{head} {list(self.shape)}: {self.note}; {self.requested:.4g} B requested, "
                f"{self.moved:.4g} B of sectors"
            )
        return (
            f"{head} {list(self.shape)} x{self.itemsize} B: {self.requests:.4g} requests, "
            f"{self.sectors_per_request:.3g} sectors/request, {self.lanes_per_instruction:.3g} lanes on, "
            f"efficiency {self.efficiency:.0%} ({self.vec} el/access, {self.source})"
        )


@dataclass
class LaunchCount:
    """One launch counted: ``kernel``, ``grid``, ``programs`` (``traced``: how many ran), ``num_warps``, the
    compile (``layout_source``, ``regs``, ``smem`` bytes, ``spill_bytes``), ``residency`` (programs per SM and
    what limits it), the ``wave_plan`` on the planned GPU (``gpulab.models.waves.WavePlan``, one tile a program),
    ``balance`` (mean over max of the memory operations a program runs), ``sites`` and ``refused`` (what the trace
    does not model: kind, where, why), and the DRAM ranges in bytes (``dram_read``, ``dram_write``: (low, high),
    low None when programs were sampled)."""

    kernel: str
    grid: tuple
    programs: int
    traced: int
    num_warps: int
    gpu: str
    cc: int | None
    layout_source: str
    regs: int | None
    smem: int | None
    spill_bytes: int | None
    residency: tuple | None
    wave_plan: object
    balance: float
    sites: list
    refused: list
    dram_read: tuple
    dram_write: tuple
    compile_error: str | None = None

    def _side(self, kind):
        return [s for s in self.sites if s.kind == kind]

    def total(self, kind: str, what: str) -> float | None:
        """Sum of ``what`` ("requests", "sectors", "requested", "moved", "instructions", "lanes_on") over the sites
        of ``kind`` ("load"/"store"); None where a site of that kind is not modelled for it (a dot operand's
        requests) or the launch has refused operations."""
        sites = self._side(kind)
        if self.refused:
            return None
        if what in ("requests", "instructions", "lanes_on") and any(not s.modelled for s in sites):
            return None
        return float(sum(getattr(s, what) for s in sites))

    def per_request(self, kind: str) -> float | None:
        """Sectors per request over every ``kind`` ("load"/"store") site, as ncu's ratio of sums."""
        r, s = self.total(kind, "requests"), self.total(kind, "sectors")
        return s / r if r and s is not None else None

    def lanes(self, kind: str | None = None) -> float | None:
        """Lanes on per memory instruction (loads and stores, or one ``kind``)."""
        kinds = ("load", "store") if kind is None else (kind,)
        on = [self.total(k, "lanes_on") for k in kinds]
        n = [self.total(k, "instructions") for k in kinds]
        if any(v is None for v in on + n) or not sum(n):
            return None
        return sum(on) / sum(n)

    def summary(self) -> str:
        """A few lines: the launch, its residency and waves, then one line per operation."""
        wp = self.wave_plan
        res = "-" if self.residency is None else f"{self.residency[0]} programs/SM ({self.residency[1]})"
        waves = "" if wp is None else f", {wp.waves} wave(s) on {wp.sms} SMs, last wave {wp.last_wave_tiles}/{wp.slots}"
        sampled = "" if self.traced == self.programs else f" ({self.traced} traced)"
        lines = [
            f"{self.kernel}: {self.programs} programs{sampled} x {self.num_warps} warps on {self.gpu}: {res}{waves}; "
            f"layout {self.layout_source}"
            + ("" if self.regs is None else f", {self.regs} registers, {self.smem} B shared")
        ]
        if self.compile_error:
            lines.append(f"  not compiled for sm_{self.cc}: {self.compile_error}")
        lines += [s.line() for s in self.sites]
        lines += [f"  {k:5} line {w[1]}: not modelled: {why}" for k, w, why in self.refused]
        return "\n".join(lines)


def residency(regs: int | None, smem: int | None, num_warps: int, gpu: hardware.GPUSpec) -> tuple | None:
    """(programs resident per SM, what limits it: "registers", "shared memory", "warps" or "blocks") for programs of
    ``num_warps`` warps using ``regs`` registers a thread (allocated in ``REGISTER_UNIT`` a warp) and ``smem`` bytes
    of shared memory, on ``gpu``'s SM (``SM_LIMITS`` of its compute capability). None without the compile's
    registers or a table entry for the GPU."""
    cc = None if gpu.compute_capability is None else gpu.compute_capability[0] * 10 + gpu.compute_capability[1]
    if regs is None or cc not in SM_LIMITS:
        return None
    max_warps, max_blocks, reserved = SM_LIMITS[cc]
    per_warp = -(-regs * WARP_SIZE // REGISTER_UNIT) * REGISTER_UNIT
    limits = {
        "registers": (gpu.regs_per_sm or 65536) // (per_warp * num_warps),
        "warps": max_warps // num_warps,
        "blocks": max_blocks,
    }
    if smem:
        limits["shared memory"] = gpu.smem_per_sm_kib * 1024 // (smem + reserved)
    why = min(limits, key=lambda k: (limits[k], k != "registers"))
    return (limits[why], why)


def _match(site: _Site, compiled) -> object | None:
    """The compiled operation of a recorded site: same kind, file, line and column; else the only one of its kind on
    that line."""
    if compiled is None or compiled.error:
        return None
    kinds = {"load": ("load", "async", "tma"), "store": ("store", "tma")}[site.kind]
    f, ln, col = site.key
    same_line = [
        c for c in compiled.sites if c.kind in kinds and c.line == ln and os.path.abspath(c.file) == os.path.abspath(f)
    ]
    exact = [c for c in same_line if c.col == col]
    if exact:
        return exact[0]
    return same_line[0] if len(same_line) == 1 else None


def _count_site(site: _Site, layout, vec: int, source: str, scale: float) -> SiteCount:
    """Requests, sectors, lanes and bytes of one site under ``layout`` (``vec`` elements an access)."""
    out = SiteCount(site.key, site.kind, site.shape, site.itemsize, str(layout), vec, source)
    bases = np.asarray(site.bases, dtype=np.int64)
    pats = np.asarray(site.pattern_of, dtype=np.int64)
    shape = site.shape if site.shape != (1,) else ()
    slots = layout.slots(shape, vec)
    own = tlay.owners(slots) if site.kind == "store" else np.ones(slots.shape, bool)
    w, k, lanes, v = slots.shape
    for p, (off, mask) in enumerate(site.patterns):
        sel = pats == p
        if not sel.any():
            continue
        off_s, on = off.reshape(-1)[slots], mask.reshape(-1)[slots] & own  # (w, k, 32, v)
        lane_on = on.any(axis=-1)
        req_on = lane_on.any(axis=-1).reshape(-1)
        flat_off, flat_on = off_s.reshape(w * k, lanes * v), on.reshape(w * k, lanes * v)
        residues, counts = np.unique(bases[sel] % 128, return_counts=True)
        n_exec = int(sel.sum())
        out.executions += n_exec
        out.instructions += n_exec * w * k
        out.lanes_on += n_exec * int(lane_on.sum())
        out.requests += n_exec * int(req_on.sum())
        out.requested += n_exec * int(np.count_nonzero(mask)) * site.itemsize
        for r, c in zip(residues, counts):
            addr = flat_off + int(r)
            out.sectors += int(c) * int(_distinct(addr // SECTOR_BYTES, flat_on).sum())
            out.granules64 += int(c) * int(_distinct(addr // 64, flat_on).sum())
    for f in ("executions", "instructions", "lanes_on", "requests", "requested", "sectors", "granules64"):
        setattr(out, f, getattr(out, f) * scale)
    return out


def count_accesses(addresses, itemsize: int, layout, vec: int = 1, mask=None, kind: str = "load") -> SiteCount:
    """Requests, sectors, lanes and bytes of one load or store whose elements lie at ``addresses`` (bytes; an int
    array of the tensor's shape, or one more leading axis for several executions) under ``layout``
    (``trace_layout.Layout``), ``vec`` elements a thread access; ``mask`` (bool, broadcast to the addresses) turns
    elements off. The counting ``trace`` applies to every recorded load and store, for hand-built patterns.
    Raises ValueError for a kind other than "load" or "store", or a ``vec`` that does not divide a thread's run."""
    if kind not in ("load", "store"):
        raise ValueError(f"kind must be 'load' or 'store', got {kind!r}")
    addr = np.asarray(addresses, dtype=np.int64)
    m = np.ones(addr.shape, bool) if mask is None else np.broadcast_to(np.asarray(mask, bool), addr.shape)
    if addr.ndim == len(layout.order) + 1:
        runs = [(addr[i], m[i]) for i in range(addr.shape[0])]
    else:
        runs = [(addr, m)]
    site = _Site(("<pattern>", 0, 0), kind, runs[0][0].shape, int(itemsize))
    for a, mm in runs:
        site.add(0, a, np.ascontiguousarray(mm), [0])
    return _count_site(site, layout, int(vec), "given", 1.0)


def _count_tiles(site: _Site, scale: float, note: str) -> SiteCount:
    """A site the trace does not split into requests (a dot operand through shared memory): its bytes, and each
    execution's distinct sectors (what one copy of the tile reads from L2)."""
    out = SiteCount(site.key, site.kind, site.shape, site.itemsize, modelled=False, note=note)
    bases = np.asarray(site.bases, dtype=np.int64)
    pats = np.asarray(site.pattern_of, dtype=np.int64)
    for p, (off, mask) in enumerate(site.patterns):
        sel = pats == p
        if not sel.any():
            continue
        o = off.reshape(1, -1)[:, mask.reshape(-1)]
        residues, counts = np.unique(bases[sel] % 128, return_counts=True)
        out.executions += int(sel.sum())
        out.requested += int(sel.sum()) * o.size * site.itemsize
        for r, c in zip(residues, counts):
            out.sectors += int(c) * len(np.unique((o + int(r)) // SECTOR_BYTES))
            out.granules64 += int(c) * len(np.unique((o + int(r)) // 64))
    for f in ("executions", "requested", "sectors", "granules64"):
        setattr(out, f, getattr(out, f) * scale)
    return out


def _distinct_granules(sites: list, granule: int, chunk: int = 256) -> int:
    """Distinct ``granule``-byte granules over every active element of every execution of ``sites``."""
    seen = np.zeros(0, dtype=np.int64)
    for site in sites:
        bases = np.asarray(site.bases, dtype=np.int64)
        pats = np.asarray(site.pattern_of, dtype=np.int64)
        for p, (off, mask) in enumerate(site.patterns):
            b = bases[pats == p]
            o = off.reshape(-1)[mask.reshape(-1)]
            for i in range(0, b.size if o.size else 0, chunk):
                seen = np.union1d(seen, (b[i : i + chunk, None] + o[None, :]) // granule)
    return int(seen.size)


def _thread_run(layout, shape: tuple) -> int:
    """Elements a thread holds along the fastest dimension of ``shape`` under ``layout`` (its run, repeats included)."""
    if not shape:
        return 1
    d = layout.order[0]
    spt = layout.size_per_thread[d]
    tile = spt * layout.threads_per_warp[d] * layout.warps_per_cta[d]
    return spt * max(1, shape[d] // tile)


def _facts(site: _Site):
    masks = [m for _, m in site.patterns]
    offs = site.patterns[0][0] if site.patterns else np.zeros(site.shape, np.int64)
    bases = np.asarray(site.bases, dtype=np.int64)
    if any(not np.array_equal(o, offs) for o, _ in site.patterns):  # several offset patterns: the weakest facts
        facts = [tlay.axis_facts(o, [m], bases, site.itemsize) for o, m in site.patterns]
        c = tuple(min(f.contiguity[d] for f in facts) for d in range(len(site.shape)))
        return tlay.AxisFacts(c, min(f.divisibility for f in facts), min(f.mask_constancy for f in facts))
    return tlay.axis_facts(offs, masks, bases, site.itemsize)


def count_launch(rec: _Launch, gpu: hardware.GPUSpec, compiled) -> LaunchCount:
    """Count a recorded launch (``_Launch``) on ``gpu`` with its compile (``trace_layout.Compiled`` or None)."""
    traced = len(rec.work) or len(rec.sample)
    scale = rec.programs / traced if traced else 0.0
    mem = [s for s in rec.sites.values() if s.kind in ("load", "store")]
    for s in mem:
        s.facts = _facts(s) if s.patterns and s.shape not in ((), (1,)) else None
    ok = compiled is not None and not compiled.error
    source = f"compiled sm_{compiled.cc} (Triton {compiled.triton})" if ok else "emulated"
    sites = []
    for s in mem:
        c = _match(s, compiled)
        if s.dot or (c is not None and c.kind == "async"):
            sites.append(_count_tiles(s, scale, "a tl.dot operand, copied to shared memory: bytes only"))
            continue
        if c is not None and c.kind == "tma":
            rec.refused.append(("tma", s.key, "a TMA copy: the copy engine's requests are not modelled"))
            continue
        shape = s.shape if s.shape != (1,) else ()
        if c is not None and (c.layout is not None or not shape) and tuple(c.shape) == tuple(shape):
            layout = c.layout or tlay.default_layout((), rec.num_warps, ())
            vec = max(1, (c.width or s.itemsize) // s.itemsize)
            src = f"compiled sm_{compiled.cc}"
        else:
            layout, vec = (
                tlay.coalesced_layout(s, mem, rec.num_warps)
                if shape
                else (tlay.default_layout((), rec.num_warps, ()), 1)
            )
            src = "emulated"
        run = _thread_run(layout, shape)
        vec = math.gcd(vec, run)
        sites.append(_count_site(s, layout, vec, src, scale))
    for s in rec.sites.values():
        if s.kind == "where" and s.lanes:
            per = len(s.programs) / traced if traced else 0.0
            sites.append(
                SiteCount(
                    s.key,
                    "where",
                    s.shape,
                    true_share=s.true / s.lanes,
                    per_program=per,
                    executions=len(s.programs) * scale,
                )
            )
    sites.sort(key=lambda c: (c.where[1], c.where[2], c.kind))
    reads = [s for s in mem if s.kind == "load"]
    writes = [s for s in mem if s.kind == "store"]
    sampled = traced < rec.programs
    low_r = None if sampled else _distinct_granules(reads, DRAM_READ_GRANULE) * DRAM_READ_GRANULE
    low_w = None if sampled else _distinct_granules(writes, DRAM_WRITE_GRANULE) * DRAM_WRITE_GRANULE
    high_r = sum(c.granules64 for c in sites if c.kind == "load") * 64
    high_w = sum(c.sectors for c in sites if c.kind == "store") * SECTOR_BYTES
    res = residency(compiled.regs if ok else None, compiled.smem if ok else None, rec.num_warps, gpu)
    wp = None
    if gpu.sms and rec.programs:
        wp = wave_model.wave_plan(
            rec.programs, 1, (1, 1), sms=gpu.sms, blocks_per_sm=res[0] if res and res[0] > 0 else 1
        )
    work = list(rec.work.values())
    balance = (sum(work) / len(work)) / max(work) if work and max(work) else 1.0
    return LaunchCount(
        kernel=rec.name,
        grid=rec.grid,
        programs=rec.programs,
        traced=traced,
        num_warps=rec.num_warps,
        gpu=gpu.name,
        cc=None if compiled is None else compiled.cc,
        layout_source=source if ok else ("emulated" if compiled is not None else f"emulated ({rec.compile_note})"),
        regs=compiled.regs if ok else None,
        smem=compiled.smem if ok else None,
        spill_bytes=compiled.spill_bytes if ok else None,
        residency=res,
        wave_plan=wp,
        balance=balance,
        sites=sites,
        refused=list(rec.refused),
        dram_read=(low_r, high_r),
        dram_write=(low_w, high_w),
        compile_error=None if compiled is None or ok else compiled.error,
    )


# ---- the trace of one call ----------------------------------------------------------------------------------


@dataclass
class Trace:
    """Every launch of one traced call (``launches``: ``LaunchCount`` each), on ``gpu``; ``seconds`` the trace took
    (interpretation, compile and count)."""

    launches: list
    gpu: str
    seconds: float

    def total(self, kind: str, what: str) -> float | None:
        """``LaunchCount.total`` summed over the launches (None where any launch has None)."""
        vals = [lc.total(kind, what) for lc in self.launches]
        return None if any(v is None for v in vals) else sum(vals)

    def per_request(self, kind: str) -> float | None:
        r, s = self.total(kind, "requests"), self.total(kind, "sectors")
        return s / r if r and s is not None else None

    def dram(self, kind: str = "read") -> tuple:
        """(low, high) DRAM bytes of ``kind`` ("read" or "write") over the launches; low None where any is."""
        pairs = [lc.dram_read if kind == "read" else lc.dram_write for lc in self.launches]
        low = None if any(p[0] is None for p in pairs) else sum(p[0] for p in pairs)
        return (low, sum(p[1] for p in pairs))

    def __str__(self) -> str:
        head = f"traced in Triton's interpreter, counted as the {self.gpu} would issue it ({self.seconds:.1f} s)"
        return "\n".join([head] + [lc.summary() for lc in self.launches])


def _planned(gpu) -> hardware.GPUSpec:
    if gpu is None:
        return plan.current().gpu
    return gpu if isinstance(gpu, hardware.GPUSpec) else hardware.get(gpu)


def _target(spec: hardware.GPUSpec, layout: str) -> int | None:
    """The compile target for ``spec`` (a compute capability that ``gpulab.measure.targets`` compiles), or None."""
    from .targets import CCS

    if layout == "emulated" or spec.compute_capability is None:
        return None
    cc = spec.compute_capability[0] * 10 + spec.compute_capability[1]
    return cc if cc in CCS else None


def trace(
    fn,
    *args,
    gpu=None,
    layout: str = "compiled",
    max_programs: int = MAX_PROGRAMS,
    time_limit_s: float = TIME_LIMIT_S,
    **kwargs,
) -> Trace:
    """Run ``fn(*args, **kwargs)`` (any function that launches Triton kernels: a launcher, ``kernel[grid]``) with
    every launch in Triton's interpreter, and count it (module docstring) as ``gpu`` would issue it (a name of
    ``gpulab.core.hardware`` or a ``GPUSpec``; default the GPU planned for). ``layout``: "compiled" (compile each
    kernel for the GPU's target where possible, else emulate) or "emulated" (never compile). The launches' outputs
    are written as by a normal call, except in a launch with more than ``max_programs`` programs, whose untraced
    programs write nothing. Raises TraceRefused when ``fn`` launches no Triton kernel, TraceLimit past
    ``time_limit_s``, ``MAX_LAUNCHES`` or the recorded-address budget, TraceError when the call raises (the
    error's first line), ValueError naming a bad ``layout``, TypeError for an ``fn`` that is not callable, KeyError
    for a GPU name ``gpulab.core.hardware`` does not know."""
    if layout not in ("compiled", "emulated"):
        raise ValueError(f"layout must be 'compiled' or 'emulated', got {layout!r}")
    if not callable(fn):
        raise TypeError(f"fn must be a function that launches Triton kernels, got {type(fn).__name__}")
    spec = _planned(gpu)
    start = time.perf_counter()
    tracer = _Tracer(_target(spec, layout), int(max_programs), float(time_limit_s))
    try:
        with tracer:
            fn(*args, **kwargs)
    except BaseException as e:
        for rec in tracer.launches:  # no count follows: the compiles started for it stop
            if rec.compile is not None:
                rec.compile.cancel()
        if not isinstance(e, Exception):
            raise
        cause = e
        while cause.__cause__ is not None and not isinstance(cause, TraceError):
            cause = cause.__cause__
        if isinstance(cause, TraceError):
            raise cause from None
        first = (str(e).splitlines() or [""])[0][:300]
        raise TraceError(f"the call raised {type(e).__name__}: {first}") from e
    if not tracer.launches:
        raise TraceRefused("the call launched no Triton kernel (a torch op, or a CUDA kernel, is not traced)")
    remaining = lambda: max(5.0, tlay.COMPILE_TIMEOUT_S - (time.perf_counter() - start))  # noqa: E731
    counts = [
        count_launch(rec, spec, rec.compile.result(remaining()) if rec.compile else None) for rec in tracer.launches
    ]
    return Trace(counts, spec.name, time.perf_counter() - start)


# ---- the lessons' one call: your kernel's counts beside the model and gpulab's recorded kernel -----------------


def report(
    fn,
    *args,
    model: dict | None = None,
    recorded: tuple | None = None,
    show=None,
    gpu=None,
    print_it: bool = True,
    **kwargs,
) -> str:
    """Trace ``fn(*args, **kwargs)`` (``trace``) and show, in at most 15 lines, the learner's kernel's counts beside
    the model and beside gpulab's recorded kernel (``table``: its arguments ``model``, ``recorded``, ``show``).
    Never raises: a call the trace refuses, a bound it passes or an error in the kernel is one line saying so.
    Returns the text (and prints it when ``print_it``)."""
    try:
        t = trace(fn, *args, gpu=gpu, **kwargs)
        text = table(t, model=model, recorded=recorded, show=show)
    except Exception as e:  # noqa: BLE001  (a notebook's call never fails here: the reason, in one line)
        text = not_traced(e)
    if print_it:
        print(text)
    return text


def not_traced(e: Exception) -> str:
    """The one line ``report`` prints for a call it could not count: the trace's own reason, or the error's first
    line."""
    if isinstance(e, TraceError):
        return f"not traced: {e}"
    return f"not traced: {type(e).__name__}: {(str(e).splitlines() or [''])[0][:200]}"
