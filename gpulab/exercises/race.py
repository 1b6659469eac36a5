"""After a checker passes: the learner's kernel timed beside gpulab's and torch's, against the lesson's model.

One call, ``race(scale_add)`` (the launcher the learner wrote; ``lesson=`` picks the lesson when its name is not
the exercise's), returns a ``Race`` and draws one figure: each kernel's median time on the same inputs, and the
model's time as a dashed line. On a GPU (``timing.live()``) it runs the lesson's checker first (an unchecked kernel
is never launched on the large inputs, and while the checker fails nothing is timed: the recorded race is shown, so
a notebook run top to bottom with the exercises still open spends no autotuning on races), times the three with ``timing.time_ms`` (do_bench medians, L2 flushed),
and checks the learner's result on the large inputs against torch's. Without a GPU it says plainly that timing
needs one and shows gpulab's recorded point and torch's (``live.recall``: gpulab/data, labelled with the GPU it
was recorded on). Under the test clock the live path runs on the CPU at a small size, every time fake and labelled
``timing.FAKE_LABEL`` (``Race.asdict`` is a fake record, which ``--record`` refuses).

The models are the lessons' own: 00b's add (12 bytes per element), 01, 03 and 04 are memory-bound elementwise kernels whose bound is their HBM bytes
over the copy bandwidth (measured now on the same GPU, or recorded); 02's loop is ``divergence.predict_loop_ms``
from the times of gpulab's loop at zero trips and at every element expensive (lesson 02, section 4).
Lessons 05 to 07 (their own block): 05's recomputing backward is bound by its 12n bytes over the copy bandwidth,
06's transpose by 8n bytes, 07's matmul by 2N^3 over the fp16 rate torch.matmul reaches now at twice the side
(lesson 00's profile ceiling where recorded); there ``n`` is the output's elements (06 and 07: a square).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import plotly.graph_objects as go
import torch

import gpulab

from ..core import timing
from ..figures import plots
from ..kernels import bias_gelu as bg
from ..kernels import divergence as dv
from ..kernels import matmul as mm
from ..kernels import relu as relu_mod
from ..kernels import sigmoid3 as sig3
from ..kernels import sincos
from ..kernels import transpose as tr
from ..kernels import vector_add as va
from ..measure import live
from ..models import simt
from . import describe_error, ex00, ex01, ex01_solutions, ex02, ex03, ex04, ex05, ex06, ex07

FAKE_N = 4096  # the size under the test clock: the kernels run in the interpreter
_FAKE: dict[str, int] = {}  # a lesson's own size under the test clock, where FAKE_N is too long for it
_LOOP = dict(frac=1 / 64, cheap=4, expensive=64, block=1024)  # lesson 02's loop study (gpulab.bench.lesson02)


@dataclass(frozen=True)
class Entry:
    """One contender: ``who`` ("yours", "gpulab", "torch"), ``what`` it runs, ``ms`` its median time (None:
    not timed, ``note`` says why)."""

    who: str
    what: str
    ms: float | None
    note: str = ""


@dataclass(frozen=True)
class Race:
    """The outcome of ``race``: ``op`` what was timed at size ``n``; ``entries`` (yours, gpulab's, torch's);
    ``model_ms`` the lesson's model time for ``op`` (``model`` says how); ``where`` the label (measured now,
    recorded, or fake); ``live`` True when timed now; ``message`` what the learner should know first (timing
    needs a GPU, the kernel does not pass its checker, ...); ``figure`` the plotly figure."""

    lesson: str
    op: str
    n: int
    entries: tuple[Entry, ...]
    model_ms: float | None
    model: str
    where: str
    live: bool
    message: str = ""
    fake: bool = False  # timed under the test clock
    figure: go.Figure | None = field(default=None, repr=False, compare=False)

    def ms(self, who: str) -> float | None:
        """The median time of ``who`` ("yours", "gpulab", "torch"), or None."""
        return next((e.ms for e in self.entries if e.who == who), None)

    def asdict(self) -> dict:
        """The race as a record (stamped fake under the test clock: ``--record`` refuses it)."""
        d = dict(lesson=self.lesson, op=self.op, n=self.n, model_ms=self.model_ms, where=self.where, live=self.live)
        d["entries"] = [dict(who=e.who, what=e.what, ms=e.ms, note=e.note) for e in self.entries]
        return {**d, "clock": timing.FAKE_LABEL} if self.fake else d

    def __str__(self) -> str:
        lines = [self.message] if self.message else []
        lines.append(f"lesson {self.lesson}: {self.op}, n = {self.n:,} ({self.where})")
        for e in self.entries:
            t = f"{e.ms:9.4f} ms" if e.ms is not None else f"{'-':>9}   "
            vs = f"  {self.model_ms / e.ms:4.0%} of the model's speed" if e.ms and self.model_ms else ""
            lines.append(f"  {e.who:6} {t}{vs}  {e.what}{'; ' + e.note if e.note else ''}")
        if self.model_ms is not None:
            lines.append(f"  model  {self.model_ms:9.4f} ms  {self.model}")
        return "\n".join(lines)

    __repr__ = __str__


@dataclass
class _Bench:
    """The inputs of one lesson's race at size n, on the device: ``call(mine)`` launches the learner's
    launcher and returns its output; ``gpulab`` and ``torch`` return theirs; ``model_ms(time)`` the model."""

    call: Callable
    gpulab: Callable
    torch: Callable
    model_ms: Callable
    tol: float


@dataclass(frozen=True)
class _Lesson:
    exercise: str
    checker: Callable
    live_n: int
    op: str
    what: tuple[str, str]  # gpulab's, torch's (timed now)
    model: str
    bench: Callable[[int, str], _Bench]
    recorded: Callable[[dict], dict | None]  # the recording -> op, n, (ms, what) of gpulab and torch, model_ms


def _copy_model(nbytes_per_element: int, n: int, x: torch.Tensor, out: torch.Tensor):
    """The memory bound: the kernel's bytes over the copy bandwidth measured now (``out.copy_(x)``, fp32, 8n
    bytes, the same GPU and the same n)."""

    def model(time_ms):
        copy = time_ms(lambda: out.copy_(x))
        return nbytes_per_element * n / (8 * n / copy.median_ms)

    return model


def _bench00b(n, dev):
    gen = torch.Generator(dev).manual_seed(0)
    x, y = (torch.randn(n, device=dev, generator=gen) for _ in range(2))
    out = torch.empty_like(x)
    return _Bench(
        call=lambda mine: (mine(x, y, out), out)[1],
        gpulab=lambda: va.vector_add(x, y),
        torch=lambda: torch.add(x, y, out=out),
        model_ms=_copy_model(12, n, x, torch.empty_like(x)),
        tol=0.0,
    )


def _bench01(n, dev):
    gen = torch.Generator(dev).manual_seed(0)
    x = torch.randn(n, device=dev, generator=gen)
    a, b = 1.5, -0.25
    out, b0 = torch.empty_like(x), torch.tensor(b, device=dev)
    return _Bench(
        call=lambda mine: (mine(x, a, b, out), out)[1],
        gpulab=lambda: (ex01_solutions.scale_add(x, a, b, out), out)[1],
        torch=lambda: torch.add(b0, x, alpha=a, out=out),
        model_ms=_copy_model(8, n, x, torch.empty_like(x)),
        tol=1e-5,
    )


def _bench02(n, dev):
    trips_np = dv.mixed_trips(n, _LOOP["frac"], _LOOP["cheap"], _LOOP["expensive"], seed=0)
    order_np = simt.group_by_cost(trips_np)
    gen = torch.Generator(dev).manual_seed(0)
    x = torch.randn(n, device=dev, generator=gen) * 3
    trips = torch.from_numpy(trips_np).to(dev)
    order = torch.from_numpy(order_np).to(torch.int32).to(dev)
    xs, ts = x[order.long()].contiguous(), trips[order.long()].contiguous()  # gpulab's kernel (c) on sorted data
    out, steps = torch.empty_like(x), int(trips_np.max())

    def eager():
        y = xs
        for i in range(steps):
            y = torch.where(i < ts, torch.sin(y) * 0.9 + 0.1, y)
        return y

    def model(time_ms):
        zero, full = torch.zeros_like(ts), torch.full_like(ts, _LOOP["expensive"])
        t0, tf = (
            time_ms(lambda: dv.loop_cost(xs, zero, block=_LOOP["block"])),
            time_ms(lambda: dv.loop_cost(xs, full, block=_LOOP["block"])),
        )
        return dv.predict_loop_ms(t0.median_ms, tf.median_ms, _LOOP["expensive"], trips_np[order_np], _LOOP["block"])

    return _Bench(
        call=lambda mine: (mine(x, trips, order, out), out)[1],
        gpulab=lambda: dv.loop_cost(xs, ts, block=_LOOP["block"]),
        torch=eager,
        model_ms=model,
        tol=1e-4,
    )


def _bench03(n, dev):
    x = torch.randn(n, device=dev, generator=torch.Generator(dev).manual_seed(0))
    out = torch.empty_like(x)
    return _Bench(
        call=lambda mine: (mine(x, out), out)[1],
        gpulab=lambda: relu_mod.relu(x),
        torch=lambda: torch.relu(x),
        model_ms=_copy_model(8, n, x, torch.empty_like(x)),
        tol=0.0,
    )


def _bench04(n, dev):
    x = torch.randn(n, device=dev, generator=torch.Generator(dev).manual_seed(0)) * 3
    out = torch.empty_like(x)
    return _Bench(
        call=lambda mine: (mine(x, out), out)[1],
        gpulab=lambda: sincos.sincos(x),  # sin^2 + cos^2: the same five operations and bytes as the exercise's
        torch=lambda: torch.sin(x) ** 2 - torch.cos(x) ** 2,  # the exercise's sin^2 - cos^2, five eager kernels
        model_ms=_copy_model(8, n, x, torch.empty_like(x)),
        tol=1e-5,
    )


def _rec(op, n, gpulab_ms, gpulab_what, torch_ms, torch_what, model_ms) -> dict:
    return dict(op=op, n=n, gpulab=(gpulab_ms, gpulab_what), torch=(torch_ms, torch_what), model_ms=model_ms)


def _recorded00b(rec):
    add = next((r for r in rec.get("vendor_ratios", []) if r["name"] == "vector add fp32"), None)
    if add is None:
        return None
    model = 12 * add["n"] / (rec["profile"]["copy_tbps"] * 1e9)
    what = "gpulab's vector_add (kernels/vector_add.py)"
    return _rec(LESSONS["00b"].op, add["n"], add["gpulab_ms"], what, add["torch_ms"], "torch.add", model)


def _recorded01(rec):
    relu = next((r for r in rec.get("vendor_ratios", []) if r["name"] == "relu fp32"), None)
    if relu is None:
        return None
    n, what = relu["n"], "gpulab's relu: the same 8 bytes per element as scale_add"
    model = 8 * n / (rec["profile"]["copy_tbps"] * 1e9)
    return _rec(
        "an fp32 kernel of 8 bytes per element", n, relu["gpulab_ms"], what, relu["torch_ms"], "torch.relu", model
    )


def _recorded02(rec):
    loop = rec.get("lesson02", {}).get("loop") or {}
    row = next(
        (r for r in loop.get("rows", []) if r["frac_expensive"] == _LOOP["frac"] and r["layout"] == "sorted"), None
    )
    if row is None:
        return None
    what = "gpulab's loop kernel (c) on cost-sorted work"
    return _rec(LESSONS["02"].op, rec["lesson02"]["n"], row["measured_ms"], what, None, "torch", row["predicted_ms"])


def _recorded03(rec):
    row = next((r for r in rec.get("lesson03", {}).get("relu", []) if r["dtype"] == "fp32"), None)
    if row is None:
        return None
    model = row["bytes"] / (rec["profile"]["copy_tbps"] * 1e9)
    return _rec(
        LESSONS["03"].op, row["n"], row["gpulab_ms"], LESSONS["03"].what[0], row["torch_ms"], "torch.relu", model
    )


def _recorded04(rec):
    r4 = rec.get("lesson04")
    if r4 is None:
        return None
    ms = {r["method"]: r["ms"] for r in r4["headline"]}
    model = 8 * r4["n"] / (r4["copy_tbps"] * 1e9)
    return _rec(
        LESSONS["04"].op, r4["n"], ms["fused"], LESSONS["04"].what[0], ms["eager"], LESSONS["04"].what[1], model
    )


COPY_MODEL = "8n bytes / copy bandwidth (the memory bound)"
LESSONS = {
    "00b": _Lesson(
        "add",
        ex00.check_add,
        2**28,
        "x + y, fp32",
        ("gpulab's vector_add (kernels/vector_add.py)", "torch.add"),
        "12n bytes / copy bandwidth (the memory bound)",
        _bench00b,
        _recorded00b,
    ),
    "01": _Lesson(
        "scale_add",
        ex01.check_scale_add,
        2**28,
        "a * x + b, fp32",
        ("gpulab's solution (ex01_solutions.scale_add)", "torch.add(b, x, alpha=a)"),
        COPY_MODEL,
        _bench01,
        _recorded01,
    ),
    "02": _Lesson(
        "loop_grouped",
        ex02.check_loop_grouped,
        2**24,
        "the loop over cost-sorted work, 1 in 64 expensive",
        ("gpulab's loop kernel (c) on pre-sorted x, trips", "torch eager: a where per trip"),
        "divergence.predict_loop_ms from t(0 trips) and t(all 64)",
        _bench02,
        _recorded02,
    ),
    "03": _Lesson(
        "relu_cast",
        ex03.check_relu_cast,
        2**28,
        "ReLU fp32 -> fp32",
        ("gpulab's relu (kernels/relu.py)", "torch.relu"),
        COPY_MODEL,
        _bench03,
        _recorded03,
    ),
    "04": _Lesson(
        "sincos_fused",
        ex04.check_sincos_fused,
        2**28,
        "sin²x − cos²x fp32",
        ("gpulab's sincos (autotuned; sin²x + cos²x, the same work)", "torch eager, five kernels"),
        COPY_MODEL,
        _bench04,
        _recorded04,
    ),
}
_KEYS = {
    "00b": None,
    "01": None,
    "02": "lesson02",
    "03": "lesson03",
    "04": "lesson04",
}  # the recording each one recalls


# ---- lessons 05 to 07: the recomputing backward, the tiled transpose, the tiled matmul --------------------------
# n is the elements of the output: 05's dx, 06's (N, M) out and 07's C (square, side isqrt(n)).


def _side(n: int) -> int:
    side = math.isqrt(n)
    if side * side != n:
        raise ValueError(f"n must be a square number of elements (side x side) for this lesson, got {n:,}")
    return side


def _bench05(n, dev):
    gen = torch.Generator(dev).manual_seed(0)
    x = torch.randn(n, device=dev, generator=gen) * 3
    dy, out = torch.randn(n, device=dev, generator=gen), torch.empty_like(x)
    s1 = torch.sigmoid(x)
    s2 = torch.sigmoid(s1)
    s3 = torch.sigmoid(s2)  # what eager autograd saved in forward

    def eager_backward():  # autograd's three sigmoid-backward kernels: 9n elements
        g = torch.ops.aten.sigmoid_backward(dy, s3)
        return torch.ops.aten.sigmoid_backward(torch.ops.aten.sigmoid_backward(g, s2), s1)

    return _Bench(
        call=lambda mine: (mine(x, dy, out), out)[1],
        gpulab=lambda: sig3.sigmoid3_backward(x, dy),
        torch=eager_backward,
        model_ms=_copy_model(12, n, x, torch.empty_like(x)),
        tol=1e-6,
    )


def _bench06(n, dev):
    side = _side(n)
    a = torch.randn(side, side, device=dev, generator=torch.Generator(dev).manual_seed(0))
    out = torch.empty_like(a)
    return _Bench(
        call=lambda mine: (mine(a, out), out)[1],
        gpulab=lambda: tr.transpose(a),
        torch=lambda: tr.transpose_torch(a),
        model_ms=_copy_model(8, n, a.reshape(-1), torch.empty(n, device=dev)),
        tol=0.0,
    )


def _matmul_model(side: int, a: torch.Tensor, b: torch.Tensor):
    """The compute bound 2 N^3 / C, with C the rate torch.matmul reaches now at twice the side (fp16, the same
    GPU): at 8192 it is lesson 00's profile ceiling; the bytes (3 N^2 fp16) are far below at these sizes."""

    def model(time_ms):
        big = 2 * side
        gen = torch.Generator(a.device).manual_seed(1)
        x = torch.randn(big, big, device=a.device, generator=gen).half()
        t = time_ms(lambda: torch.matmul(x, x)).median_ms
        return t * (side / big) ** 3

    return model


def _bench07(n, dev):
    side = _side(n)
    gen = torch.Generator(dev).manual_seed(0)
    a = torch.randn(side, side, device=dev, generator=gen).half()
    b = torch.randn(side, side, device=dev, generator=gen).half()
    out = torch.empty_like(a)
    return _Bench(
        call=lambda mine: (mine(a, b, out), out)[1],
        gpulab=lambda: mm.matmul(a, b),
        torch=lambda: torch.matmul(a, b),
        model_ms=_matmul_model(side, a, b),
        tol=0.05 * math.sqrt(side),  # fp16 C of a K-long fp32 sum: a few fp16 units at |C| ~ sqrt(K)
    )


def _bench07b(n, dev):
    side = _side(n)
    gen = torch.Generator(dev).manual_seed(0)
    a = torch.randn(side, side, device=dev, generator=gen).half()
    b = torch.randn(side, side, device=dev, generator=gen).half()
    out = torch.empty_like(a)
    # one program per SM: the persistent launch the exercise asks for (4 under the test clock, fewer than the tiles)
    programs = torch.cuda.get_device_properties(dev).multi_processor_count if gpulab.ON_GPU else 4
    return _Bench(
        call=lambda mine: (mine(a, b, programs, out), out)[1],
        gpulab=lambda: mm.matmul(a, b),
        torch=lambda: torch.matmul(a, b),
        model_ms=_matmul_model(side, a, b),
        tol=0.05 * math.sqrt(side),  # as lesson 07's
    )


def _recorded07b(rec):
    side = math.isqrt(LESSONS["07b"].live_n)  # the live race's shape and dtype: 4096, fp16
    rows = (rec.get("lesson07") or {}).get("headline") or []
    pick = {r["method"]: r for r in rows if r["n"] == side and r["dtype"] == "fp16"}
    if "gpulab" not in pick:
        return None
    g, t = pick["gpulab"], pick.get("torch")
    model = 2 * side**3 / (rec["profile"]["matmul_tflops"]["fp16"] * 1e9)
    what = f"gpulab's matmul, lesson 07's headline ({g['config']})"
    return _rec(LESSONS["07b"].op, side * side, g["ms"], what, t and t["ms"], "torch.matmul (cuBLAS)", model)


def _recorded05(rec):
    r5 = rec.get("lesson05") or {}
    row = next((r for r in r5.get("teaching") or [] if r["pass"] == "backward" and r["kernel"] == "production"), None)
    if row is None:
        return None
    model = 12 * row["n"] / (rec["profile"]["copy_tbps"] * 1e9)
    return _rec(LESSONS["05"].op, row["n"], row["ms"], LESSONS["05"].what[0], None, "torch", model)


def _recorded06(rec):
    t6 = (rec.get("lesson06") or {}).get("transpose") or {}
    ms = {r["method"]: r["ms"] for r in t6.get("rows", []) if r["dtype"] == "fp32"}
    if "tiled" not in ms:
        return None
    n = t6["m"] * t6["n"]
    model = 8 * n / (rec["lesson06"]["copy_tbps"] * 1e9)
    what = LESSONS["06"].what
    return _rec(f"B = A^T, {t6['m']} x {t6['n']} fp32", n, ms["tiled"], what[0], ms.get("torch"), what[1], model)


def _recorded07(rec):
    build = (rec.get("lesson07") or {}).get("build") or []
    ms = {r["step"]: r for r in build}
    if "fast path" not in ms:
        return None
    side = ms["fast path"]["n"]
    model = 2 * side**3 / (rec["profile"]["matmul_tflops"]["fp16"] * 1e9)
    t = ms.get("torch")
    return _rec(
        f"C = A @ B, {side} x {side} fp16",
        side * side,
        ms["fast path"]["ms"],
        "gpulab's fast path (lesson 07's build, last step)",
        t and t["ms"],
        "torch.matmul (cuBLAS)",
        model,
    )


LESSONS.update(
    {
        "05": _Lesson(
            "sigmoid3_bwd",
            ex05.check_sigmoid3_bwd,
            2**28,
            "dx of s(s(s(x))), recomputing s1, s2, s3, fp32",
            ("gpulab's sigmoid3_backward (BLOCK 1024)", "torch eager: three sigmoid_backward kernels"),
            "12n bytes (x, dy, dx) / copy bandwidth (the memory bound)",
            _bench05,
            _recorded05,
        ),
        "06": _Lesson(
            "transpose",
            ex06.check_transpose,
            2**28,
            "B = A^T, square fp32",
            ("gpulab's tiled transpose (autotuned)", "torch: a.t().contiguous()"),
            COPY_MODEL,
            _bench06,
            _recorded06,
        ),
        "07": _Lesson(
            "tiled_matmul",
            ex07.check_tiled_matmul,
            2**24,
            "C = A @ B, square fp16",
            ("gpulab's matmul (autotuned, the build's fast path)", "torch.matmul (cuBLAS)"),
            "2N^3 / the fp16 rate torch.matmul reaches at 2N (the compute bound)",
            _bench07,
            _recorded07,
        ),
    }
)
LESSONS["07b"] = _Lesson(
    "persistent_matmul",
    ex07.check_persistent_matmul,
    2**24,
    "C = A @ B, square fp16, one program per SM",
    ("gpulab's matmul (autotuned; persistent where it pays)", "torch.matmul (cuBLAS)"),
    "2N^3 / the fp16 rate torch.matmul reaches at 2N (the compute bound)",
    _bench07b,
    _recorded07b,
)
_KEYS.update({"05": "lesson05", "06": "lesson06", "07": "lesson07", "07b": "lesson07"})


def _lesson_of(mine, lesson) -> str:
    if lesson is None:
        name = getattr(mine, "__name__", "")
        found = [k for k, v in LESSONS.items() if v.exercise == name]
        if not found:
            names = ", ".join(f"{v.exercise} (lesson {k})" for k, v in LESSONS.items())
            raise ValueError(
                f"race: {name or mine!r} is no exercise it knows ({names}); pass lesson= one of {sorted(LESSONS)}"
            )
        return found[0]
    key = f"{lesson:02d}" if isinstance(lesson, int) and not isinstance(lesson, bool) else str(lesson)
    key = key if key in LESSONS else key[:2]  # "00b" names its lesson; "01_roofline" is lesson 01
    if key not in LESSONS:
        raise ValueError(f"lesson must be one of {sorted(LESSONS)} (a str or int), got {lesson!r}")
    return key


def _recorded_race(key: str, spec: _Lesson, reason: str | None = None, note: str = "needs a GPU") -> Race:
    """The race from the recording: ``reason`` says why nothing is timed now (default: no GPU here), ``note`` labels
    the learner's missing bar."""
    shown = live.recall(_KEYS[key])
    got = spec.recorded(live.recorded()) if shown.data is not None else None
    if reason is None:
        reason = f"timing needs a GPU (gpulab runs in {gpulab.MODE} mode here), so yours is not timed; "
    yours = Entry("yours", spec.exercise, None, note)
    if got is None:
        return Race(key, spec.op, 0, (yours,), None, spec.model, shown.where, False, reason + "nothing is recorded yet")
    (g_ms, g_what), (t_ms, t_what) = got["gpulab"], got["torch"]
    entries = (
        yours,
        Entry("gpulab", g_what + ", recorded", g_ms),
        Entry("torch", t_what, t_ms, "recorded" if t_ms is not None else "not recorded for this lesson"),
    )
    msg = reason + "gpulab's recorded point instead:"
    return Race(key, got["op"], got["n"], entries, got["model_ms"], spec.model, shown.where, False, msg)


def _timed(fn) -> tuple[float | None, str]:
    try:
        return timing.time_ms(fn).median_ms, ""
    except Exception as e:  # the learner's launcher failing on the large inputs: reported, not raised
        return None, f"raised {describe_error(e)}: not timed"


def _live_race(key: str, spec: _Lesson, mine, n: int) -> Race:
    rep = spec.checker(mine)
    if not rep.ok:  # nothing is timed: gpulab's and torch's times alone cost a compile and an autotuning sweep
        first = str(rep).splitlines()[0]
        checker = f"{spec.checker.__module__.rsplit('.', 1)[-1]}.{spec.checker.__name__}"
        reason = f"your kernel does not pass {checker} yet ({first}): nothing is timed until it does; "
        return _recorded_race(key, spec, reason, note="not timed")
    bench = spec.bench(n, timing.device())
    msg = ""
    yours, note = _timed(lambda: bench.call(mine))
    if yours is not None:
        got, ref = bench.call(mine).double(), bench.torch().double()
        err = (got - ref).abs().max().item() if got.shape == ref.shape else float("inf")
        if not err <= bench.tol:
            msg = (
                f"your result at n = {n:,} differs from torch's by up to {err:.3g}: check it before you trust its time"
            )
    entries = (
        Entry("yours", spec.exercise, yours, note),
        Entry("gpulab", spec.what[0], timing.time_ms(bench.gpulab).median_ms),
        Entry("torch", spec.what[1], timing.time_ms(bench.torch).median_ms),
    )
    model_ms = bench.model_ms(timing.time_ms)
    return Race(key, spec.op, n, entries, model_ms, spec.model, timing.where(), True, msg, timing.is_fake())


#: Characters a line of a contender's label (its name, then its time) before it wraps: a third of a 570 px column.
LABEL_CHARS = 34


def _label(e: Entry) -> str:
    """A contender's row label: ``who: what`` (``what`` alone where it starts with ``who``: "gpulab's matmul")
    wrapped at ``LABEL_CHARS``, then its median time, or why it has none."""
    name = e.what if e.what.startswith(e.who) else f"{e.who}: {e.what}"
    said = f"{e.ms:.4g} ms" if e.ms is not None else (e.note or "not timed")
    return plots.wrap(name, LABEL_CHARS) + "<br>" + said


def race_figure(r: Race) -> go.Figure:
    """The race as bars that read across, one per contender, each named in its row's label with its median time
    (a missing time says why there: no number on a bar, where the model's line would cross it); the model's time
    as a dashed line marked "model", what the model is in the subtitle under ``r.where``."""
    labels = [_label(e) for e in r.entries]
    xs = [e.ms for e in r.entries]
    fig = go.Figure(go.Bar(x=xs, y=labels, orientation="h", marker_color=["#d62728", "#1f77b4", "#7f7f7f"][: len(xs)]))
    top = max([v for v in xs if v is not None] + [r.model_ms or 0]) or 1.0
    sub = r.where
    if r.model_ms is not None:
        fig.add_vline(
            x=r.model_ms, line_dash="dash", line_color="black", annotation_text="model", annotation_position="top"
        )
        sub += f"<br>dashed: the model, {r.model}: {r.model_ms:.4g} ms"
    lines = max(label.count("<br>") + 1 for label in labels)
    fig.update_layout(
        title=plots.title(f"Lesson {r.lesson}: {r.op}, n = {r.n:,}", sub, gap=24),  # clear of the model's mark
        height=190 + len(labels) * (16 * lines + 16),  # px: the title and axis, then a row of the longest label
        template="plotly_white",
        margin=dict(l=20, t=30, r=30),
        xaxis=dict(title="median time (ms)", range=[0, 1.15 * top]),
        yaxis=dict(autorange="reversed"),
    )
    return fig


def race(mine, lesson: str | int | None = None, n: int | None = None, show: bool = True) -> Race:
    """Time ``mine``, the learner's launcher of a lesson's kernel exercise, beside gpulab's kernel and torch's on
    the same inputs, and draw the three against the lesson's model (the report printed and one figure shown when ``show``).

    ``mine``: the launcher the exercise asks for (00b ``add(x, y, out)``, 01 ``scale_add(x, a, b, out)``, 02 ``loop_grouped(x, trips,
    order, out)``, 03 ``relu_cast(x, out)``, 04 ``sincos_fused(x, out)``, 05 ``sigmoid3_bwd(x, dy, out)``, 06
    ``transpose(a, out)``, 07 ``tiled_matmul(a, b, out)``, 07b ``persistent_matmul(a, b, programs, out)``, one
    program per SM; for 06 and 07 ``n`` is the output's elements, a square); ``lesson``: "00b", "01".."09" or 1..9 (None:
    found from ``mine.__name__``); ``n``: elements (default: the lesson's size on a GPU, 2^28 or 2^24 fp32;
    ``FAKE_N`` under the test clock). On a GPU the lesson's checker runs first: while the kernel does not
    pass, nothing is timed and the recorded race is shown, the checker's first line in ``message``. Without a GPU
    nothing is timed: the result says that timing needs
    a GPU and holds gpulab's and torch's recorded times. Returns a ``Race``; raises ValueError for an unknown
    lesson or a bad ``n``.
    """
    key = _lesson_of(mine, lesson)
    spec = LESSONS[key]
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
        raise ValueError(f"n must be a positive int (elements), got {n!r}")
    if timing.live():
        size = n or (spec.live_n if gpulab.ON_GPU else _FAKE.get(key, FAKE_N))
        r = _live_race(key, spec, mine, size)
    else:
        r = _recorded_race(key, spec)
    fig = race_figure(r)
    r = Race(**{**r.__dict__, "figure": fig})
    if show:
        print(r)
        fig.show()
    return r


# ---- lesson 08: the learner's FlashAttention forward --------------------------------------------------------------
# (A block of its own: the other lessons' entries are added to LESSONS and _KEYS the same way.)

_SHAPE08 = dict(B=4, H=16, d=128)  # the headline shape at L = 4096 (bench.lesson08.setting_shape): B*L = 16384
FAKE_L08 = 32  # the length under the test clock: the kernels run in the interpreter


def _attention_inputs(L, dev, count):
    """``count`` random (B, H, L, d) tensors of lesson 08's races (the headline shape, fp16, on a GPU; (1, 2, L, 16)
    fp32 under the test clock), their generator, and the compute-bound model of ``flops``: the FLOPs at the rate of
    an fp16 4096² matmul measured now."""
    B, H, d = _SHAPE08.values() if gpulab.ON_GPU else (1, 2, 16)
    dt = torch.float16 if gpulab.ON_GPU else torch.float32
    gen = torch.Generator(dev).manual_seed(0)
    tensors = [torch.randn(B, H, L, d, device=dev, dtype=dt, generator=gen) for _ in range(count)]

    def model_of(flops):
        def model(time_ms):
            n = 4096 if gpulab.ON_GPU else 64
            a = torch.randn(n, n, device=dev, dtype=dt, generator=gen)
            return flops / (2.0 * n**3 / time_ms(lambda: a @ a).median_ms)

        return model

    return tensors, 4.0 * B * H * L * L * d, model_of


def _headline08(rec):
    """The recorded lesson 08 headline row of the races' setting (d = 128, L = 4096, non-causal), or None."""
    rows = (rec.get("lesson08") or {}).get("headline", [])
    return next((r for r in rows if (r["d"], r["L"], r["causal"]) == (128, 4096, False)), None)


def _bench08(L, dev):
    from ..kernels import flash_attention as fa

    (q, k, v), flops, model_of = _attention_inputs(L, dev, 3)
    out = torch.empty_like(q)
    model = model_of(flops)

    return _Bench(
        call=lambda mine: (mine(q, k, v, False, out), out)[1],
        gpulab=lambda: fa.flash_attention(q, k, v),
        torch=lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v),
        model_ms=model,
        tol=2e-2,  # fp16 on a GPU; fp32 with TF32 dots (tl.dot's default) in the interpreter: 10-bit inputs both
    )


#: SDPA's backends the lesson 08 suite records, by key, with their names.
_SDPA08 = {"flash": "SDPA's FlashAttention-2 backend", "cudnn": "SDPA's cuDNN backend"}


def _recorded_headline08(key: str, part: str, rec):
    """Lesson ``key``'s ("08", "08b") recorded race: the headline row's ``part`` ("fwd_ms", "bwd_ms") of ours and of
    the fastest of SDPA's recorded backends (``_SDPA08``), named, in the recording's dtype (bf16); no model (no
    matmul rate at this shape is recorded beside it: it needs the GPU)."""
    row = _headline08(rec)
    if row is None or part not in row.get("ours", {}):
        return None
    times = {k: row[k][part] for k in _SDPA08 if (row.get(k) or {}).get(part)}
    best = min(times, key=times.get) if times else None
    what = f"{_SDPA08[best]}, the fastest recorded" if best else LESSONS[key].what[1]
    op = LESSONS[key].op.replace("fp16", "bf16")  # the suite records bf16; the live race runs fp16 (any GPU has it)
    return _rec(op, 4096, row["ours"][part], LESSONS[key].what[0], times.get(best), what, None)


def _checker08(mine):
    from . import ex08

    return ex08.check_flash_forward(mine)


LESSONS["08"] = _Lesson(
    "flash_forward",
    _checker08,
    4096,
    "attention forward, B=4, H=16, L (n) tokens, d=128, fp16, non-causal",
    ("gpulab's flash_attention (autotuned)", "SDPA (the backend torch picks here)"),
    "4BHL²d FLOPs at the rate of an fp16 4096² matmul measured now (the compute bound)",
    _bench08,
    functools.partial(_recorded_headline08, "08", "fwd_ms"),
)
_KEYS["08"] = "lesson08"
_FAKE["08"] = FAKE_L08


# ---- lesson 08b: the learner's FlashAttention backward in Triton (the lesson-08 shape) ---------------------------


def _bench08b(L, dev):
    from ..kernels import flash_attention as fa

    (q, k, v, do), fwd_flops, model_of = _attention_inputs(L, dev, 4)
    o, lse = fa.flash_attention_forward(q, k, v)
    delta = (do.float() * o.float()).sum(-1)  # rowsum(dO o O), (B, H, L) float32, as the exercise hands it over
    out = torch.empty(3, *q.shape, device=dev, dtype=q.dtype)
    qg, kg, vg = (t.clone().requires_grad_() for t in (q, k, v))
    sdpa = torch.nn.functional.scaled_dot_product_attention(qg, kg, vg)  # its graph kept: the backward alone is timed
    model = model_of(2.5 * fwd_flops)  # the backward's FLOPs: 2.5 times the forward's (gpulab.models.attention)

    return _Bench(
        call=lambda mine: (mine(q, k, v, do, lse, delta, False, out), out[0])[1],  # dq compared
        gpulab=lambda: fa.flash_attention_backward(q, k, v, o, lse, do)[0],
        torch=lambda: torch.autograd.grad(sdpa, (qg, kg, vg), do, retain_graph=True)[0],
        model_ms=model,
        tol=5e-2,  # as lesson 08's: fp16 on a GPU, TF32 dots in the interpreter
    )


def _checker08b(mine):
    from . import ex08b

    return ex08b.check_flash_backward_kernel(mine)


LESSONS["08b"] = _Lesson(
    "flash_backward_kernel",
    _checker08b,
    4096,
    "attention backward, B=4, H=16, L (n) tokens, d=128, fp16, non-causal",
    ("gpulab's flash_attention_backward (autotuned)", "SDPA's backward (the backend torch picks here)"),
    "2.5 x 4BHL²d FLOPs at the rate of an fp16 4096² matmul measured now (the compute bound)",
    _bench08b,
    functools.partial(_recorded_headline08, "08b", "bwd_ms"),
)
_KEYS["08b"] = "lesson08"
_FAKE["08b"] = FAKE_L08


# ---- lesson 09: the learner's fused bias + GELU (its own block: other lessons add theirs above) -------------
_MLP_WIDTH = 3072  # the columns of x: GPT-2 small's MLP width, 4 x d_model


def _bench09(n, dev):
    """x: (n / 3072, 3072) fp32 (fewer columns when n is smaller), bias (3072,); the model: x read, out
    written, 8 bytes an element (the bias, 4 bytes a column, is left out) over the copy bandwidth."""
    import torch.nn.functional as F

    cols = min(_MLP_WIDTH, n)
    rows = max(1, n // cols)
    gen = torch.Generator(dev).manual_seed(0)
    x = torch.randn(rows, cols, device=dev, generator=gen) * 3
    bias = torch.randn(cols, device=dev, generator=gen)
    out = torch.empty_like(x)
    return _Bench(
        call=lambda mine: (mine(x, bias, out), out)[1],
        gpulab=lambda: bg.bias_gelu(x, bias, out),
        torch=lambda: F.gelu(x + bias, approximate="tanh"),
        model_ms=_copy_model(8, rows * cols, x, torch.empty_like(x)),
        tol=1e-4,
    )


def _recorded09(rec):
    r9 = (rec.get("lesson09") or {}).get("bias_gelu")
    if r9 is None:
        return None
    n = r9["M"] * r9["N"]
    model = 8 * n / (r9["copy_tbps"] * 1e9)
    return _rec(
        LESSONS["09"].op, n, r9["gpulab_ms"], LESSONS["09"].what[0], r9["torch_ms"], LESSONS["09"].what[1], model
    )


def _check09(fn):
    from . import ex09

    return ex09.check_bias_gelu(fn)


LESSONS["09"] = _Lesson(
    "bias_gelu",
    _check09,
    8192 * _MLP_WIDTH,
    "tanh-GELU(x + bias), fp32, the MLP's (8192, 3072)",
    ("gpulab's bias_gelu, one fused kernel", "torch eager: gelu(x + bias), two kernels"),
    COPY_MODEL,
    _bench09,
    _recorded09,
)
_KEYS["09"] = "lesson09"
