"""Checking a learner's Triton kernel without letting it crash or hang the notebook, and saying what went wrong:
``check_kernel`` runs the cases, ``kernelwatch`` watches each run, ``kerneldiagnosis`` names the mistake.

The learner writes a launcher ``fn(*inputs, out)`` that launches their kernel and writes into ``out``. The
checker owns every buffer: each input and ``out`` is a view into the middle of a larger buffer whose guard
regions (1 MiB before and after) hold a poison bit pattern (``kernelwatch.Guarded``). Each case runs in two steps:

1. **Pre-flight**, in Triton's interpreter, in a forked child process with a time limit (``CASE_TIME_LIMIT_S``
   seconds on ``CLOCK``, the wall clock; a test puts in a clock that counts the child's programs instead; past
   it, the interpreter's progress tells a loop from a slow kernel), on guarded CPU buffers in shared memory. Every Triton launch is recorded (kernel, grid), and every load and
   store address is checked against the buffers before it happens: an access outside them is named (which
   buffer, which side, which indices) and masked off, so a far store never lands and never crashes the
   process. The record also says which buffers each launch stored into, which input elements were loaded,
   which program stored each element of out, and what the launcher's own tensors held. The child never touches CUDA (its buffers are CPU ones), dies with the process that forked it, and
   has a CPU limit (``CHILD_CPU_LIMIT_S``); where ``os.fork`` is missing (macOS, Windows) the pre-flight runs
   in this process, with the same address checks but no time limit, and the report says so.
2. **The run**: without a GPU the pre-flight was the run, and its shared buffers are read. On a GPU, only a
   case whose pre-flight was clean runs again on guarded GPU buffers (its launches recorded), and those are
   read.

Then ``kerneldiagnosis.diagnose`` names the mistake, each message true for what it saw. The report has one line
per distinct mistake with the number of cases it hit (``Report``).

Cases reach past one program of any block a learner may pick (``LONG_N``: above 2^17 elements). The idea is
Triton-Puzzles' (github.com/srush/Triton-Puzzles) and CS336's (stanford-cs336.github.io): a spec, a stub, a
checker with awkward sizes; the address checks are what compute-sanitizer does on a GPU, done in the
interpreter (triton/runtime/interpreter.py, whose loads and stores all go through ``InterpreterBuilder``).
"""

from __future__ import annotations

import dataclasses
import os
import re
import signal
import sys
import time

import torch

from . import LINE_LIMIT, Report, _short, clip
from .kerneldiagnosis import Case, Finding, diagnose
from .kernelwatch import (  # noqa: F401  (Guarded, PREFLIGHT_GUARD_BYTES, Progress, Seen: names exercises use)
    GUARD_BYTES,
    PREFLIGHT_GUARD_BYTES,
    Guarded,
    Limits,
    Progress,
    Seen,
    checker_made,
    preflight,
    run_on_device,
    run_unguarded,
    warm_interpreter,
)

#: Seconds one case may take in the pre-flight (Triton's interpreter, a child process), read on ``CLOCK``. Past
#: them, the interpreter's progress decides: a case where nothing started or ended in a kernel for this long (one
#: program running all that while) is stopped as an endless loop; one whose programs keep finishing runs on while
#: at its pace it would end within ``SLOW_LIMIT_FACTOR`` times this, and is stopped as slow otherwise. The
#: slowest right kernel of the collection takes a few seconds on its longest case on an idle machine.
CASE_TIME_LIMIT_S = 60.0
#: How many times ``CASE_TIME_LIMIT_S`` a case whose programs keep finishing may take (a busy machine, a small block).
SLOW_LIMIT_FACTOR = 5.0
#: How often (seconds) the parent of a pre-flight's child reads ``CLOCK`` while it waits for the child's record.
POLL_S = 0.05
#: CPU seconds a pre-flight's child may use (``RLIMIT_CPU``; then SIGXCPU): a backstop for a child its parent can no
#: longer stop. Far above ``CASE_TIME_LIMIT_S``: the child runs one torch thread, so its CPU seconds seldom pass its
#: wall seconds. Linux also kills the child when the process that forked it ends (``PR_SET_PDEATHSIG``).
CHILD_CPU_LIMIT_S = 600
#: Length of the long case of the 1-D exercises: above 2^17, so that no single program of a power-of-two
#: BLOCK up to 2^17 covers it, odd, so that the last block is partial.
LONG_N = 2**17 + 4099
_CAN_FORK = hasattr(os, "fork") and sys.platform.startswith("linux")


def wall_clock(progress: Progress) -> float:
    """The time limit's clock for a learner: seconds on ``time.monotonic`` (``progress`` is not read)."""
    return time.monotonic()


#: The clock the pre-flight's time limit reads: ``CLOCK(progress) -> seconds`` (``Progress``), read when the child
#: starts, by the child as each program starts, every ``POLL_S`` while it runs, and once more when it has finished
#: (a case is judged by that reading too). A test puts in a clock that counts ``progress.programs``, so that a
#: time-out is decided by what the kernel did, not by this machine's speed.
CLOCK = wall_clock


def limits() -> Limits:
    """The pre-flight's limits as this module's settings stand now (``CASE_TIME_LIMIT_S``, ``CLOCK``, ``POLL_S``,
    ``CHILD_CPU_LIMIT_S``, whether this platform forks, ``SLOW_LIMIT_FACTOR``)."""
    return Limits(CASE_TIME_LIMIT_S, CLOCK, POLL_S, CHILD_CPU_LIMIT_S, _CAN_FORK, SLOW_LIMIT_FACTOR)


def preflight_once(fn, inputs: dict[str, Guarded], out: Guarded) -> Seen:
    """Run ``fn(*views of inputs, view of out)`` once in the pre-flight (``kernelwatch.preflight``) under
    ``limits()``, on guarded CPU buffers in shared memory (``Guarded(..., shared=True)``); what was seen."""
    regions = [g.region(k, "in") for k, g in inputs.items()] + [out.region("out", "out")]
    args = [g.view for g in inputs.values()] + [out.view]
    return preflight(fn, args, regions, "out", out, limits())


def swapped_cases(case: dict, reference, mismatch):
    """For each two arguments of ``case`` that a learner could swap (floating-point tensors of one shape and dtype,
    or two floats; integer tensors are indices and counts, whose swapped answer may cost far more than the
    exercise's): (name, name, the float64 answer with them swapped, the ``mismatch`` for that case or None). Lazy:
    a pair's answer is computed only when asked for; a reference that cannot take the swap is skipped."""
    keys = [k for k in case if not k.startswith("_")]
    for i, a in enumerate(keys):
        for b in keys[i + 1 :]:
            va, vb = case[a], case[b]
            tensors = isinstance(va, torch.Tensor) and isinstance(vb, torch.Tensor)
            if tensors and not (va.shape == vb.shape and va.dtype == vb.dtype and va.dtype.is_floating_point):
                continue
            if not tensors and not (type(va) is float and type(vb) is float):
                continue
            other = dict(case)
            other[a], other[b] = vb, va
            try:
                ref = reference(other)
            except Exception:
                continue
            yield a, b, ref, mismatch and (lambda g, r, other=other: mismatch(g, r, other))


def named_out(message: str, out_name: str) -> str:
    """``message`` with out, as a word ("out", "out[3]", "out's"; not "out_ptr"), said as ``out_name``."""
    return message if out_name == "out" else re.sub(r"\bout\b(?!_)", out_name, message)


# ---- the checker ---------------------------------------------------------------------------------------------------


def check_kernel(
    name: str,
    fn,
    cases: list[dict],
    *,
    out,
    reference,
    mismatch=None,
    launches: int | None = None,
    grid=None,
    must_read=None,
    notes: dict | None = None,
    advice: dict | None = None,
    unwritten=None,
    memory=None,
    out_name: str = "out",
) -> Report:
    """Run the learner's launcher on each case (the module docstring says how) and name each mistake; returns a
    ``Report`` with one line per distinct mistake and the number of cases it hit.

    cases: dicts of named arguments in call order; tensors are placed in guarded buffers, other values are
    passed as they are. out(case) -> (shape, dtype) of the output; reference(case) -> the float64 answer;
    mismatch(got, ref64, case) -> None or a message comparing the values (default: one ulp of out's dtype), said
    as "values differ: ..."; or a ``kerneldiagnosis.Mistake``, a message with a kind of its own (work done twice,
    a shortcut through torch: ``work``), said as it is under that kind.
    launches: the number of kernel launches the exercise prescribes (None: any, at least one); grid(case) ->
    the grid it prescribes (None: any); must_read: the inputs every element of which must be loaded (default
    all; ``()`` for none); memory(case) -> the bytes the launcher's process may grow by while it runs (its peak
    resident memory over its start, measured in the pre-flight's child, which counts the interpreter's own first
    run of a kernel too, 10 to 20 MB; None: no bound); notes: extra text per kind of mistake ("grid_small",
    "partial", "never_written", "values", ...), appended to its message; advice: a line per kind of mistake, said
    under its line ("-> advice"); unwritten(case, mask, stores, launches) -> None or the message for a partly
    written out, said before the generic ones (mask: bool, flat, True where out was never written; stores: uint8
    counts of the pre-flight's stores into each element of out, None where unseen; launches: the records, with
    ``grid``, ``ints`` and ``lanes``). out_name: the exercise's name of out (its argument of the launcher), said in
    the messages where they name out. The call is ``fn(*case.values(), out)``. NotImplementedError on the first
    case means "not attempted"; whatever else the launcher raises is reported, never raised (KeyboardInterrupt
    excepted: it stops the check). Case i runs an autotuned kernel's configs in turn from config i.
    """
    rep = Report(name, failed=0)
    found: dict[str, list] = {}  # kind -> [message, cases hit, first case's arguments]
    no_fork = False
    slow: list[tuple[float, str]] = []  # (seconds, arguments) of cases that ended past the time limit
    unguarded: list[str] = []  # the interpreter's errors of cases that ran on the GPU without the pre-flight
    lim = limits()
    for i, case in enumerate(cases):
        rep.cases += 1
        shown = sorted((k for k in case if not k.startswith("_")), key=lambda k: isinstance(case[k], torch.Tensor))
        desc = ", ".join(f"{k}={_short(case[k])}" for k in shown)  # numbers first: a clipped line keeps them
        shape, dtype = out(case)
        tensors = {k: v for k, v in case.items() if isinstance(v, torch.Tensor)}
        device = next((v.device for v in tensors.values()), torch.device("cpu"))
        host = dict(device="cpu", shared=True, guard_bytes=PREFLIGHT_GUARD_BYTES)
        host_in = {k: Guarded(v.shape, v.dtype, fill=v.cpu(), **host) for k, v in tensors.items()}
        host_out = Guarded(shape, dtype, **host)
        host_out.shadow = Guarded(shape, dtype, **host)  # out as it was at the first launch, if already whole
        warm_interpreter(fn)
        regions = [g.region(k, "in") for k, g in host_in.items()] + [host_out.region("out", "out")]
        args = [host_in[k].view if k in host_in else v for k, v in case.items()] + [host_out.view]
        seen = preflight(fn, args, regions, "out", host_out, lim, pick=i)
        seen.changed_after = seen.last_digest not in (None, host_out.digest())
        no_fork |= seen.no_fork
        if not seen.timeout and seen.elapsed is not None and seen.elapsed > lim.seconds:
            slow.append((seen.elapsed, desc))
        if seen.not_implemented:
            if i == 0:
                return Report(name, attempted=False)
            seen = Seen(raised="NotImplementedError")
        bufs_in, buf_out, checked, preflight_out = host_in, host_out, True, None  # the buffers the verdict reads
        interpreter_failed = run_unguarded(seen, device.type)
        if device.type != "cpu" and (not seen.stopped or interpreter_failed):  # on a GPU: the case again, on device
            dev_in = {k: Guarded(v.shape, v.dtype, device, fill=v) for k, v in tensors.items()}
            dev_out = Guarded(shape, dtype, device, sign_flipped=True)
            args = [dev_in[k].view if k in dev_in else v for k, v in case.items()] + [dev_out.view]
            ran = run_on_device(fn, args, dev_out)
            if ran.not_implemented:
                ran = Seen(raised="NotImplementedError")
            if interpreter_failed:
                # Triton's interpreter cannot run every kernel the GPU compiles (Triton 3.6 on a GPU: reductions,
                # loops over loaded bounds): this run has no address checks, and the GPU's own error, if any, is
                # the one reported
                unguarded.append(seen.raised)
                seen = ran
            else:  # the stores' record is the pre-flight's; the launches must happen here too
                seen = dataclasses.replace(
                    seen,
                    raised=ran.raised,
                    interpreter_error=ran.interpreter_error,
                    launches=seen.launches if ran.launches else [],
                )
            bufs_in, buf_out, checked = dev_in, dev_out, not interpreter_failed
            preflight_out = None if interpreter_failed else host_out
        try:
            c = Case(
                bufs_in,
                buf_out,
                seen,
                checked,
                preflight_out,
                limits=lim,
                ref64=reference(case),
                mismatch=mismatch and (lambda g, r, case=case: mismatch(g, r, case)),
                expect_launches=launches,
                expect_grid=grid and grid(case),
                must_read=must_read,
                memory_bound=memory and memory(case),
                unwritten_hint=unwritten and (lambda u, st, ln, case=case: unwritten(case, u, st, ln)),
                swaps=lambda case=case: swapped_cases(case, reference, mismatch),
                out_name=out_name,
            )
            hit = diagnose(c)
        except Exception as e:  # a result the comparison cannot read
            hit = Finding("unreadable", f"could not read the result ({type(e).__name__}: {clip(str(e), 120)})")
        if hit is not None:
            rep.failed += 1
            hit = hit._replace(message=named_out(hit.message, out_name))
            entry = found.setdefault(hit.kind, [hit.message, 0, desc])
            entry[1] += 1
        out_of_cpu = seen.died is not None and seen.died == getattr(signal, "SIGXCPU", None)
        if seen.timeout or out_of_cpu:  # an endless loop would take the limit again on every case: stop here
            rep.cases = len(cases)
            if i + 1 < len(cases) and hit is not None:
                found[hit.kind][0] += f" (the remaining {len(cases) - i - 1} cases were not run)"
            break
    base = notes or {}
    for kind, (msg, hits, desc) in found.items():
        note, line = base.get(kind.split(":")[0], ""), (advice or {}).get(kind.split(":")[0])
        # the message and the example clipped apart, so that the bracket survives (``say_once`` reads it)
        bracket = f" [{hits} of {rep.cases} cases, e.g. {name}({clip(desc, 70)})]"
        rep.failures.append(clip(msg + note, max(200, LINE_LIMIT - len(bracket))) + bracket)
        if line:
            rep.failures[-1] += "\n    -> " + line
    if no_fork:
        rep.note = "no time limit here (this platform has no os.fork): an endless loop would hang the check"
    if slow:
        t, desc = max(slow)
        rep.note = clip(
            f"{len(slow)} case(s) took more than {lim.seconds:g} s in Triton's interpreter (the longest {t:.3g} s, "
            f"{name}({desc})); their programs kept finishing, so they ran on: a larger BLOCK runs faster there",
            400,
        )
    if unguarded:
        rep.note = clip(
            f"Triton's interpreter could not pre-flight {len(unguarded)} case(s) ({unguarded[0]}): they ran on the "
            "GPU without the address checks, so a store past the end there is not caught before it runs",
            400,
        )
    return rep
