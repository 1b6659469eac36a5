"""Lesson 10's checkers: the ring all-reduce on gloo processes with the right solution and with each named
mistake (an off-by-one chunk, a chunk index off by one, a missing final all-gather, a chunk added twice, a
deadlock from matching blocking sends, a collective instead of sends, too many bytes); the deadlock ends at the
time limit; no process outlives a check, also after an interrupt; the byte-counting exercise. No outcome here
depends on this machine's speed: a run that ends by itself gets a limit that only catches a hang, the deadlock's
limit passes on an injected clock once every rank is in its blocking send, and the interrupt comes once every
rank has started."""

import os
import signal
import threading
import time
import types
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from gpulab.core import procs
from gpulab.exercises import ex10, ex10_solutions
from tests.exercise_checks import check_hints_then_solution, check_stub_not_attempted

#: The limit of a run that ends by itself: a safety catch for a hang only (such a run takes about a second).
SAFE_S = 120.0
#: Where a rank of ``blocking_sends`` says it reached its send (set by the deadlock test; a forked rank sees it).
_AT_SEND: dict = {"dir": None}


def _ring(x, group, chunks_of, rs_recv_index, all_gather=True, add_twice=False):
    """A ring all-reduce with its parts replaceable by the usual mistakes."""
    p, r = group.size, group.rank
    chunks = chunks_of(x, p)
    right, left = (r + 1) % p, (r - 1) % p
    for s in range(p - 1):
        send, recv = chunks[(r - s) % p], chunks[rs_recv_index(r, s, p)]
        buf = torch.empty_like(recv)
        for q in (group.isend(send, right), group.irecv(buf, left)):
            q.wait()
        recv += buf
        if add_twice:
            recv += buf
    for s in range(p - 1 if all_gather else 0):
        for q in (group.isend(chunks[(r + 1 - s) % p], right), group.irecv(chunks[(r - s) % p], left)):
            q.wait()
    return x


def _floor_chunks(x, p):
    q = x.numel() // p
    return [x[i * q : (i + 1) * q] for i in range(p)]


def _right_index(r, s, p):
    return (r - s - 1) % p


def off_by_one_chunk(x, group):
    return _ring(x, group, _floor_chunks, _right_index)


def chunk_index_off_by_one(x, group):
    return _ring(x, group, torch.tensor_split, lambda r, s, p: (r - s) % p)


def missing_all_gather(x, group):
    return _ring(x, group, torch.tensor_split, _right_index, all_gather=False)


def added_twice(x, group):
    return _ring(x, group, torch.tensor_split, _right_index, add_twice=True)


def blocking_sends(x, group):
    buf = torch.empty_like(x)
    if group.size > 1:
        if _AT_SEND["dir"]:
            (Path(_AT_SEND["dir"]) / str(group.rank)).touch()
        group.send(x, (group.rank + 1) % group.size)
        group.recv(buf, (group.rank - 1) % group.size)
    return x


def uses_all_reduce(x, group):
    dist.all_reduce(x)
    return x


def sends_everything(x, group):
    total = x.clone()
    for k in range(1, group.size):
        buf = torch.empty_like(x)
        for q in (group.isend(x, (group.rank + k) % group.size), group.irecv(buf, (group.rank - k) % group.size)):
            q.wait()
        total += buf
    return total


def all_to_all(x, group):
    """Reduce-scatter and all-gather as exchanges between every pair of ranks: each rank sends chunk k straight
    to rank k, which sums its chunk, then sends its summed chunk straight to every rank. The ring's bytes, no
    ring."""
    p, r = group.size, group.rank
    chunks = torch.tensor_split(x, p)
    bufs = {k: torch.empty_like(chunks[r]) for k in range(p) if k != r}
    reqs = [group.isend(chunks[k], k) for k in range(p) if k != r] + [group.irecv(b, k) for k, b in bufs.items()]
    for q in reqs:
        q.wait()
    for b in bufs.values():
        chunks[r].add_(b)
    reqs = [group.isend(chunks[r], k) for k in range(p) if k != r] + [
        group.irecv(chunks[k], k) for k in range(p) if k != r
    ]
    for q in reqs:
        q.wait()
    return x


def direct_reduce_then_ring_gather(x, group):
    """A new member of the class: the reduce-scatter sends each chunk straight to its owner (no ring), the
    all-gather is the ring's. The ring's bytes and a right sum."""
    p, r = group.size, group.rank
    chunks = torch.tensor_split(x, p)
    bufs = {k: torch.empty_like(chunks[r]) for k in range(p) if k != r}
    reqs = [group.isend(chunks[k], k) for k in range(p) if k != r] + [group.irecv(b, k) for k, b in bufs.items()]
    for q in reqs:
        q.wait()
    for b in bufs.values():
        chunks[r].add_(b)
    right, left = (r + 1) % p, (r - 1) % p
    for s in range(p - 1):  # the ring's all-gather, starting from the chunk this rank owns
        for q in (group.isend(chunks[(r - s) % p], right), group.irecv(chunks[(r - s - 1) % p], left)):
            q.wait()
    return x


@pytest.mark.parametrize("fn", [all_to_all, direct_reduce_then_ring_gather], ids=["all-to-all", "direct-reduce"])
def test_the_ring_bytes_without_a_ring_are_named(fn):
    rep = _check(fn, (3, 4))
    assert not rep.ok and len(rep.failures) == 2, str(rep)
    for p, f in zip((3, 4), rep.failures):
        assert f.startswith(f"p = {p}: not a ring: rank 0 sent to ranks ["), f
        assert "sends only to the next, (r + 1) % p = 1" in f, f
    # the sums and the bytes are right: only who sends to whom tells it from the ring
    assert "wrong elements" not in str(rep) and "2(p-1)/p" not in str(rep), str(rep)


def _check(fn, ps=ex10.PS):
    return ex10.check_ring_all_reduce(fn, ps=ps, timeout_s=SAFE_S)


def test_the_solution_passes_on_1_to_4_ranks():
    rep = _check(ex10_solutions.ring_all_reduce)
    assert rep.ok and rep.cases == 4, str(rep)


@pytest.mark.parametrize(
    "fn, ps, words",
    [
        (off_by_one_chunk, (3,), ["off-by-one chunk", "n % p = 1"]),
        (chunk_index_off_by_one, (3,), ["off-by-one chunk index"]),
        (missing_all_gather, (4,), ["missing final all-gather"]),
        (added_twice, (2,), ["added twice"]),
        (uses_all_reduce, (2,), ["all_reduce", "group.isend"]),
        (sends_everything, (4,), ["2(p-1)/p * n * 4", "sent"]),
    ],
    ids=["remainder", "chunk-index", "no-all-gather", "added-twice", "collective", "too-many-bytes"],
)
def test_each_mistake_is_named(fn, ps, words):
    rep = _check(fn, ps)
    assert not rep.ok
    for w in words:
        assert w in str(rep), str(rep)


def test_a_deadlock_ends_at_the_limit_with_a_message(monkeypatch, tmp_path):
    # run_group's clock stands still until both ranks of p = 2 are in their blocking send, then passes the limit
    monkeypatch.setitem(_AT_SEND, "dir", str(tmp_path))
    t0 = time.monotonic()

    def clock():
        if time.monotonic() - t0 > 10 * SAFE_S:  # a safety catch only: the ranks never reached their sends
            raise AssertionError("the ranks never reached their blocking sends")
        return 1e9 if len(list(tmp_path.iterdir())) >= 2 else 0.0

    monkeypatch.setattr(procs, "time", types.SimpleNamespace(perf_counter=clock))
    rep = _check(blocking_sends, ps=(2, 3))
    assert f"did not finish within {SAFE_S:g} s: a deadlock" in str(rep) and "isend" in str(rep), str(rep)
    assert "not run after the deadlock: p in [3]" in str(rep), str(rep)


def _children():
    import multiprocessing as mp

    return [c for c in mp.active_children() if c.is_alive()]


def _hang(rank, p, started):
    (Path(started) / str(rank)).touch()
    time.sleep(10 * SAFE_S)


def test_no_process_outlives_an_interrupt(tmp_path):
    # Python's own SIGINT handler, as in a notebook kernel (a pytest-xdist worker ignores SIGINT); the interrupt
    # comes once every rank has started, however long that takes here
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    stop = threading.Event()

    def interrupt_when_started():
        while not stop.wait(0.01):
            if len(list(tmp_path.iterdir())) == 3:
                os.kill(os.getpid(), signal.SIGINT)
                return

    thread = threading.Thread(target=interrupt_when_started, daemon=True)
    thread.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            procs.run_group(_hang, 3, args=(str(tmp_path),), timeout_s=SAFE_S)
    finally:
        stop.set()
        thread.join()
        signal.signal(signal.SIGINT, previous)
    assert len(list(tmp_path.iterdir())) == 3  # the interrupt came with every rank running
    assert not _children()


def _boom(rank, p):
    if rank == 1:
        raise ValueError("rank one fails")
    dist.barrier()


def test_a_rank_error_is_reported_and_every_process_ends():
    res = procs.run_group(_boom, 3, timeout_s=SAFE_S)
    assert not res.ok and "ValueError: rank one fails" in res.errors[1]
    assert not _children()
    with pytest.raises(ValueError, match="backend"):
        procs.run_group(_boom, 2, backend="mpi")


def test_stub_and_hints(capsys):
    check_stub_not_attempted(lambda f: _check(f, ps=(1,)), 2)
    check_hints_then_solution(ex10.check_ring_all_reduce, capsys)


def test_ring_bytes_checker():
    assert ex10.check_ring_bytes(ex10.check_ring_bytes.solution).ok
    rep = ex10.check_ring_bytes(lambda c, p, n: 2 * (p - 1) * n)  # the total over ranks, not one rank's
    assert not rep.ok and "expected" in str(rep)
    check_stub_not_attempted(ex10.check_ring_bytes, 3)
