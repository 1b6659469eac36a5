"""After a checker passes: the learner's kernel's counters, traced in Triton's interpreter, beside the lesson's model
and beside gpulab's kernel as Nsight Compute recorded it.

One call, ``profile_mine(transpose)`` (the launcher the learner wrote; ``exercise=`` names the exercise when the
function's name is not the exercise's), prints a short table and returns its text. It builds the exercise's inputs at
a size the interpreter traces in a second or two (seeded), then:

1. runs the launcher once on a small probe in the checker's pre-flight (``kernelcheck``: a forked child, guarded
   buffers, a time limit), so that a stub, an exception, an access outside the buffers, an endless loop or a wrong
   result is one line naming the checker, never a crash of the notebook and never a table of a wrong kernel;
2. traces the launch at the trace size (``gpulab.measure.trace``: every load and store recorded, counted as the GPU
   planned for would issue it, with the layout of the kernel compiled for that GPU) and checks the result there;
3. sets the counts beside the lesson's model, computed for the tiles or block the learner's launch used (read from
   the trace: the shape of its store), and beside gpulab's recorded counter case (``counter_cases``).

Lesson by lesson: 02 ``loop_grouped``, lanes on the first side of the loop's ``tl.where`` and loop steps per program
against ``simt.loop``; 06 ``strided_copy`` and ``transpose``, sectors per request and per 32 elements against
``sectors``; 07 ``tiled_matmul``, the bytes its tiles read against ``tiling.input_loads``; 07b
``persistent_matmul``, the work balance of its programs against ``waves.wave_plan`` on as many SMs as programs.

Hardware counters: on a GPU where Nsight Compute can read them (``gpulab.measure.ncu.available``), the table says
so and ``profile_mine(fn, counters=True)`` measures gpulab's kernel of the case now
(``gpulab.measure.counters.measure``, about a minute) for the gpulab column; the default never runs ncu. The
learner's own kernel is traced, not profiled by ncu: it lives in the notebook, which ncu's child process cannot
import.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

import gpulab

from ..core import tolerances
from ..kernels import divergence as dv
from ..kernels import strided as S
from ..measure import trace as tr
from ..models import sectors, simt, tiling, waves
from . import clip, describe_error, kernelcheck

LOOP = dict(n=4096, frac=1 / 16, cheap=4, expensive=64)  # lesson 02: the recorded divergence case's trip counts
COPY_N, COPY_STRIDE = 4096, 4  # lesson 06: outputs of the strided copy, and its stride (the recorded "stride4")
TRANSPOSE_N = 256  # lesson 06: the square fp32 matrix transposed
MATMUL_N = 256  # lesson 07: the square fp16 matmul
PERSISTENT_N, PERSISTENT_PROGRAMS = 288, 66  # lesson 07b: 81 tiles of 32 x 32 on 66 programs: a tail


@dataclass(frozen=True)
class Exercise:
    """One kernel exercise as ``profile`` runs it. ``args``: the names of the launcher's arguments before ``out``;
    ``inputs(size)`` -> the launcher's arguments before ``out``
    (tensors and ints) and ``out``'s (shape, dtype), at ``"trace"`` or ``"probe"`` size; ``reference(args)`` ->
    the float64 answer; ``close(got, ref, args)`` -> whether ``got`` passes; ``model(t, args)`` -> ({quantity: the
    model's value for the launch traced as ``t``}, one line saying how); ``recorded``: gpulab's counter case
    ``(case, range label)`` or None; ``show``: the quantities shown, in order."""

    lesson: str
    checker: str
    args: tuple
    inputs: Callable
    reference: Callable
    close: Callable
    model: Callable
    recorded: tuple | None
    show: tuple


# ---- inputs, references, models ---------------------------------------------------------------------------------


def _gen() -> torch.Generator:
    return torch.Generator().manual_seed(0)


def _store_shape(t: tr.Trace) -> tuple:
    """The shape of the first store of the launch with the most programs: the learner's block (1-D) or tile."""
    lc = max(t.launches, key=lambda x: x.programs)
    return next((tuple(s.shape) for s in lc.sites if s.kind == "store" and s.shape), ())


def _loop_inputs(size):
    n = LOOP["n"] if size == "trace" else 1000
    trips = dv.mixed_trips(n, LOOP["frac"], LOOP["cheap"], LOOP["expensive"], seed=0)
    order = simt.group_by_cost(trips)
    x = torch.randn(n, generator=_gen()) * 3
    return [x, torch.from_numpy(trips).int(), torch.from_numpy(order).int()], ((n,), torch.float32)


def _loop_reference(args):
    x, trips, order = args
    return dv.loop_cost_ref(x[order.long()], trips[order.long()])


def _loop_model(t, args):
    _, trips, order = args
    shape = _store_shape(t)
    if len(shape) != 1:
        return {}, ""
    cost = simt.loop(trips[order.long()].numpy(), shape[0])
    model = {
        "threads/inst": 32.0,  # a Triton warp never splits: tl.where computes both sides on every lane
        "where: lanes on first side": 32 * cost.efficiency,
        "loop steps/program": cost.steps / len(cost.steps_per_group),
    }
    how = (
        f"model: simt.loop(trips[order], {shape[0]}) for your BLOCK, {trips.numel()} items, 1 in "
        f"{round(1 / LOOP['frac'])} needing {LOOP['expensive']} trips (the rest {LOOP['cheap']}), sorted by cost"
    )
    return model, how


def _copy_inputs(size):
    n = COPY_N if size == "trace" else 1000
    return [torch.randn(n * COPY_STRIDE, generator=_gen()), COPY_STRIDE], ((n,), torch.float32)


def _copy_model(t, args):
    shape, lc = _store_shape(t), max(t.launches, key=lambda x: x.programs)
    model = {
        "ld sectors/32 el": sectors.warp_request(4, COPY_STRIDE).n_sectors,
        "ld efficiency": sectors.warp_request(4, COPY_STRIDE).efficiency,
    }
    how = f"model: sectors.warp_request(4, {COPY_STRIDE}) per 32 outputs"
    try:
        v = S.elements_per_lane(shape[0], lc.num_warps, 4)
    except (ValueError, TypeError, IndexError):  # a block Triton's layout rule does not cover: no per-request model
        return model, how
    model["ld sectors/request"] = sectors.warp_request(4, COPY_STRIDE, elements_per_lane=v).n_sectors
    model["st sectors/request"] = sectors.warp_request(4, 1, elements_per_lane=v).n_sectors
    how += f"; per request with your BLOCK {shape[0]} on {lc.num_warps} warps: {v} output{'s' * (v > 1)} a lane"
    return model, how


def _transpose_inputs(size):
    n = TRANSPOSE_N if size == "trace" else 70
    return [torch.randn(n, n, generator=_gen())], ((n, n), torch.float32)


def _transpose_model(t, args):
    n = args[0].shape[1]
    per32 = sectors.matrix_request(n, 4, "row").n_sectors
    how = f"model: a coalesced transpose, lanes along rows on both sides: sectors.matrix_request({n}, 4, 'row')"
    return {"ld sectors/32 el": per32, "st sectors/32 el": per32}, how


def _matmul_inputs(n):
    g = _gen()
    a, b = torch.randn(n, n, generator=g).half(), torch.randn(n, n, generator=g).half()
    return [a, b]


def _tiled_inputs(size):
    n = MATMUL_N if size == "trace" else 70
    return _matmul_inputs(n), ((n, n), torch.float16)


def _matmul_reference(args):
    return args[0].double() @ args[1].double()


def _matmul_close(got, ref, args):
    return tolerances.matmul_violation(got, args[0], args[1], ref) <= 1


def _tiled_model(t, args):
    n, shape = args[0].shape[0], _store_shape(t)
    if len(shape) != 2:
        return {}, ""
    l2 = tiling.input_loads(n, tile=shape) * 2
    how = f"model: tiling.input_loads({n}, tile={shape}) x 2 bytes; DRAM from each input once to every tile load"
    return {"L2 read bytes": l2, "DRAM read bytes": (2 * n * n * 2, l2)}, how


def _persistent_inputs(size):
    n, p = (PERSISTENT_N, PERSISTENT_PROGRAMS) if size == "trace" else (70, 5)
    return _matmul_inputs(n) + [p], ((n, n), torch.float16)


def _persistent_model(t, args):
    n, programs, shape = args[0].shape[0], args[2], _store_shape(t)
    if len(shape) != 2:
        return {}, ""
    plan = waves.wave_plan(n, tile=shape, sms=programs)
    how = (
        f"model: waves.wave_plan({n}, tile={shape}, sms={programs}): {plan.tiles} tiles on {programs} programs, "
        f"the busiest computing {plan.waves} tiles"
    )
    return {"programs": programs, "work balance": plan.wave_efficiency, "waves": 1}, how


EXERCISES = {
    "loop_grouped": Exercise(
        "02",
        "ex02.check_loop_grouped",
        ("x", "trips", "order"),
        _loop_inputs,
        _loop_reference,
        lambda got, ref, args: bool(((got.double() - ref).abs() <= 1e-5).all()),
        _loop_model,
        ("divergence", "loop-sorted"),
        ("where: lanes on first side", "loop steps/program", "lanes on/mem inst", "threads/inst"),
    ),
    "strided_copy": Exercise(
        "06",
        "ex06.check_strided_copy",
        ("x", "stride"),
        _copy_inputs,
        lambda args: args[0][:: args[1]].double(),
        lambda got, ref, args: torch.equal(got.double(), ref),
        _copy_model,
        ("coalescing", f"stride{COPY_STRIDE}"),
        ("ld sectors/request", "ld sectors/32 el", "ld efficiency", "st sectors/request"),
    ),
    "transpose": Exercise(
        "06",
        "ex06.check_transpose",
        ("a",),
        _transpose_inputs,
        lambda args: args[0].t().double(),
        lambda got, ref, args: torch.equal(got.double(), ref),
        _transpose_model,
        ("coalescing", "transpose-tiled"),
        ("ld sectors/32 el", "st sectors/32 el", "ld sectors/request", "st sectors/request"),
    ),
    "tiled_matmul": Exercise(
        "07",
        "ex07.check_tiled_matmul",
        ("a", "b"),
        _tiled_inputs,
        _matmul_reference,
        _matmul_close,
        _tiled_model,
        ("tiling", "tiled-group8"),
        ("L2 read bytes", "DRAM read bytes", "programs", "programs/SM"),
    ),
    "persistent_matmul": Exercise(
        "07b",
        "ex07.check_persistent_matmul",
        ("a", "b", "programs"),
        _persistent_inputs,
        _matmul_reference,
        _matmul_close,
        _persistent_model,
        None,
        ("programs", "work balance", "waves", "programs/SM"),
    ),
}


# ---- the call ---------------------------------------------------------------------------------------------------


def _describe(shape) -> str:
    return " x ".join(map(str, shape))


def _probe(mine, ex: Exercise, name: str) -> str:
    """Run ``mine`` once on the probe inputs in the checker's pre-flight; "" when it ran clean and right, else what
    went wrong, in a few words."""
    args, (shape, dtype) = ex.inputs("probe")
    host = dict(device="cpu", shared=True, guard_bytes=kernelcheck.PREFLIGHT_GUARD_BYTES)
    guarded = [kernelcheck.Guarded(a.shape, a.dtype, fill=a, **host) if torch.is_tensor(a) else a for a in args]
    out = kernelcheck.Guarded(shape, dtype, **host)
    regions = [g.region(k, "in") for k, g in zip(ex.args, guarded) if isinstance(g, kernelcheck.Guarded)]
    regions.append(out.region("out", "out"))
    call = [g.view if isinstance(g, kernelcheck.Guarded) else g for g in guarded] + [out.view]
    kernelcheck.warm_interpreter(mine)
    seen = kernelcheck.preflight(mine, call, regions, "out", out, kernelcheck.limits())
    on = f"on a {_describe(shape)} probe"
    if seen.not_implemented:
        return f"{name} is still the stub (it raises NotImplementedError)"
    if seen.timeout:
        return f"{name} did not finish {on} within {kernelcheck.CASE_TIME_LIMIT_S:.0f} s (an endless loop?)"
    if seen.died is not None or seen.lost:
        return f"{name}'s run {on} ended without a result ({seen.lost or f'signal {seen.died}'})"
    if seen.raised:
        return f"{name} raised {seen.raised} {on}"
    if seen.violations:
        v = seen.violations[0]
        return f"{name} {v.op}s outside its buffers {on} ({v.side} {v.name})"
    if not seen.launches:
        return f"{name} launched no Triton kernel {on}"
    if not ex.close(out.view, ex.reference(args), args):
        return f"{name}'s result {on} differs from the reference"
    return ""


def _on_gpu() -> bool:
    return gpulab.ON_GPU


def _counters_line(ex: Exercise, name: str, counters: bool) -> tuple[str, tuple | None]:
    """On a GPU, the line about hardware counters, and ``(record, where)`` of gpulab's case measured now when
    ``counters`` and ncu can read them (else None: the recording is shown)."""
    from ..measure import counters as hw
    from ..measure import ncu

    if not _on_gpu():
        return "", None
    ok, why = ncu.available()
    if not ok:
        return f"  no hardware counters on this GPU: {why}", None
    if ex.recorded is None:
        return "  Nsight Compute reads this GPU's counters, but gpulab records no counter case for this kernel", None
    if not counters:
        return (
            f"  Nsight Compute can read this GPU: profile_mine({name}, counters=True) measures gpulab's kernel now",
            None,
        )
    try:
        rec = hw.measure(ex.recorded[0])
    except Exception as e:  # noqa: BLE001  (ncu refused or failed: the recording stays, and the line says why)
        return f"  ncu could not measure gpulab's kernel here ({clip(describe_error(e), 160)}): its recording", None
    p = rec["provenance"]
    return "", (rec, f"measured now on {p.get('gpu', '?')}, {ncu.ncu_short(p.get('ncu', '?'))}")


def profile_mine(mine, exercise: str | None = None, *, counters: bool = False, gpu=None, print_it: bool = True) -> str:
    """Trace ``mine``, the learner's launcher of a kernel exercise, at a small size, and show its counts beside
    the lesson's model and gpulab's recorded kernel (the module docstring says how). ``mine``: 02
    ``loop_grouped(x, trips, order, out)``, 06 ``strided_copy(x, stride, out)`` or ``transpose(a, out)``, 07
    ``tiled_matmul(a, b, out)``, 07b ``persistent_matmul(a, b, programs, out)``; ``exercise``: one of those names
    (None: ``mine.__name__``); ``counters``: on a GPU where Nsight Compute reads counters, measure gpulab's kernel
    now for its column (about a minute; default False: never runs ncu); ``gpu``: the GPU the counts are for (a name
    of ``gpulab.core.hardware``; default the GPU planned for). Never raises: a stub, a kernel that fails,
    strays or computes a wrong result, an unknown exercise or a launch the trace refuses is one line saying so.
    Returns the text (printed when ``print_it``)."""
    name = exercise or getattr(mine, "__name__", repr(mine))
    ex = EXERCISES.get(name)
    try:
        if ex is None:
            known = ", ".join(EXERCISES)
            text = f"not profiled: {name!r} is no kernel exercise profile_mine knows ({known}): pass exercise="
        elif not callable(mine):
            text = f"not profiled: {name!r} is not a function (pass the launcher you wrote)"
        else:
            text = _profile(mine, ex, name, counters, gpu)
    except Exception as e:  # noqa: BLE001  (a notebook's call never fails here: the reason, in one line)
        text = f"not profiled: {clip(describe_error(e), 200)}"
    if print_it:
        print(text)
    return text


def _profile(mine, ex: Exercise, name: str, counters: bool, gpu) -> str:
    checker = f"{ex.checker}({name})"
    wrong = _probe(mine, ex, name)
    if wrong:
        then = "write it, then pass" if "still the stub" in wrong else "the checker names the mistake:"
        return f"not profiled: {wrong}; {then} {checker}"
    args, (shape, dtype) = ex.inputs("trace")
    out = torch.zeros(shape, dtype=dtype)
    try:
        t = tr.trace(mine, *args, out, gpu=gpu)
    except Exception as e:  # noqa: BLE001
        return tr.not_traced(e)
    if all(lc.traced == lc.programs for lc in t.launches) and not ex.close(out, ex.reference(args), args):
        wrong = f"{name}'s result at {_describe(shape)} differs from the reference"
        return f"not profiled: {wrong}; the checker names the mistake: {checker}"
    model, how = ex.model(t, args)
    line, live = _counters_line(ex, name, counters)
    text = tr.table(t, model=model, recorded=ex.recorded, show=list(ex.show), record=live)
    return "\n".join(x for x in (text, f"  {how}" if how else "", line) if x)
