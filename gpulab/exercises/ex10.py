"""Exercises of lesson 10 (beyond one GPU).

- ``check_ring_bytes``: count the bytes a rank sends in a ring collective (``gpulab.models.comm.bytes_per_rank``).
- ``check_ring_all_reduce``: the learner's ring all-reduce from point-to-point sends and receives, run on
  p = 1, 2, 3, 4 processes of a gloo group (``gpulab.core.procs``) with n not divisible by p, against a float64
  reference; the bytes each rank sent against the ring's 2(p-1)/p · n, and whom it sent to (its next rank only)
  and received from (its previous rank only); the usual mistakes named (a deadlock
  from matching blocking sends, an off-by-one chunk, a missing final all-gather, a chunk added twice, a
  collective called instead of sends). It never hangs: each p runs under a time limit and every process is
  joined or ended.
"""

from __future__ import annotations

import math
import numbers
import random

import torch
import torch.distributed as dist

from ..core import procs
from ..models import comm as C
from . import Report, _short, close, ex10_solutions, run_cases

# ---- counting ---------------------------------------------------------------------------------------------


def check_ring_bytes(fn) -> Report:
    """fn(collective, p, n_bytes) -> bytes each rank sends in the ring algorithm, for ``collective`` one of
    ``gpulab.models.comm.COLLECTIVES``, ``p`` ranks and an array of ``n_bytes`` (nccl-tests' S). Within 1e-9."""
    cases = [
        dict(collective=c, p=p, n_bytes=n)
        for c in C.COLLECTIVES
        for p, n in ((1, 4096), (2, 4096), (4, 4 * 2**20), (8, 1e9))
    ]

    def compare(case, got):
        want = C.bytes_per_rank(case["collective"], case["p"], case["n_bytes"])
        if close(got, want, 1e-9) or (want == 0 and got == 0):
            return None
        return f"expected {want:.6g} bytes, got {_short(got)}"

    return run_cases("ring_bytes", fn, cases, compare)


check_ring_bytes.solution = lambda collective, p, n_bytes: C.bytes_per_rank(collective, p, n_bytes)


def _half_busbw_solution(collective: str, p: int, alpha_s: float, beta_Bps: float) -> float:
    """The message size S (bytes) at which a ring collective's bus bandwidth is half the link's β in the α-β
    model: busbw = bytes_per_rank / t (nccl-tests), and t = steps α + bytes_per_rank / β, so busbw = β / 2 where
    the two terms are equal: bytes_per_rank(S) = steps α β, S = steps α β / (bytes per rank of a 1-byte S)."""
    return C.ring_steps(collective, p) * alpha_s * beta_Bps / C.bytes_per_rank(collective, p, 1)


def check_half_busbw_bytes(fn) -> Report:
    """fn(collective, p, alpha_s, beta_Bps) -> the message size S in bytes at which the ring ``collective`` on ``p``
    ranks reaches half the link's bandwidth as bus bandwidth, in the α-β model of ``gpulab.models.comm``
    (``ring_time_s``, ``busbw``). All-reduce: p α β. Cases: every collective, p from 2 to 64, α of 1 to 30 µs and
    β of NVLink, PCIe and network links. Within 1e-9."""
    rng = random.Random()
    cases = [dict(collective="all_reduce", p=8, alpha_s=10e-6, beta_Bps=450e9)]
    cases += [
        dict(collective=c, p=rng.choice([2, 3, 4, 8, 16, 64]), alpha_s=rng.uniform(1e-6, 30e-6),
             beta_Bps=rng.choice([12.5e9, 25e9, 63e9, 450e9, 900e9]))
        for c in C.COLLECTIVES
        for _ in range(5)
    ]  # fmt: skip

    def compare(case, got):
        c, p, a, b = case.values()
        want = _half_busbw_solution(c, p, a, b)
        if close(got, want, 1e-9):
            return None
        head = f"expected {want:.6g} bytes, got {_short(got)}"
        if close(got, a * b, 1e-9):
            return head + ": alpha x beta is one message's; the ring sends ring_steps messages of S/p bytes each"
        if close(got, 2 * want, 1e-9):
            return head + ": at half the bus bandwidth the latency term equals the bandwidth term, not half of it"
        if close(got, C.ring_steps(c, p) * a * b, 1e-9):
            return head + ": each rank sends bytes_per_rank(S), a fraction of S: divide by it"
        return head + ": set the bus bandwidth bytes_per_rank(S) / t to beta / 2 and solve for S"

    return run_cases("half_busbw_bytes", fn, cases, compare)


check_half_busbw_bytes.solution = _half_busbw_solution
check_half_busbw_bytes.hints = [
    "write the α-β time of the ring and the bus bandwidth, bytes per rank over that time; half of beta means "
    "the time is twice the bandwidth term alone",
    "twice the bandwidth term means the latency term equals it: steps x alpha = bytes_per_rank(S) / beta",
]
check_ring_bytes.hints = [
    "all-reduce = reduce-scatter + all-gather; each phase is p - 1 steps of one chunk of S/p bytes",
    "a broadcast's root sends all S bytes (nccl-tests: its bus factor is 1); with p = 1 nobody sends",
]

# ---- the ring all-reduce ----------------------------------------------------------------------------------

PS = (1, 2, 3, 4)
ELEM = 4  # float32
TIMEOUT_S = 10.0
_COLLECTIVE_NAMES = ("all_reduce", "reduce_scatter", "reduce_scatter_tensor", "reduce_scatter_single", "all_gather",
                     "all_gather_into_tensor", "all_gather_single", "broadcast", "reduce", "all_to_all")  # fmt: skip


def sizes(p: int) -> list[int]:
    """The lengths checked on ``p`` ranks: none divisible by p when p > 1 (a remainder of 1 and of p - 1)."""
    return [3 * p + 1, 257 * p + p - 1] if p > 1 else [7, 1000]


def _tracer(p: int, n: int, rank: int) -> torch.Tensor:
    """Rank ``rank``'s tracer input: (p+1)**rank everywhere, exact in float32, so a sum's base-(p+1) digits
    say how many times each rank's value was added into it."""
    return torch.full((n,), float((p + 1) ** rank))


def _random(seed: int, p: int, n: int, rank: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed * 1009 + p * 31 + rank * 7 + n)
    return torch.randn(n, generator=g)


class Group:
    """What the learner's ``ring_all_reduce(x, group)`` talks through: ``rank``, ``size`` and point-to-point
    ``send``/``recv`` (blocking) and ``isend``/``irecv`` (returning a request with ``wait()``), thin wrappers
    over ``torch.distributed`` that count the bytes this rank sends (``sent_bytes``) and record whom it sends to
    and receives from (``sent_to``, ``received_from``: the set of peer ranks)."""

    def __init__(self, rank: int, size: int):
        self.rank, self.size, self.sent_bytes, self._dist = rank, size, 0, dist
        self.sent_to: set[int] = set()
        self.received_from: set[int] = set()

    def _peer(self, peer) -> int:
        ok = isinstance(peer, numbers.Integral) and not isinstance(peer, bool)
        if not ok or not 0 <= peer < self.size or peer == self.rank:
            raise ValueError(f"rank {self.rank}: the peer must be another rank in [0, {self.size}), got {peer!r}")
        return int(peer)

    def _count(self, t: torch.Tensor, peer: int) -> None:
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"send a tensor, got {type(t).__name__}")
        self.sent_to.add(self._peer(peer))
        self.sent_bytes += t.numel() * t.element_size()

    def send(self, t, dst):
        self._count(t, dst)
        self._dist.send(t.contiguous(), dst)

    def recv(self, t, src):
        self.received_from.add(self._peer(src))
        self._dist.recv(t, src)

    def isend(self, t, dst):
        self._count(t, dst)
        return self._dist.isend(t.contiguous(), dst)

    def irecv(self, t, src):
        self.received_from.add(self._peer(src))
        return self._dist.irecv(t, src)


def _forbid_collectives(dist, used: list) -> None:
    """Replace the collectives of ``dist`` (in this child process only) by one that records the call and
    raises: the exercise is the ring from point-to-point messages."""
    for name in _COLLECTIVE_NAMES:

        def refuse(*a, _name=name, **k):
            used.append(_name)
            raise RuntimeError(f"torch.distributed.{_name} called: build the ring from group.isend / group.irecv")

        setattr(dist, name, refuse)


def _rank_main(rank: int, p: int, fn, seed: int) -> list[dict]:
    """One rank of the checker: the tracer case, then the random cases; per case the result (float64 list)
    and the bytes this rank sent. Runs in a child process of ``procs.run_group``."""
    used: list = []
    _forbid_collectives(dist, used)
    out = []
    n_tr = sizes(p)[0]
    inputs = [("tracer", _tracer(p, n_tr, rank))] + [("random", _random(seed, p, n, rank)) for n in sizes(p)]
    for kind, x in inputs:
        c = Group(rank, p)
        got = fn(x, c)
        got = x if got is None else got
        if not isinstance(got, torch.Tensor) or got.shape != x.shape:
            raise TypeError(f"ring_all_reduce must return the summed tensor of shape {tuple(x.shape)}, "
                            f"got {_short(got)}")  # fmt: skip
        dist.barrier()  # the next case starts on every rank together
        out.append(dict(kind=kind, n=x.numel(), got=got.double().tolist(), sent=c.sent_bytes, used=list(used),
                        to=sorted(c.sent_to), frm=sorted(c.received_from)))  # fmt: skip
    return out


def _digits(v: float, base: int, p: int) -> list[int] | None:
    """How many times each rank's tracer value is in ``v``: its base-``base`` digits, None if ``v`` is no such
    sum (not an integer, negative, or too large)."""
    if v != v or v < 0 or v != int(v) or v >= base**p:
        return None
    v, out = int(v), []
    for _ in range(p):
        v, d = divmod(v, base)
        out.append(d)
    return out


def _ranges(idx: list[int]) -> str:
    """Indices as short ranges: [0, 1, 2, 7] -> "[0, 3), [7, 8)"."""
    spans, start = [], None
    for i, j in enumerate(idx):
        if start is None:
            start = j
        if i + 1 == len(idx) or idx[i + 1] != j + 1:
            spans.append(f"[{start}, {j + 1})")
            start = None
    return ", ".join(spans[:3]) + (" ..." if len(spans) > 3 else "")


def diagnose_tracer(p: int, n: int, got: dict) -> str | None:
    """Name the mistake from the tracer case: ``got`` maps rank -> its result (length ``n``); rank r's input
    was (p+1)**r everywhere. None when every element of every rank holds each rank's value once."""
    base = p + 1
    wrong = {}
    for r, vals in sorted(got.items()):
        d = [_digits(v, base, p) for v in vals]
        bad = [j for j, dj in enumerate(d) if dj != [1] * p]
        if bad:
            wrong[r] = (d, bad)
    if not wrong:
        return None
    for r, (d, bad) in wrong.items():
        j = next((j for j in bad if d[j] is None or max(d[j]) > 1), None)
        if j is not None:
            what = f"{got[r][j]:g}" if d[j] is None else ", ".join(f"rank {k} x{c}" for k, c in enumerate(d[j]) if c)
            return (
                f"a chunk added twice (or a received buffer not cleared): on rank {r} element {j} holds {what}; "
                "in the reduce-scatter each step adds the chunk it receives once into its own copy of that chunk"
            )
    q, rem = divmod(n, p)
    few = all(len(bad) <= p for _, bad in wrong.values())
    tail = all(all(j >= p * q for j in bad) for _, bad in wrong.values())
    if rem and (tail or few):
        r, (d, bad) = next(iter(wrong.items()))
        return (
            f"an off-by-one chunk: with n = {n} on p = {p} ranks, elements {_ranges(bad)} of rank {r} are not "
            f"summed; chunks of n // p = {q} leave out n % p = {rem} elements. Split with boundaries i*n//p (or "
            "torch.tensor_split(x, p)) so the chunks cover all n"
        )
    full = {r: [j for j in range(n) if j not in set(bad)] for r, (_, bad) in wrong.items()}
    if len(wrong) == p and all(0 < len(f) <= math.ceil(n / p) for f in full.values()):
        r = next(iter(full))
        return (
            f"a missing final all-gather: rank {r} holds the whole sum only in elements {_ranges(full[r])}, one "
            f"chunk; the reduce-scatter leaves each rank one reduced chunk, and {p - 1} more "
            f"step{'s' if p > 2 else ''} (p - 1) must pass the reduced chunks around the ring"
        )
    r, (d, bad) = next(iter(wrong.items()))
    j = bad[0]
    ranks = [k for k, c in enumerate(d[j]) if c]
    return (
        f"an off-by-one chunk index: on rank {r} element {j} sums ranks {ranks} only, not all {p}; at step s rank "
        "r sends chunk (r - s) mod p to r + 1 and adds the chunk it receives into chunk (r - s - 1) mod p"
    )


def _first_error(errors: dict) -> str:
    """The rank error that is the cause: one that is not gloo reporting that another rank went away."""
    items = sorted(errors.items())
    causes = [(r, e) for r, e in items if "Connection closed by peer" not in e and "Connection reset" not in e]
    r, e = (causes or items)[0]
    if "doesn't match expected size" in e:
        return (
            f"rank {r} received a chunk of another length than its neighbour sent: the two ends of a step "
            "disagree on which chunk it moves (an off-by-one chunk index). At step s rank r sends chunk (r - s) "
            "mod p and receives chunk (r - s - 1) mod p, which is what rank r - 1 sends"
        )
    return f"rank {r} raised {e.splitlines()[0]}"


def _check_p(p: int, res: procs.GroupResult, seed: int, timeout_s: float) -> str | None:
    if res.timed_out and p == 1:  # one rank waits on no one: what never ends is a loop
        return (
            f"p = 1: the rank did not finish within {timeout_s:g} s: a loop that never ends (with one rank there is "
            "no message to wait for); at p = 1 the ring has no steps: range(p - 1) is empty"
        )
    if res.timed_out:
        return (
            f"p = {p}: ranks {res.missing} did not finish within {timeout_s:g} s: a deadlock. If every rank calls a "
            "blocking group.send before its group.recv, each waits for a receive nobody has posted (gloo's send "
            "returns only when the receiver takes the data): post group.isend and group.irecv together and wait "
            "on both, or let even ranks send first and odd ranks receive first"
        )
    if res.errors:
        return f"p = {p}: {_first_error(res.errors)}"
    cases = list(zip(*(res.results[r] for r in range(p))))
    used = sorted({u for per_rank in cases[-1] for u in per_rank["used"]})
    if used:
        return f"p = {p}: called torch.distributed.{used[0]}: build the ring from group.isend and group.irecv"
    tracer = cases[0]
    msg = diagnose_tracer(p, tracer[0]["n"], {r: c["got"] for r, c in enumerate(tracer)})
    if msg:
        return f"p = {p}: {msg}"
    for per_rank in cases[1:]:
        n = per_rank[0]["n"]
        xs = [_random(seed, p, n, r).double() for r in range(p)]
        ref, mag = sum(xs), sum(x.abs() for x in xs)
        tol = 4 * p * 2.0**-24 * mag + 1e-30  # p float32 additions against a float64 sum
        for r, c in enumerate(per_rank):
            got = torch.tensor(c["got"], dtype=torch.float64)
            bad = (~((got - ref).abs() <= tol)).nonzero().flatten()
            if len(bad):
                j = int(bad[0])
                return (
                    f"p = {p}, n = {n} (seed {seed}): rank {r} has {len(bad)} wrong elements, the first at [{j}]: "
                    f"expected {ref[j].item():.7g}, got {got[j].item():.7g}"
                )
        sent = [c["sent"] for c in per_rank]
        total = C.total_bytes("all_reduce", p, n * ELEM)
        most = 2 * (p - 1) * math.ceil(n / p) * ELEM
        if sum(sent) != total or max(sent) > most:
            model = C.bytes_per_rank("all_reduce", p, n * ELEM)
            return (
                f"p = {p}, n = {n}: the ranks sent {sent} bytes ({sum(sent)} in all); the ring sends "
                f"2(p-1)/p * n * 4 = {model:.0f} bytes a rank ({total:.0f} in all, at most {most} on one rank): "
                "send one chunk of about n/p elements per step, 2(p - 1) steps"
            )
    return _not_a_ring(p, cases)


def _not_a_ring(p: int, cases) -> str | None:
    """None when in every case each rank r sent only to r + 1 and received only from r - 1 (mod p): the ring's
    links; else which rank talked to whom. The bytes alone cannot tell: an exchange between every pair of ranks
    (each sends its chunk straight to the chunk's owner, then the owner's sum straight to every rank) moves the
    ring's 2(p-1)/p * n bytes a rank."""
    for per_rank in cases:
        for r, c in enumerate(per_rank):
            nxt, prev = (r + 1) % p, (r - 1) % p
            if set(c["to"]) - {nxt} or set(c["frm"]) - {prev}:
                return (
                    f"p = {p}: not a ring: rank {r} sent to ranks {c['to']} and received from ranks {c['frm']}; in "
                    f"a ring each rank sends only to the next, (r + 1) % p = {nxt}, and receives only from the "
                    f"previous, (r - 1) % p = {prev}. An exchange between every pair of ranks moves the same bytes "
                    "but needs a link between every pair; the ring needs only the links between neighbours"
                )
    return None


def check_ring_all_reduce(fn, ps=PS, timeout_s: float = TIMEOUT_S) -> Report:
    """fn(x, group) -> the sum of ``x`` over all ranks (in place or returned): ``x`` is this rank's 1-D float32
    tensor, ``group`` a ``Group`` (rank, size, send, recv, isend, irecv). Run on ``ps`` ranks (each p a fresh gloo
    group of forked processes, so ``fn`` may be defined in a notebook cell) on a tracer input and on seeded
    random inputs of ``sizes(p)``; compared with a float64 sum (tolerance: p float32 roundings); the bytes each
    rank sent against 2(p-1)/p · n · 4; each rank's peers against the ring's (``_not_a_ring``: sends to r + 1 and
    receives from r - 1 only). ``timeout_s``: the limit of each p; after a deadlock the larger p are
    not run. Every process is joined or ended, also on an exception or an interrupt."""
    seed = random.randrange(2**31)
    rep = Report("ring_all_reduce")
    for p in ps:
        rep.cases += 1
        res = procs.run_group(_rank_main, p, args=(fn, seed), timeout_s=timeout_s)
        if p == ps[0] and res.errors and all("NotImplementedError" in e for e in res.errors.values()):
            return Report("ring_all_reduce", attempted=False)
        msg = _check_p(p, res, seed, timeout_s)
        if msg:
            rep.failures.append(msg)
            if res.timed_out:
                rest = [q for q in ps if q > p]
                if rest:
                    rep.failures.append(f"not run after the {'deadlock' if p > 1 else 'loop'}: p in {rest}")
                break
    return rep


check_ring_all_reduce.solution = ex10_solutions.ring_all_reduce
check_ring_all_reduce.solution_module = ex10_solutions
check_ring_all_reduce.hints = [
    "split x into p chunks that cover all n elements: torch.tensor_split(x, p) gives views whose sizes differ by one",
    "reduce-scatter: p - 1 steps; at each, every rank sends one chunk to its right neighbour and adds the chunk it "
    "receives from its left neighbour into its own copy of that chunk. Rank r starts by sending chunk r: which chunk "
    "does it send at the next step?",
    "post the send and the receive together (group.isend, group.irecv, then wait on both): a blocking send on every "
    "rank at once waits forever",
    "all-gather: p - 1 more steps pass the reduced chunks once around the ring: a rank starts with the chunk it "
    "finished reducing, stores what it receives as it is (no adding), and sends that on at the next step",
]
