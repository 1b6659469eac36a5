"""Lesson 00's benchmark suite (the machine): the memory hierarchy's staircase and latency hiding.

    python -m gpulab.bench --only lesson00

GPU only (``time_ms`` raises in interpreter mode); well under a minute on an H200.

- Staircase: ``read_sum`` reads a working set of W bytes (fp32; ``SIZES``: 4 KiB to 4 GiB, log-spaced,
  whole 4 KiB tiles) on about ``PROGRAMS_PER_SM`` programs per SM (``staircase_plan``), and makes enough
  passes over it inside one launch to read about ``TARGET_BYTES``: ``time_ms`` flushes the L2 before each
  launch, so only the passes after the first can hit a cache. Working sets up to ``replicate_limit`` are
  read whole by every program (each SM keeps its own copy: the L1 step is one SM's L1; past it, the L2 serves
  a set that every SM reads faster than one they share out); larger ones are shared out, one part per
  program, read past the L1 (the L2 and HBM steps). Bandwidth = bytes read (``read_sum_counts``) / median
  time, in TB/s.
- Latency hiding: ``copy_persistent`` copies ``COPY_N`` floats on exactly P programs of ``NUM_WARPS`` warps
  (``COPY_PROGRAMS``: 1 to 4096); each warp moves 2 x 4 x ``BLOCK`` / ``NUM_WARPS`` = 2 KiB (read + write)
  per trip through its loop. Little's law, bandwidth = min(peak, warps x bytes per warp / latency), is
  fitted to the sweep (``gpulab.models.memory.fit_little``); when the compiler keeps more than one trip in flight,
  the fitted latency is the real one divided by that depth.
"""

from __future__ import annotations

import math

import torch
from tqdm.auto import tqdm

from ..core import hardware, reference, timing
from ..kernels.read_bw import NUM_WARPS, copy_counts, copy_persistent, read_sum, read_sum_counts
from ..measure import live
from ..measure.device import properties
from ..models import memory
from ..models.waves import cdiv

KEY = "lesson00"
BLOCK = 1024  # fp32 elements per load: 4 KiB
PROGRAMS_PER_SM = 8
REPLICATE_TILES = 4  # see replicate_limit
TARGET_BYTES = 4 << 30  # bytes read per timed launch of the staircase
SIZES = tuple(sorted({max(1, round(2 ** (12 + 20 * i / 24) / (4 * BLOCK))) * 4 * BLOCK for i in range(25)}))
COPY_N = 1 << 26  # fp32 elements copied in the latency sweep (256 MiB each way)
COPY_PROGRAMS = tuple(2**k for k in range(13))
WARMUP_MS, REP_MS = 10, 40


# What notebook 00 measures live: every third working set, every other grid, 1 GiB read per launch.
LIVE = dict(progress=False, sizes=SIZES[::3], copy_programs=COPY_PROGRAMS[::2], target_bytes=1 << 30)
INFO_KEYS = ("name", "sms", "regs_per_sm", "smem_per_sm", "l2_bytes", "memory_bytes", "threads_per_sm")


def device_info(device: int = 0) -> dict:
    """This GPU's numbers as torch reports them (``gpulab.measure.device.properties``; GPU or test clock): name, SMs,
    registers and shared memory per SM, L2 and memory in bytes, threads per SM."""
    p = properties(device)
    return {k: p[k] for k in INFO_KEYS}


def anatomy(info: dict, spec=None) -> str:
    """This GPU as the lesson names its parts, at most 10 lines: ``info`` is ``device_info()`` (torch's numbers,
    live or from a record's "device"), ``spec`` a ``hardware.GPUSpec`` for the datasheet rates (default: the
    table's entry for ``info["name"]``; None or unknown: those lines are left out). Threads and registers per
    thread at full residency follow from torch's numbers: threads per SM x SMs, registers per SM / threads per
    SM (CUDA C++ Programming Guide, "Hardware Multithreading"). Raises KeyError when ``info`` lacks name or sms."""
    spec = spec if spec is not None else hardware.find(info["name"])
    sms, threads, regs = info["sms"], info.get("threads_per_sm"), info.get("regs_per_sm")
    lines = [f"{info['name']}: {sms} SMs (streaming multiprocessors)"]
    if threads:
        lines.append(
            f"  per SM: up to {threads:,} threads resident = {threads // 32} warps of 32; "
            f"{threads * sms:,} threads on the whole GPU"
        )
    if regs:
        per_thread = f", {regs // threads} per thread when all {threads:,} are resident" if threads else ""
        lines.append(f"  registers: {regs:,} x 32 bit = {_size(4 * regs)} per SM{per_thread}")
    if info.get("smem_per_sm"):
        lines.append(f"  shared memory: up to {_size(info['smem_per_sm'])} per SM (carved out of the SM's L1)")
    if info.get("l2_bytes"):
        lines.append(f"  L2: {_size(info['l2_bytes'])}, one cache shared by all {sms} SMs")
    if info.get("memory_bytes"):
        hbm = f" at {spec.hbm_tbps:g} TB/s (datasheet)" if spec is not None else ""
        b = info["memory_bytes"]
        lines.append(f"  HBM: {b / 1e9:.1f} GB = {b / 2**30:.1f} GiB{hbm}, off the chip")
    if spec is not None:
        fp32, tc = spec.peak_tflops.get("fp32"), spec.peak_tflops.get("bf16") or spec.peak_tflops.get("fp16")
        if fp32 and tc:
            dt = "bf16" if spec.peak_tflops.get("bf16") else "fp16"
            lines.append(
                f"  FP32 units: {fp32:g} TFLOP/s; {dt} tensor cores: {tc:g} TFLOP/s, {tc / fp32:.1f}x "
                f"(datasheet {spec.name}, dense)"
            )
    return "\n".join(lines)


def run(
    progress: bool = True,
    sizes=SIZES,
    copy_programs=COPY_PROGRAMS,
    copy_n: int = COPY_N,
    target_bytes: int = TARGET_BYTES,
) -> dict:
    """Measure the staircase and the latency sweep on this GPU; returns a JSON-able dict (see ``report``).
    sizes: working sets in bytes (multiples of 4 KiB); copy_programs: grid sizes of the copy; copy_n: floats
    copied; target_bytes: bytes read per staircase launch. Raises NoGPUTimingError without a GPU."""
    timing.require_gpu("lesson00's suite")
    data = _run(timing.time_ms, timing.device(), device_info(), progress, sizes, copy_programs, copy_n, target_bytes)
    return timing.stamp(data)


def l2_sizes(spec: hardware.GPUSpec, info: dict) -> list[int]:
    """The working sets of ``SIZES`` that the L2 plateau is read from on a GPU of ``spec`` (its cache sizes) and
    ``info`` (``device_info()``: SMs, L2 bytes): shared out (above ``replicate_limit``) and inside the L2's
    window of ``memory.fit_plateaus`` (more than twice one SM's L1, at most half the L2)."""
    l1, l2 = (lv.capacity for lv in memory.staircase_levels(spec)[:2])
    limit = replicate_limit(info["sms"], info.get("l2_bytes"))
    return [s for s in SIZES if s > limit and s > 2 * l1 and 2 * s <= l2]


def l2_plateau(spec: hardware.GPUSpec | None = None, target_bytes: int | None = None) -> float | None:
    """This GPU's L2 plateau in TB/s, measured now: the staircase at ``l2_sizes`` alone (no latency sweep, a few
    seconds), fitted as ``memory.fit_record`` fits a whole record. ``spec``: whose cache sizes choose the sizes
    (default: the table's entry for this GPU); ``target_bytes``: bytes read per launch (default
    ``TARGET_BYTES``). None where the table does not know this GPU's caches or no size falls in the window. GPU
    or test clock only (raises NoGPUTimingError elsewhere)."""
    timing.require_gpu("an L2 plateau")
    info = device_info()
    spec = spec or hardware.find(info["name"])
    if spec is None or None in (spec.sms, spec.regs_per_sm, spec.l1_smem_per_sm_kib, spec.l2_kib, spec.hbm_gb):
        return None  # the table has no memory hierarchy for it (memory.hierarchy)
    sizes = l2_sizes(spec, info)
    if not sizes:
        return None
    data = _run(timing.time_ms, timing.device(), info, False, sizes, (), 1, target_bytes or TARGET_BYTES)
    return memory.fit_record(data, spec)["plateaus"]["L2"]


def roofs(matmul: tuple[str, ...] | None = None, gpu: str = reference.DEFAULT_GPU) -> live.Shown:
    """A device profile and the L2 plateau beside it, the roofs a lesson's roofline reads: ``data`` holds
    ``profile`` (a device profile as JSON, ``live.profile``) and ``l2_tbps`` (TB/s; None where gpulab's hardware
    table lacks this GPU's caches, and the label says so).

    Where ``timing.live()``: this GPU's: ``live.profile(matmul)`` (the saved profile, else measured now) and the
    L2 plateau measured now (``l2_plateau``, a few seconds). Elsewhere the recording of ``gpu``: its profile and
    ``memory.fit_record`` of its lesson 00. Raises KeyError naming the key when that file lacks the profile or
    lesson 00."""
    if timing.live():
        mine = live.profile(matmul)
        l2 = l2_plateau()
        l2_from = "L2 (lesson 00's staircase) measured now" if l2 else "no L2 plateau for this GPU"
        return live.Shown(dict(profile=mine.data, l2_tbps=l2), f"{mine.where}; {l2_from}", True)
    shown = live.recall(None, gpu)
    for key in ("profile", KEY):
        if key not in shown.data:
            raise KeyError(f"{reference.path_for(gpu)} has no {key!r}: record it (python -m gpulab.bench --record)")
    mem = shown.data[KEY]
    l2 = memory.fit_record(mem, hardware.get(mem["device"]["name"]))["plateaus"]["L2"]
    return live.Shown(dict(profile=shown.data["profile"], l2_tbps=l2), shown.where, False)


def replicate_limit(sms: int, l2_bytes: int | None = None) -> int:
    """The largest working set (bytes) that every program reads whole: ``REPLICATE_TILES`` tiles per program
    (past it, sharing the set out still gives each program several tiles to keep in flight), and at most a
    quarter of the L2 when its size is known (so that the many readers of one part cannot make a set larger
    than the L2 look like an L2 hit)."""
    limit = PROGRAMS_PER_SM * sms * REPLICATE_TILES * 4 * BLOCK
    return min(limit, l2_bytes // 4) if l2_bytes else limit


def staircase_plan(working_set: int, sms: int, l2_bytes: int | None = None, target_bytes: int = TARGET_BYTES) -> dict:
    """The launch that reads ``working_set`` bytes: programs, part (elements), passes, whether loads skip the
    L1 (``l2_only``), bytes read per launch.

    Up to ``replicate_limit`` bytes, ``PROGRAMS_PER_SM`` x ``sms`` programs each read the whole working set
    and keep it in their SM's L1 when it fits; above, it is cut into one part per program (a multiple of 16
    elements, so loads stay aligned and vectorized), no part is read twice in a pass (a second reader would
    find it in the L2), and the loads skip the L1 (else the SMs' L1s together would hold a set as large as
    their sum, which on an H200 is more than half the L2).
    """
    n = working_set // 4
    programs = PROGRAMS_PER_SM * sms
    l2_only = working_set > replicate_limit(sms, l2_bytes)
    if l2_only:
        part = cdiv(n, programs)
        part += -part % 16
        programs = cdiv(n, part)
    else:
        part = n
    per_pass = read_sum_counts(n, programs, part)[1]
    passes = max(1, round(target_bytes / per_pass))
    return dict(
        working_set=working_set,
        programs=programs,
        part=part,
        passes=passes,
        l2_only=l2_only,
        bytes_read=read_sum_counts(n, programs, part, passes)[1],
    )


def _expected_total(x, plan: dict) -> float:
    """What the partial sums of ``plan`` add up to, from the parts' float64 sums: part j is read by every
    program p with p mod n_parts = j when parts are fewer than programs, else once; ``passes`` times."""
    n, part, programs = x.numel(), plan["part"], plan["programs"]
    full = n // part
    sums = x[: full * part].view(full, part).double().sum(1).tolist() + (
        [x[full * part :].double().sum().item()] if n % part else []
    )
    k = len(sums)
    readers = [programs // k + (j < programs % k) for j in range(k)] if k < programs else [1] * k
    return plan["passes"] * sum(c * s for c, s in zip(readers, sums))


def _run(time_ms, device, info, progress, sizes, copy_programs, copy_n, target_bytes) -> dict:
    """``run`` with the timer, the device and the device's numbers passed in, so the tests can drive it in the
    interpreter with a fake timer (an interpreter run is never a GPU time)."""
    sizes = sorted(int(s) for s in sizes)
    if not sizes or any(s % (4 * BLOCK) or s <= 0 for s in sizes):
        raise ValueError(f"sizes must be positive multiples of {4 * BLOCK} bytes, got {sizes}")
    out = dict(
        device=info,
        block=BLOCK,
        num_warps=NUM_WARPS,
        programs_per_sm=PROGRAMS_PER_SM,
        replicate_limit=replicate_limit(info["sms"], info.get("l2_bytes")),
        staircase=[],
        latency=dict(n=copy_n, bytes_per_warp=2 * 4 * BLOCK // NUM_WARPS, rows=[]),
    )
    bar = tqdm(total=len(sizes) + len(copy_programs), desc="lesson00", disable=not progress)
    gen = torch.Generator(device=device).manual_seed(0)
    # small integers: every partial sum is exact in fp32 (a check that each launch read what it should)
    x = torch.randint(0, 4, (sizes[-1] // 4,), device=device, generator=gen).float()
    for w in sizes:
        plan = staircase_plan(w, info["sms"], info.get("l2_bytes"), target_bytes)
        xs = x[: w // 4]
        args = (xs, plan["programs"], plan["part"], plan["passes"], BLOCK, plan["l2_only"])
        got = read_sum(*args).double().sum().item()
        if got != _expected_total(xs, plan):
            raise RuntimeError(f"read_sum over {w} bytes summed to {got}, expected {_expected_total(xs, plan)}")
        t = time_ms(lambda: read_sum(*args), warmup_ms=WARMUP_MS, rep_ms=REP_MS)
        out["staircase"].append(
            dict(plan, ms=t.median_ms, p20_ms=t.p20_ms, p80_ms=t.p80_ms, tbps=t.rate(plan["bytes_read"]))
        )
        bar.update()
    x = xs = args = None  # free the working set before the copy's buffers
    src = torch.randn(copy_n, device=device, generator=gen)
    dst = torch.empty_like(src)
    for p in copy_programs:
        t = time_ms(lambda: copy_persistent(src, p, BLOCK, out=dst), warmup_ms=WARMUP_MS, rep_ms=REP_MS)
        if not torch.equal(src, dst):
            raise RuntimeError(f"copy_persistent on {p} programs did not copy its input")
        out["latency"]["rows"].append(
            dict(
                programs=p,
                warps=p * NUM_WARPS,
                ms=t.median_ms,
                p20_ms=t.p20_ms,
                p80_ms=t.p80_ms,
                tbps=t.rate(copy_counts(copy_n)),
            )
        )
        dst.zero_()
        bar.update()
    bar.close()
    return out


def _size(b: float) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if b >= scale:
            return f"{b / scale:.3g} {unit}"
    return f"{b:.0f} B"


def report(data: dict, full: bool = False) -> str:
    """At most 15 lines (every point with ``full=True``): staircase points, the plateaus, the latency sweep
    and Little's-law fit."""
    f = memory.fit_record(data)
    st, rows = data["staircase"], data["latency"]["rows"]
    lines = [
        f"{data['device']['name']}: fp32 reads, {data['programs_per_sm']} programs per SM, "
        f"{data['num_warps']} warps each"
    ]
    pick = st if full else st[:: max(1, math.ceil(len(st) / 5))]
    lines += [
        "  staircase: " + ", ".join(f"{_size(r['working_set'])} {r['tbps']:.2f}" for r in pick[i : i + 3]) + " TB/s"
        for i in range(0, len(pick), 3)
    ]
    lines.append(
        f"  (sets up to {_size(data['replicate_limit'])} read whole by every program, larger ones shared "
        "out past the L1)"
    )
    if f["plateaus"]:
        spec = f["spec"]
        lines.append(
            "  plateaus: "
            + ", ".join(f"{k} {v:.2f} TB/s" if v else f"{k} -" for k, v in f["plateaus"].items())
            + f" (datasheet HBM {spec.hbm_tbps:.2f})"
        )
    if rows:
        pick = rows if full else rows[:: max(1, math.ceil(len(rows) / 6))]
        lines += [
            "  latency sweep (copy): "
            + ", ".join(f"{r['warps']} warps {r['tbps']:.3g}" for r in pick[i : i + 3])
            + " TB/s"
            for i in range(0, len(pick), 3)
        ]
        lat, peak = f["little"]
        lines.append(
            f"  Little's law fit: latency {lat:.0f} ns, peak {peak:.2f} TB/s, "
            f"{peak * lat * 1e3 / 2**20:.2f} MiB in flight at the peak"
        )
    return "\n".join(lines)
