"""Lesson 10 (beyond one GPU) benchmark suite: ``python -m gpulab.bench --only lesson10``.

- ``collectives``: all-reduce, reduce-scatter, all-gather and broadcast on ``torch.distributed`` over message
  sizes, on p local processes (``gpulab.core.procs``): gloo on CPU tensors anywhere, NCCL with one GPU a process
  where there are p GPUs. Timed as nccl-tests time them (doc/PERFORMANCE.md): a barrier, then ``reps``
  back-to-back calls on the wall clock (after a device synchronize on NCCL), the slowest rank's mean; algbw and
  busbw from ``gpulab.models.comm``. On CPU processes this is a measurement of this machine's gloo, not of a GPU
  link, and every record says which backend and how many processes measured it.
- ``link`` (GPU only): host-to-device and device-to-host copies against size, pinned against pageable host
  memory (``gpulab.core.timing.time_ms``; bandwidth = bytes / median time).
- ``overlap`` (GPU only): a matmul on one stream and a pinned host-to-device copy on another, alone and
  together: how much of the copy the kernel hides.

``run()`` records ``link`` and ``overlap`` on one GPU, and ``collectives`` with NCCL when the machine has two
GPUs or more (the multi-GPU recording; where it is missing the lesson says so). ``STEPS`` name the three;
``HEADLINE_STEPS`` (what ``tools/gpu_check.py`` runs) is the link, the lesson's measurement. Each copy and the
overlap are timed with a 25 ms warm-up and a 100 ms repeat budget (``TIMING``): hundreds of launches for a small
copy, and do_bench's floor of a few for a 1 GiB one.
"""

from __future__ import annotations

import contextlib
import time

import torch
import torch.distributed as dist

import gpulab

from ..core import procs, timing
from ..measure import live
from ..models import comm

KEY = "lesson10"
LINK_SIZES = tuple(2**k for k in range(10, 31, 2))  # bytes: 1 KiB to 1 GiB
COLLECTIVE_SIZES = tuple(2**k for k in range(10, 23, 2))  # bytes: 1 KiB to 4 MiB (float32 messages)
NCCL_SIZES = tuple(2**k for k in range(10, 31, 2))
#: What the notebook measures live: on a GPU the link at five sizes and the overlap, never NCCL (a multi-GPU
#: recording is the suite's); everywhere gloo on 2 and 4 CPU processes, small messages, a few repetitions.
LIVE = dict(link_sizes=(2**12, 2**16, 2**20, 2**24, 2**28), overlap_bytes=2**28, nccl=False)
LIVE_COLLECTIVES = dict(ps=(2, 4), sizes=COLLECTIVE_SIZES, reps=5)
TIMING = dict(warmup_ms=25, rep_ms=100)  # do_bench's budgets for each copy and each overlap timing
STEPS = ("link", "overlap", "collectives")
HEADLINE_STEPS = ("link",)


# ---- collectives -----------------------------------------------------------------------------------------


def _collective_call(name: str, n_bytes: int, p: int, dev: str):
    """A function of no arguments running one ``name`` collective over an array of ``n_bytes`` (nccl-tests'
    S: the whole array, output of all-gather, input of reduce-scatter), float32 on ``dev``."""
    n = max(n_bytes // 4 // p * p, p)  # a multiple of p elements: the tensor collectives need equal chunks
    full = torch.ones(n, device=dev)
    part = torch.ones(n // p, device=dev)
    # torch 2.13 renames the tensor forms *_single (the old names warn); torch 2.11 has only the old names
    reduce_scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
    all_gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    calls = {
        "all_reduce": lambda: dist.all_reduce(full),
        "reduce_scatter": lambda: reduce_scatter(part, full),
        "all_gather": lambda: all_gather(full, part),
        "broadcast": lambda: dist.broadcast(full, 0),
    }
    return calls[name], n * 4


def _collective_rank(rank: int, p: int, backend: str, sizes, reps: int, names) -> list[dict]:
    """One rank of ``collectives``: per (collective, size) a warm-up call, a barrier, ``reps`` calls timed on
    the wall clock; returns this rank's mean seconds per call."""
    dev = f"cuda:{rank}" if backend == "nccl" else "cpu"
    sync = torch.cuda.synchronize if backend == "nccl" else (lambda: None)
    out = []
    for name in names:
        for s in sizes:
            call, n_bytes = _collective_call(name, s, p, dev)
            call()
            sync()
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(reps):
                call()
            sync()
            out.append(dict(collective=name, n_bytes=n_bytes, t_s=(time.perf_counter() - t0) / reps))
    return out


def collectives(ps=(2, 4), sizes=COLLECTIVE_SIZES, reps: int = 5, backend: str = "gloo", names=comm.COLLECTIVES,
                timeout_s: float = 60.0) -> live.Shown:  # fmt: skip
    """Measure ``names`` over message ``sizes`` (bytes) on each p of ``ps`` processes with ``backend``. Returns a
    ``live.Shown``: ``data`` {backend, ps, device, rows}, each row collective, p, n_bytes, t_s (the slowest rank),
    algbw and busbw (bytes/s, ``gpulab.models.comm``), and the bytes each rank sends in the ring model; ``device``
    "CPU processes" or the GPU's name; ``where`` "measured now ..." naming the backend and the processes. Raises
    RuntimeError naming the rank and its error when a rank fails or the run passes ``timeout_s``; NCCL needs p
    GPUs."""
    if backend == "nccl" and (not gpulab.ON_GPU or max(ps) > torch.cuda.device_count()):
        raise RuntimeError(f"collectives with nccl need {max(ps)} GPUs; use backend='gloo' on CPU processes")
    rows = []
    for p in ps:
        res = procs.run_group(_collective_rank, p, args=(backend, tuple(sizes), reps, tuple(names)), backend=backend,
                              timeout_s=timeout_s)  # fmt: skip
        if not res.ok:
            why = "timed out" if res.timed_out else next(iter(res.errors.values())).splitlines()[0]
            raise RuntimeError(f"collectives on p = {p} ({backend}): {why}")
        for per_rank in zip(*(res.results[r] for r in range(p))):
            r0 = per_rank[0]
            t = max(r["t_s"] for r in per_rank)
            name, n = r0["collective"], r0["n_bytes"]
            rows.append(
                dict(
                    collective=name,
                    p=p,
                    n_bytes=n,
                    t_s=t,
                    algbw=comm.algbw(n, t),
                    busbw=comm.busbw(name, p, n, t),
                    model_bytes_per_rank=comm.bytes_per_rank(name, p, n),
                )
            )
    dev = torch.cuda.get_device_name(0) if backend == "nccl" else "CPU processes"
    data = dict(backend=backend, ps=list(ps), device=dev, rows=rows)
    return live.Shown(data, f"measured now: {collectives_label(data)}", True)


def multi_gpu(shown: live.Shown) -> live.Shown | None:
    """The NCCL collectives on several GPUs in ``shown``, lesson 10's result (measured now or recorded): ``data``
    the collectives record, ``where`` what measured it and ``shown.where``; None where it holds none."""
    rec = (shown.data or {}).get("collectives")
    if rec is None:
        return None
    return live.Shown(rec, f"{collectives_label(rec)}; {shown.where}", shown.live)


def collectives_label(data: dict) -> str:
    """What measured a record of ``collectives``: "gloo on 2, 4 CPU processes", "NCCL on 2, 4, 8 GPUs (NVIDIA
    H200)"."""
    ps = ", ".join(map(str, data["ps"]))
    if data["backend"] == "gloo":
        return f"gloo on {ps} CPU processes of this machine"
    return f"NCCL on {ps} GPUs ({data['device']})"


# ---- the host-device link (GPU only) -----------------------------------------------------------------------


def _host(n_bytes: int, pinned: bool) -> torch.Tensor:
    """A host buffer; pinned (page-locked) only on a GPU machine (pinning needs the CUDA driver)."""
    return torch.ones(n_bytes, dtype=torch.uint8, pin_memory=pinned and gpulab.ON_GPU)


def link(sizes=LINK_SIZES, progress: bool = False) -> list[dict]:
    """Host-to-device and device-to-host copy bandwidth against ``sizes`` (bytes), from pinned and from
    pageable host memory: each row direction ("H2D"/"D2H"), pinned, n_bytes, ms (median of
    ``timing.time_ms``), gbps (1e9 bytes/s). GPU only (the test clock runs it on the CPU)."""
    timing.require_gpu("a host-device copy timing")
    dev = timing.device()
    rows = []
    for n in sizes:
        dbuf = torch.ones(n, dtype=torch.uint8, device=dev)
        for pinned in (True, False):
            hbuf = _host(n, pinned)
            for direction, fn in (
                ("H2D", lambda: dbuf.copy_(hbuf, non_blocking=pinned)),
                ("D2H", lambda: hbuf.copy_(dbuf, non_blocking=pinned)),
            ):
                t = timing.time_ms(fn, **TIMING)
                rows.append(dict(direction=direction, pinned=pinned, n_bytes=n, ms=t.median_ms, gbps=t.rate(n, 1e9)))
    return rows


def _stream():
    return torch.cuda.Stream() if gpulab.ON_GPU else None


def _on(stream):
    return torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext()


def _wait(waiter, other) -> None:
    if waiter is not None and other is not None:
        waiter.wait_stream(other)


def overlap(n_bytes: int = 2**28, matmul_n: int | None = None) -> dict:
    """A pinned host-to-device copy of ``n_bytes`` and a bf16 matmul of ``matmul_n``³ (default: sized from the
    copy's own time so the two take about as long), each alone and then on two streams at once: copy_ms,
    kernel_ms, both_ms, serial_ms (their sum) and hidden (the share of the shorter one the overlap hid:
    (serial - both) / min). GPU only (the test clock runs it on the CPU, on one stream)."""
    timing.require_gpu("a copy-overlap timing")
    dev = timing.device()
    dtype = torch.bfloat16 if gpulab.ON_GPU else torch.float32
    hbuf, dbuf = _host(n_bytes, True), torch.empty(n_bytes, dtype=torch.uint8, device=dev)
    copy = lambda: dbuf.copy_(hbuf, non_blocking=True)  # noqa: E731
    t_copy = timing.time_ms(copy, **TIMING).median_ms
    if matmul_n is None:
        matmul_n = 64 if not gpulab.ON_GPU else _matmul_n_for(t_copy, dev)
    a = torch.randn(matmul_n, matmul_n, device=dev, dtype=dtype)
    c = torch.empty_like(a)
    kernel = lambda: torch.matmul(a, a, out=c)  # noqa: E731
    s_copy, s_kernel = _stream(), _stream()

    def both():
        cur = torch.cuda.current_stream() if gpulab.ON_GPU else None
        _wait(s_copy, cur)
        _wait(s_kernel, cur)
        with _on(s_kernel):
            kernel()
        with _on(s_copy):
            copy()
        _wait(cur, s_copy)
        _wait(cur, s_kernel)

    t_kernel = timing.time_ms(kernel, **TIMING).median_ms
    t_both = timing.time_ms(both, **TIMING).median_ms
    serial = t_copy + t_kernel
    return dict(
        n_bytes=n_bytes,
        matmul_n=matmul_n,
        copy_ms=t_copy,
        kernel_ms=t_kernel,
        both_ms=t_both,
        serial_ms=serial,
        hidden=(serial - t_both) / min(t_copy, t_kernel),
    )


def _matmul_n_for(target_ms: float, dev: str) -> int:
    """The power-of-two matmul size whose bf16 time is closest to ``target_ms`` (GPU only)."""
    best, best_gap = 1024, float("inf")
    for n in (1024, 2048, 4096, 8192, 16384):
        a = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
        t = timing.time_ms(lambda: a @ a, warmup_ms=10, rep_ms=50).median_ms
        if abs(t - target_ms) < best_gap:
            best, best_gap = n, abs(t - target_ms)
        if t > target_ms:
            break
    return best


def run(
    progress: bool = True,
    link_sizes=LINK_SIZES,
    overlap_bytes: int = 2**28,
    nccl: bool | None = None,
    steps=None,
) -> dict:
    """Lesson 10's record: ``link`` and ``overlap`` on this GPU, ``collectives`` with NCCL over the GPUs when
    there are two or more (``nccl``: None decides by the GPU count), and ``gpu``. ``steps``: a subset of ``STEPS``
    (default all). Raises ValueError naming an unknown step. GPU only."""
    timing.require_gpu("lesson 10's suite")
    unknown = set(steps or ()) - set(STEPS)
    if unknown:
        raise ValueError(f"steps must be drawn from {STEPS}, got unknown {sorted(unknown)}")
    want = set(STEPS if steps is None else steps)
    out = dict(gpu=torch.cuda.get_device_name(0) if gpulab.ON_GPU else "test clock")
    if "link" in want:
        out["link"] = link(link_sizes, progress)
    if "overlap" in want:
        out["overlap"] = overlap(overlap_bytes)
    gpus = torch.cuda.device_count() if gpulab.ON_GPU else 0
    if "collectives" in want and (nccl if nccl is not None else gpus >= 2):
        ps = tuple(p for p in (2, 4, 8) if p <= gpus)
        out["collectives"] = collectives(ps, NCCL_SIZES, reps=20, backend="nccl").data
    return timing.stamp(out)


def report(data: dict) -> str:
    """A short table of a record of ``run``: the largest copy's bandwidth per direction and memory, and the
    overlap, each where the record has it."""
    lines = [f"host-device link on {data.get('gpu', '?')}:"]
    big = max((r["n_bytes"] for r in data.get("link", [])), default=None)
    for r in data.get("link", []):
        if r["n_bytes"] == big:
            kind = "pinned" if r["pinned"] else "pageable"
            lines.append(f"  {r['direction']} {kind:8} {big / 2**20:8.0f} MiB: {r['gbps']:7.2f} GB/s")
    o = data.get("overlap")
    if o:
        lines.append(
            f"overlap: copy {o['copy_ms']:.3f} ms, matmul {o['kernel_ms']:.3f} ms, both on two streams "
            f"{o['both_ms']:.3f} ms (serial {o['serial_ms']:.3f}): {o['hidden']:.0%} of the shorter hidden"
        )
    if "collectives" in data:
        lines.append(f"collectives: {collectives_label(data['collectives'])}")
    return "\n".join(lines)
