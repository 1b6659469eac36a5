"""Run a function on ``p`` local processes that form one ``torch.distributed`` group, with a time limit.

``run_group(fn, p)`` starts ``p`` processes; each joins a process group (gloo on CPU tensors, NCCL on GPUs;
the rendezvous is a ``torch.distributed.FileStore`` in a temporary folder, so no port is chosen), calls
``fn(rank, p, *args)`` and sends back its result or its exception. The caller waits at most ``timeout_s``.
Whatever happens (a result, an exception in a rank, the time limit, a KeyboardInterrupt in the caller), every
process is joined before ``run_group`` returns or raises: a process still alive is terminated, then killed.
The children ignore SIGINT, so a notebook's interrupt reaches the caller, which ends them.

Start method: ``"fork"`` (the default for gloo) copies the caller, so a function defined in a notebook cell
runs in the children without being importable; a forked child must not touch CUDA once the parent has.
``"spawn"`` (the default for NCCL) starts fresh interpreters: ``fn`` must be importable (module level).
"""

from __future__ import annotations

import faulthandler
import multiprocessing as mp
import os
import queue
import shutil
import signal
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from datetime import timedelta

import torch
import torch.distributed as dist

from . import validate as V

BACKENDS = ("gloo", "nccl")


@dataclass
class GroupResult:
    """``results``: rank -> what ``fn`` returned; ``errors``: rank -> the exception's type, message and the
    last lines of its traceback; ``timed_out``: the time limit ended the run (``missing`` lists the ranks that
    had not answered); ``seconds``: wall time of the run."""

    p: int
    results: dict = field(default_factory=dict)
    errors: dict = field(default_factory=dict)
    timed_out: bool = False
    missing: list = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.errors and not self.timed_out and len(self.results) == self.p


def _child(fn, rank, p, backend, store_path, timeout_s, args, out, err_path):
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the caller handles an interrupt and ends the children
    fd = os.open(err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(fd, 2)  # native aborts (gloo's enforce failures) land here, read back by the caller, not in a notebook
    os.close(fd)
    faulthandler.disable()  # a parent's handler (pytest's) writes to the parent's stderr, not to the file above
    torch.set_num_threads(1)
    try:
        store = dist.FileStore(store_path, p)
        dist.init_process_group(backend, store=store, rank=rank, world_size=p, timeout=timedelta(seconds=timeout_s))
        if backend == "nccl":
            torch.cuda.set_device(rank)
        try:
            out.put((rank, "ok", fn(rank, p, *args)))
        finally:
            dist.destroy_process_group()
    except BaseException as e:  # everything a rank raises goes back to the caller as text
        tb = traceback.format_exception(type(e), e, e.__traceback__)
        out.put((rank, "error", f"{type(e).__name__}: {e}\n{''.join(tb[-3:])}"))


def run_group(fn, p: int, *, args: tuple = (), backend: str = "gloo", timeout_s: float = 10.0, start: str | None = None) -> GroupResult:  # fmt: skip
    """Run ``fn(rank, p, *args)`` on ``p`` processes of one process group (module docstring) and collect what
    each returns (it must be picklable). ``backend``: "gloo" or "nccl"; ``timeout_s``: the most the caller
    waits (> 0), also given to ``init_process_group`` so a rank blocked in a collective gives up; ``start``:
    "fork" or "spawn" (default: fork for gloo, spawn for NCCL). Raises ValueError on a bad argument; never
    leaves a process running."""
    p = V.positive_int("p", p)
    V.one_of("backend", backend, BACKENDS)
    timeout_s = V.positive("timeout_s", timeout_s)
    start = start or ("fork" if backend == "gloo" else "spawn")
    V.one_of("start", start, ("fork", "spawn"))
    ctx = mp.get_context(start)
    tmp = tempfile.mkdtemp(prefix="gpulab-procs-")
    out = ctx.Queue()
    res = GroupResult(p)
    procs = [
        ctx.Process(
            target=_child,
            args=(fn, r, p, backend, os.path.join(tmp, "store"), timeout_s, args, out, _err_path(tmp, r)),
            daemon=True,
        )
        for r in range(p)
    ]
    t0 = time.perf_counter()
    try:
        for pr in procs:
            pr.start()
        deadline = t0 + timeout_s
        while len(res.results) + len(res.errors) < p:
            left = deadline - time.perf_counter()
            if left <= 0:
                res.timed_out = True
                break
            try:
                rank, status, value = out.get(timeout=min(left, 0.1))
            except queue.Empty:
                if any(pr.exitcode not in (None, 0) for pr in procs):  # a rank died without answering
                    dead = [r for r, pr in enumerate(procs) if pr.exitcode not in (None, 0)]
                    for r in dead:
                        if r not in res.results and r not in res.errors:
                            res.errors[r] = _died(procs[r].exitcode, _err_path(tmp, r))
                continue
            (res.results if status == "ok" else res.errors)[rank] = value
            if res.errors and status == "error":  # one rank failed: the others may wait on it forever
                deadline = min(deadline, time.perf_counter() + 1.0)
    finally:
        answered = len(res.results) + len(res.errors) == p
        _end(procs, grace_s=2.0 if answered else 0.0)
        out.close()
        out.cancel_join_thread()
        shutil.rmtree(tmp, ignore_errors=True)
    res.missing = [r for r in range(p) if r not in res.results and r not in res.errors]
    res.timed_out = res.timed_out or bool(res.missing)
    res.seconds = time.perf_counter() - t0
    return res


def _err_path(tmp: str, rank: int) -> str:
    return os.path.join(tmp, f"stderr-{rank}.txt")


def _died(code: int, err_path: str) -> str:
    """The error of a rank that exited without a result: its exit code and the last line it wrote to stderr."""
    try:
        with open(err_path, errors="replace") as f:
            lines = [ln.strip() for ln in f.read().splitlines() if ln.strip()]
    except OSError:
        lines = []
    return f"the process exited with code {code} without a result" + (f": {lines[-1]}" if lines else "")


def _end(procs, grace_s: float) -> None:
    """Join every process: one still running after ``grace_s`` (s) is terminated, one that survives that killed."""
    end = time.perf_counter() + grace_s
    for pr in procs:
        if pr.pid is None:
            continue
        pr.join(timeout=max(end - time.perf_counter(), 0.0))
        if pr.is_alive():
            pr.terminate()
            pr.join(timeout=1.0)
        if pr.is_alive():
            pr.kill()
            pr.join()
