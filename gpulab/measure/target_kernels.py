"""The kernels ``python -m gpulab.measure.targets`` compiles: one ``LessonKernel`` row per kernel as it is launched
(``LESSON_KERNELS``), each with the configurations the plan of a GPU gives it. ``gpulab.measure.targets`` compiles them.

What is a row: every ``@triton.jit`` kernel that a lesson's code, a notebook, an exercise's hidden solution or the
package launches (tests/test_compile_coverage.py finds each one in the source and fails on one without a row,
unless its allow-list says why). A row names the lesson (the notebook that runs it), the kernel (``module``: a
file of ``gpulab/kernels`` by its stem, another module by its dotted name, or a notebook by its path; ``kernel``:
its ``@triton.jit`` function), the element types it is launched with (``dtype``, then ``more_dtypes``), and
``launches(plan, dtype)``: the configurations launched, first the one taken without autotuning, then the other
autotuning candidates and the other shapes the lessons launch. A code path chosen by a constexpr flag (causal,
a TMA load, a fast sine) is a row of its own, so that the first configuration of every row (``python -m
gpulab.measure.targets``) compiles every path; ``--all-configs`` compiles every configuration.

The lesson settings (lesson 07's build dtype, lesson 08's head dimensions) are read from the kernels they
configure, their one home (the suites read them there too); the exercise solutions' block sizes and head
dimensions are their launchers' defaults and their checkers' and races' shapes, written here as numbers (this
module imports no exercise or suite; tests/test_compile_coverage.py holds them equal).

This module imports the kernel modules: only the parent process of ``python -m gpulab.measure.targets`` imports it,
never a compile worker (which must import the kernels after clearing ``TRITON_INTERPRET``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ..core import dtypes
from ..kernels import (
    bias_gelu,
    divergence,
    flash_attention,
    flash_teaching,
    matmul,
    matmul_precision,
    matmul_steps,
    read_bw,
    sigmoid3_teaching,
    sincos,
    strided,
    transpose,
)
from .counter_cases import COALESCING_LAUNCH

#: The head dimensions of the production attention rows: lesson 08's headline head dimensions.
HEAD_DIMS = flash_attention.LESSON_HEAD_DIMS
#: The head dimension of lesson 08's teaching-against-production step (one, for every length it runs).
(TEACHING_HEAD_DIM,) = {d for d, _ in flash_teaching.LESSON_SETTINGS}
E_BLOCK = 1024  # elementwise kernels' BLOCK on a GPU (every launcher's default)
SIXTEEN = ("fp16", "bf16")  # the 16-bit element types an elementwise launcher takes beside fp32


@dataclass(frozen=True)
class Launch:
    """One configuration: compile-time constants and the launch options."""

    constexprs: dict
    num_warps: int = 4
    num_stages: int = 3

    def short(self) -> str:
        blocks = "x".join(str(v) for k, v in self.constexprs.items() if k.startswith("BLOCK"))
        return f"{blocks} w{self.num_warps} s{self.num_stages}"


@dataclass(frozen=True)
class LessonKernel:
    """One kernel as a lesson launches it: ``lesson`` ("07"), ``name`` (the table's, unique), ``module`` (a file
    of ``gpulab/kernels`` by its stem, another module by its dotted name, a notebook by its path from the
    project root) and ``kernel`` (its ``@triton.jit`` function), ``dtype`` (the element type wanted) and
    ``more_dtypes`` (the others it is launched with: a table row each). ``dot``: the kernel multiplies on tensor
    cores (so ``plan.dtype`` may replace bf16 or fp8 by fp16); ``needs``: a ``plan.FEATURES`` key the path
    needs, ``instead`` the row taken without it; ``pointers``: arguments that are pointers of ``dtype`` beside
    those named ``*_ptr``; ``types``: argument -> Triton type where that rule (pointers of ``dtype``, other
    arguments i32) does not hold ("*fp32", "fp32", "none" for an argument passed as None, "desc<R,C>" for a TMA
    descriptor of (R, C) tiles named by constexprs or ints, "*dtype" for a pointer of the row's dtype);
    ``launches(plan, dtype)``: the configurations launched, first the one taken without autotuning."""

    lesson: str
    name: str
    module: str
    kernel: str
    dtype: str
    launches: Callable
    dot: bool = False
    needs: str | None = None
    instead: str = ""
    pointers: tuple = ()
    types: dict = field(default_factory=dict)
    more_dtypes: tuple = ()


# ---- launches: the configurations each kernel gets on a GPU's plan ----------------------------------------------


def _one(num_warps: int = 4, num_stages: int = 3, **constexprs):
    """One launch with these constexprs (Triton's default warps and stages unless given)."""
    return lambda p, dtype: [Launch({**constexprs}, num_warps, num_stages)]


def _each(*launches: dict):
    """One launch per dict of constexprs, with Triton's default warps and stages (the shapes a kernel is launched
    with by different callers: a checker's and a race's head dimension)."""
    return lambda p, dtype: [Launch(dict(ce)) for ce in launches]


def _configs(module, attr: str, **extra):
    """Launches from a list of ``triton.Config`` in a kernel module (its autotuning candidates), with the
    constexprs ``extra`` added."""

    def launches(p, dtype):
        return [Launch({**c.kwargs, **extra}, c.num_warps, c.num_stages) for c in getattr(module, attr)]

    return launches


def _and(launches, *more: Launch):
    """``launches`` and then ``more``: shapes a caller passes explicitly beside a kernel's autotuning list."""
    return lambda p, dtype: [*launches(p, dtype), *more]


def _sigmoid3(**extra):
    """The launch of a ``kernels.sigmoid3`` kernel: ``F64`` for fp64 (the launcher's rule), ``BLOCK`` its own."""
    return lambda p, dtype: [Launch({"BLOCK": E_BLOCK, "F64": dtype == "fp64", **extra})]


def _matmul(path: str):
    """Launches of ``matmul``'s ``path`` as the plan tunes it (``kernels.matmul.candidates``); ``UPCAST`` off (the
    interpreter's bf16 workaround, never taken on a GPU)."""

    def launches(p, dtype):
        out = []
        for c in matmul.candidates(path, dtypes.torch_dtype(dtype), p):
            ce = {
                "BLOCK_M": c.BLOCK_M,
                "BLOCK_N": c.BLOCK_N,
                "BLOCK_K": c.BLOCK_K,
                "GROUP_M": c.GROUP_M,
                "UPCAST": False,
            }
            if path == "tma":
                ce.update(FLATTEN=c.flatten, WARP_SPECIALIZE=c.warp_specialize)
            else:
                ce["INPUT_PRECISION"] = p.input_precision("tf32") if dtype == "fp32" else "tf32"
            out.append(Launch(ce, c.num_warps, c.num_stages))
        return out

    return launches


def _flash_fwd(causal: bool, tma: bool):
    """Launches of the attention forward as the plan tunes it (``kernels.flash_attention.fwd_candidates``), at
    each of lesson 08's head dimensions (the smallest first)."""

    def launches(p, dtype):
        flags = dict(CAUSAL=causal, USE_TMA=tma, UPCAST=False, DOT_PREC="ieee" if dtype == "fp32" else "tf32")
        return [
            Launch(dict(c.kwargs, HEAD_DIM=d, **flags), c.num_warps, c.num_stages)
            for d in sorted(HEAD_DIMS)
            for c in flash_attention.fwd_candidates(dtypes.torch_dtype(dtype), causal, d, p)
        ]

    return launches


def _flash_bwd(part: str, causal: bool):
    """Launches of one part of the attention backward as the plan tunes it (``bwd_candidates``), at each of lesson
    08's head dimensions."""

    def launches(p, dtype):
        flags = dict(CAUSAL=causal, USE_TMA=False, UPCAST=False, DOT_PREC="ieee" if dtype == "fp32" else "tf32")
        return [
            Launch(dict(c.kwargs, HEAD_DIM=d, **flags, **flash_attention.BWD_PARTS[part]), c.num_warps, c.num_stages)
            for d in sorted(HEAD_DIMS)
            for c in flash_attention.bwd_candidates(part, dtypes.torch_dtype(dtype), p)
        ]

    return launches


def _precision(input_precision: str, acc_fp16: bool):
    """The launch of ``matmul_precision`` on a GPU: the plan's blocks (``planned_blocks``), its warps."""

    def launches(p, dtype):
        bm, bn, bk = matmul_precision.planned_blocks(p)
        prec = p.input_precision(input_precision) if dtype == "fp32" else input_precision
        ce = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "UPCAST": False, "INPUT_PRECISION": prec}
        return [Launch({**ce, "ACC_FP16": acc_fp16}, matmul_precision.num_warps_for(bm, bn), 3)]

    return launches


def _step(step: str):
    """The launch of one step of ``kernels.matmul_steps`` on a GPU: ``StepConfig()``, ``STEP_LAUNCH[step]``."""

    def launches(p, dtype):
        c = matmul_steps.StepConfig()
        if matmul_steps.STEP_LAUNCH[step] is None:
            return [Launch({"BLOCK": c.BLOCK, "BLOCK_K": c.BLOCK_K})]  # Triton's default warps and stages
        group_m, stages = matmul_steps.STEP_LAUNCH[step]
        ce = {"BLOCK_M": c.BLOCK_M, "BLOCK_N": c.BLOCK_N, "BLOCK_K": c.BLOCK_K, "GROUP_M": group_m}
        return [Launch(ce, c.num_warps, stages)]

    return launches


def _teaching(part: str, causal: bool):
    """The launch of the ``kernels.flash_teaching`` kernel ``part`` on a GPU: the plan's tiles
    (``planned_blocks``), Triton's default warps and stages."""

    def launches(p, dtype):
        bm, bn = flash_teaching.planned_blocks(TEACHING_HEAD_DIM, dtypes.itemsize(dtype), part, p)
        prec = flash_teaching.dot_precision(dtypes.torch_dtype(dtype))
        return [Launch({"BLOCK_M": bm, "BLOCK_N": bn, "D": TEACHING_HEAD_DIM, "CAUSAL": causal, "DOT_PREC": prec})]

    return launches


# ---- argument types of the attention kernels -----------------------------------------------------------------

_FWD_TYPES = {"LSE": "*fp32", "qk_scale": "fp32", "desc_q": "none", "desc_k": "none", "desc_v": "none"}
_FWD_TMA_TYPES = dict(
    _FWD_TYPES, desc_q="desc<BLOCK_M,HEAD_DIM>", desc_k="desc<BLOCK_N,HEAD_DIM>", desc_v="desc<BLOCK_N,HEAD_DIM>"
)
_BWD_TYPES = {
    "LSE": "*fp32",
    "DELTA": "*fp32",
    "qk_scale": "fp32",
    "sm_scale": "fp32",
    "desc_q": "none",
    "desc_k": "none",
    "desc_v": "none",
    "desc_do": "none",
}
_QKVO = ("Q", "K", "V", "O")
_BWD_POINTERS = ("Q", "K", "V", "DO", "DQ", "DK", "DV")
#: The element type the production attention is launched with beside lesson 08's bf16: fp16, by the races of
#: exercises 08 and 08b (``exercises.race``: the forward and the default, split, backward; non-causal). Its fp32
#: path runs only in the tests, which ``make gpu-check`` runs (and so compiles) on the H200 alone.
_ATTENTION_MORE = ("fp16",)
_BWD_NAMES = {"dkdv": "dk, dv", "dq": "dq", "fused": "fused", "atomic": "atomic dq"}


#: (BLOCK, num_warps, dtype, CONTIGUOUS) of the strided copy whose layout ``gpulab.measure.targets.strided_layouts``
#: compiles: lesson 06's coalescing counter case's launch (``counter_cases.COALESCING_LAUNCH``, its one home), in
#: fp32, at stride 1 (contiguous) and above.
STRIDED_VARIANTS = tuple(
    (COALESCING_LAUNCH["block"], COALESCING_LAUNCH["num_warps"], "fp32", contiguous) for contiguous in (True, False)
)


# ---- the rows, by lesson ---------------------------------------------------------------------------------------


def _elementwise(lesson: str, name: str, module: str, kernel: str, block: int = E_BLOCK) -> LessonKernel:
    """The row of an elementwise kernel as its launcher launches it on a GPU: fp32, fp16 and bf16 (``SIXTEEN``),
    one launch of ``block`` elements a program (the launcher's default on a GPU), Triton's default warps and
    stages."""
    return LessonKernel(
        lesson=lesson,
        name=name,
        module=module,
        kernel=kernel,
        dtype="fp32",
        launches=_one(BLOCK=block),
        more_dtypes=SIXTEEN,
    )


def _step_kernels() -> list[LessonKernel]:
    """Lesson 07's build (``bench.lesson07.build_steps``): each step of ``kernels.matmul_steps``."""
    return [
        LessonKernel(
            lesson="07",
            name=f"matmul step: {step}",
            module="matmul_steps",
            kernel="naive_kernel" if step == "no reuse" else "tiled_kernel",
            dtype=matmul_steps.BUILD_DTYPE,
            launches=_step(step),
            dot=step != "no reuse",
        )
        for step in ("no reuse", "tiled", "grouped", "pipelined")
    ]


def _attention_backward_kernels() -> list[LessonKernel]:
    """Lesson 08's production backward (``kernels.flash_attention``): each launch of each dq mode (lesson 08's
    teaching step times all of ``BWD_MODES``; the default, split, is the dK/dV and the dQ launches), both causal
    flags."""
    return [
        LessonKernel(
            lesson="08",
            name=f"attention backward: {_BWD_NAMES[part]}{' causal' if causal else ''}",
            module="flash_attention",
            kernel="flash_attention_bwd_kernel",
            dtype="bf16",
            launches=_flash_bwd(part, causal),
            dot=True,
            pointers=_BWD_POINTERS,
            types=_BWD_TYPES,
            more_dtypes=_ATTENTION_MORE if part in flash_attention.MODE_PARTS["split"] and not causal else (),
        )
        for part in ("dkdv", "dq", "fused", "atomic")
        for causal in (False, True)
    ]


def _teaching_attention_kernels() -> list[LessonKernel]:
    """Lesson 08's teaching kernels (``kernels.flash_teaching``) as ``bench.lesson08.teaching`` launches them:
    bf16 (the plan's dtype where bf16 has no tensor cores), both causal flags."""
    kernels = (
        ("forward", "fwd", "flash_fwd_kernel", ("Q", "K", "V", "O")),
        ("bwd dk, dv", "dkdv", "flash_bwd_dkdv_kernel", ("Q", "K", "V", "DO", "DK", "DV")),
        ("bwd dq", "dq", "flash_bwd_dq_kernel", ("Q", "K", "V", "DO", "DQ")),
    )
    return [
        LessonKernel(
            lesson="08",
            name=f"teaching attention {what}{' causal' if causal else ''}",
            module="flash_teaching",
            kernel=kernel,
            dtype="bf16",
            launches=_teaching(part, causal),
            dot=True,
            pointers=pointers,
            types={"LSE": "*fp32", "DELTA": "*fp32", "scale": "fp32"},
        )
        for what, part, kernel, pointers in kernels
        for causal in (False, True)
    ]


# The exercises' hidden solutions (gpulab/exercises/exNN_solutions.py), as their checkers and races launch them on
# a GPU: BLOCK is the launcher's default (tests/test_compile_coverage.py holds each equal to it).
SOLUTIONS = "gpulab.exercises.ex{}_solutions"
#: The head dimensions the attention exercises launch with: the checkers' (ex08.FLASH_HEAD_DIMS,
#: ex08b.BACKWARD_HEAD_DIMS: every head dimension of the lesson) and the races' (lesson 08's headline d).
EXERCISE_HEAD_DIMS = (16, 32, 64, 128)


def _exercise_attention_kernels() -> list[LessonKernel]:
    """Exercises 08 and 08b's solution kernels: fp16 on a GPU (their checkers and races), 16 x 16 tiles (the
    launchers' defaults), at each of ``EXERCISE_HEAD_DIMS``, both causal flags."""
    kernels = (
        ("08", "08", "flash forward", "flash_forward_kernel", ("Q", "K", "V", "O"), {"L": "i32"}),
        ("08b", "08b", "flash backward dk, dv", "dkdv_kernel", ("Q", "K", "V", "DO", "DK", "DV"), {}),
        ("08b", "08b", "flash backward dq", "dq_kernel", ("Q", "K", "V", "DO", "DQ"), {}),
    )
    return [
        LessonKernel(
            lesson=lesson,
            name=f"ex{ex} {what}{' causal' if causal else ''} (solution)",
            module=SOLUTIONS.format(ex),
            kernel=kernel,
            dtype="fp16",
            launches=_each(*(dict(CAUSAL=causal, D=d, BLOCK_M=16, BLOCK_N=16) for d in EXERCISE_HEAD_DIMS)),
            dot=True,
            pointers=pointers,
            types={"LSE": "*fp32", "DELTA": "*fp32", "scale": "fp32", **extra},
        )
        for lesson, ex, what, kernel, pointers, extra in kernels
        for causal in (False, True)
    ]


# One row a kernel, its arguments by keyword on a few lines: the formatter would give each argument a line.
# fmt: off
LESSON_KERNELS: list[LessonKernel] = [
    # 00: the memory hierarchy measured (bench.lesson00: BLOCK 1024, read_bw.NUM_WARPS)
    LessonKernel(lesson="00", name="staircase read",
                 module="read_bw", kernel="read_sum_kernel", dtype="fp32",
                 launches=_one(read_bw.NUM_WARPS, BLOCK=E_BLOCK, CACHE="")),
    LessonKernel(lesson="00", name="staircase read past the L1 (.cg)",
                 module="read_bw", kernel="read_sum_kernel", dtype="fp32",
                 launches=_one(read_bw.NUM_WARPS, BLOCK=E_BLOCK, CACHE=".cg")),
    LessonKernel(lesson="00", name="persistent copy",
                 module="read_bw", kernel="copy_persistent_kernel", dtype="fp32",
                 launches=_one(read_bw.NUM_WARPS, BLOCK=E_BLOCK)),
    # 00b: the first kernel
    _elementwise("00b", "vector add", "vector_add", "vector_add_kernel"),
    LessonKernel(lesson="00b", name="first kernel: copy (notebook)",
                 module="notebooks/00b_first_kernel.ipynb", kernel="copy_kernel", dtype="fp32",
                 launches=_one(BLOCK=128)),
    LessonKernel(lesson="00b", name="ex00 add (solution)",
                 module=SOLUTIONS.format("00"), kernel="add_kernel", dtype="fp32",
                 launches=_one(BLOCK=128)),
    LessonKernel(lesson="00b", name="ex00 reverse (solution)",
                 module=SOLUTIONS.format("00"), kernel="reverse_kernel", dtype="fp32",
                 launches=_one(BLOCK=128)),
    # 01: roofline
    LessonKernel(lesson="01", name="ex01 scale add (solution)",
                 module=SOLUTIONS.format("01"), kernel="scale_add_kernel", dtype="fp32",
                 launches=_one(BLOCK=128), types={"a": "fp32", "b": "fp32"}),
    # 02: warp divergence
    LessonKernel(lesson="02", name="divergence: one path",
                 module="divergence", kernel="path_kernel", dtype="fp32",
                 launches=_one(K=divergence.K_A, PATH_A=True, BLOCK=E_BLOCK)),
    LessonKernel(lesson="02", name="divergence: the other path",
                 module="divergence", kernel="path_kernel", dtype="fp32",
                 launches=_one(K=divergence.K_B, PATH_A=False, BLOCK=E_BLOCK)),
    LessonKernel(lesson="02", name="divergence: branch by lane",
                 module="divergence", kernel="branch_where_kernel", dtype="fp32",
                 launches=_one(K_A=divergence.K_A, K_B=divergence.K_B, BLOCK=E_BLOCK), types={"take_a_ptr": "*u8"}),
    LessonKernel(lesson="02", name="divergence: branch by block",
                 module="divergence", kernel="branch_uniform_kernel", dtype="fp32",
                 launches=_one(K_A=divergence.K_A, K_B=divergence.K_B, BLOCK=E_BLOCK),
                 types={"block_takes_a_ptr": "*u8"}),
    LessonKernel(lesson="02", name="divergence: loop trips",
                 module="divergence", kernel="loop_cost_kernel", dtype="fp32",
                 launches=_one(BLOCK=E_BLOCK), types={"trips_ptr": "*i32"}),
    LessonKernel(lesson="02", name="ex02 loop grouped (solution)",
                 module=SOLUTIONS.format("02"), kernel="loop_grouped_kernel", dtype="fp32",
                 launches=_one(BLOCK=128), types={"trips_ptr": "*i32", "order_ptr": "*i32"}),
    # 03: precision
    LessonKernel(lesson="03", name="relu fp32",
                 module="relu", kernel="relu_kernel", dtype="fp32",
                 launches=_one(BLOCK=E_BLOCK)),
    LessonKernel(lesson="03", name="relu bf16",
                 module="relu", kernel="relu_kernel", dtype="bf16",
                 launches=_one(BLOCK=E_BLOCK), more_dtypes=("fp16",)),
    LessonKernel(lesson="03", name="matmul precision fp32 (tf32)",
                 module="matmul_precision", kernel="matmul_precision_kernel", dtype="fp32",
                 launches=_precision("tf32", False), dot=True, types={"c_ptr": "*fp32"}),
    LessonKernel(lesson="03", name="matmul precision fp32 (ieee)",
                 module="matmul_precision", kernel="matmul_precision_kernel", dtype="fp32",
                 launches=_precision("ieee", False), dot=True, types={"c_ptr": "*fp32"}),
    LessonKernel(lesson="03", name="matmul precision bf16",
                 module="matmul_precision", kernel="matmul_precision_kernel", dtype="bf16",
                 launches=_precision("tf32", False), dot=True, types={"c_ptr": "*fp32"}, more_dtypes=("fp16",)),
    LessonKernel(lesson="03", name="matmul precision fp16, fp16 sums",
                 module="matmul_precision", kernel="matmul_precision_kernel", dtype="fp16",
                 launches=_precision("tf32", True), dot=True, types={"c_ptr": "*fp32"}),
    # the native bf16 dot that decides the interpreter's workaround (bf16_dot_is_exact): bf16 on every GPU
    LessonKernel(lesson="03", name="bf16 dot probe",
                 module="matmul_precision", kernel="_dot_probe_kernel", dtype="bf16",
                 launches=_one(N=16), types={"c_ptr": "*fp32"}),
    LessonKernel(lesson="03", name="matmul fp8 e4m3 (pointer)",
                 module="matmul", kernel="matmul_kernel", dtype="fp8",
                 launches=_matmul("pointer"), dot=True, types={"c_ptr": "*fp16"}),
    LessonKernel(lesson="03", name="ex03 relu cast (solution)",
                 module=SOLUTIONS.format("03"), kernel="relu_cast_kernel", dtype="fp32",
                 launches=_one(BLOCK=128), more_dtypes=SIXTEEN),
    LessonKernel(lesson="03", name="ex03 relu cast from fp32 (solution)",
                 module=SOLUTIONS.format("03"), kernel="relu_cast_kernel", dtype="fp16",
                 launches=_one(BLOCK=128), types={"x_ptr": "*fp32"}, more_dtypes=("bf16",)),
    LessonKernel(lesson="03", name="ex03 quantize fp8 (solution)",
                 module=SOLUTIONS.format("03"), kernel="quantize_fp8_kernel", dtype="fp8",
                 launches=_one(GROUP=32, ROWS=16), types={"x_ptr": "*fp32", "scale_ptr": "*fp32"}),
    # 04: fusion
    _elementwise("04", "sin (unfused)", "sincos", "sin_kernel"),
    _elementwise("04", "cos (unfused)", "sincos", "cos_kernel"),
    _elementwise("04", "square (unfused)", "sincos", "square_kernel"),
    _elementwise("04", "add (unfused)", "sincos", "add_kernel"),
    LessonKernel(lesson="04", name="sin^2+cos^2 fused",
                 module="sincos", kernel="sincos_kernel", dtype="fp32",
                 launches=_configs(sincos, "AUTOTUNE_CONFIGS", FAST=False, REPEAT=1, SHARED=False),
                 more_dtypes=SIXTEEN),
    LessonKernel(lesson="04", name="sin^2+cos^2 fused, one range reduction",
                 module="sincos", kernel="sincos_kernel", dtype="fp32",
                 launches=_configs(sincos, "AUTOTUNE_CONFIGS", FAST=False, REPEAT=1, SHARED=True)),
    LessonKernel(lesson="04", name="sin^2+cos^2 fused, fast math",
                 module="sincos", kernel="sincos_kernel", dtype="fp32",
                 launches=_configs(sincos, "AUTOTUNE_CONFIGS", FAST=True, REPEAT=1, SHARED=False)),
    LessonKernel(lesson="04", name="sin and cos apart, one range reduction",
                 module="sincos", kernel="sin_cos_parts_kernel", dtype="fp32",
                 launches=_one(BLOCK=E_BLOCK, SHARED=True)),
    LessonKernel(lesson="04", name="sin and cos apart",
                 module="sincos", kernel="sin_cos_parts_kernel", dtype="fp32",
                 launches=_one(BLOCK=E_BLOCK, SHARED=False)),
    LessonKernel(lesson="04", name="ex04 sin^2+cos^2 fused (solution)",
                 module=SOLUTIONS.format("04"), kernel="sincos_fused_kernel", dtype="fp32",
                 launches=_one(BLOCK=128), more_dtypes=SIXTEEN),
    LessonKernel(lesson="04", name="ex04 gated residual (solution)",
                 module=SOLUTIONS.format("04"), kernel="gated_residual_kernel", dtype="fp32",
                 launches=_one(BLOCK=256), more_dtypes=("bf16",)),
    # 05: recomputation
    LessonKernel(lesson="05", name="three sigmoids forward",
                 module="sigmoid3", kernel="sigmoid3_kernel", dtype="fp32",
                 launches=_sigmoid3(), more_dtypes=(*SIXTEEN, "fp64")),
    LessonKernel(lesson="05", name="three sigmoids backward",
                 module="sigmoid3", kernel="sigmoid3_backward_kernel", dtype="fp32",
                 launches=_sigmoid3(DY_SCALAR=False), more_dtypes=(*SIXTEEN, "fp64")),
    LessonKernel(lesson="05", name="three sigmoids backward, dy broadcast",
                 module="sigmoid3", kernel="sigmoid3_backward_kernel", dtype="fp32",
                 launches=_sigmoid3(DY_SCALAR=True), more_dtypes=(*SIXTEEN, "fp64")),
    # the teaching pair: bench.lesson05.teaching times it, exercise 05's solution shows it
    LessonKernel(lesson="05", name="three sigmoids forward, teaching",
                 module="sigmoid3_teaching", kernel="sigmoid3_fwd_kernel", dtype="fp32",
                 launches=_one(BLOCK=sigmoid3_teaching.BLOCK)),
    LessonKernel(lesson="05", name="three sigmoids backward, teaching",
                 module="sigmoid3_teaching", kernel="sigmoid3_bwd_kernel", dtype="fp32",
                 launches=_one(BLOCK=sigmoid3_teaching.BLOCK)),
    # 06: coalescing
    LessonKernel(lesson="06", name="strided copy",
                 module="strided", kernel="strided_copy_kernel", dtype="fp32",
                 launches=_configs(strided, "AUTOTUNE_CONFIGS", CONTIGUOUS=False), more_dtypes=SIXTEEN),
    LessonKernel(lesson="06", name="strided copy, stride 1",
                 module="strided", kernel="strided_copy_kernel", dtype="fp32",
                 launches=_configs(strided, "AUTOTUNE_CONFIGS", CONTIGUOUS=True), more_dtypes=SIXTEEN),
    _elementwise("06", "copy by rows", "strided", "copy_by_rows_kernel", strided.MATRIX_BLOCK),
    _elementwise("06", "copy by columns", "strided", "copy_by_columns_kernel", strided.MATRIX_BLOCK),
    _elementwise("06", "transpose naive", "transpose", "transpose_naive_kernel", transpose.NAIVE_BLOCK),
    LessonKernel(lesson="06", name="transpose tiled",
                 module="transpose", kernel="transpose_tiled_kernel", dtype="fp32",
                 launches=_and(_configs(transpose, "AUTOTUNE_CONFIGS"), Launch({"BLOCK_M": 16, "BLOCK_N": 64})),
                 more_dtypes=SIXTEEN),  # notebook 06 checks a 16 x 64 tile beside the tuned ones
    LessonKernel(lesson="06", name="ex06 strided copy (solution)",
                 module=SOLUTIONS.format("06"), kernel="strided_copy_kernel", dtype="fp32",
                 launches=_one(BLOCK=128)),
    LessonKernel(lesson="06", name="ex06 transpose (solution)",
                 module=SOLUTIONS.format("06"), kernel="transpose_kernel", dtype="fp32",
                 launches=_one(BLOCK=32), more_dtypes=SIXTEEN),
    # 07: tiling
    # the build's first step in fp32: bench.lesson07.noreuse and the tiling counter case
    LessonKernel(lesson="07", name="matmul no reuse, fp32",
                 module="matmul_steps", kernel="naive_kernel", dtype="fp32",
                 launches=_step("no reuse")),
    LessonKernel(lesson="07", name="matmul fp32 (pointer)",
                 module="matmul", kernel="matmul_kernel", dtype="fp32",
                 launches=_matmul("pointer"), dot=True),
    LessonKernel(lesson="07", name="matmul bf16 (pointer)",
                 module="matmul", kernel="matmul_kernel", dtype="bf16",
                 launches=_matmul("pointer"), dot=True),
    LessonKernel(lesson="07", name="matmul bf16 (TMA)",
                 module="matmul", kernel="matmul_tma_kernel", dtype="bf16",
                 launches=_matmul("tma"), dot=True, needs="tma", instead="matmul bf16 (pointer)",
                 types={"a_desc": "desc<BLOCK_M,BLOCK_K>", "b_desc": "desc<BLOCK_K,BLOCK_N>", "c_ptr": "*dtype"}),
    *_step_kernels(),
    LessonKernel(lesson="07", name="pad rows",
                 module="pad", kernel="pad_rows_kernel", dtype="fp16",
                 launches=_one(BLOCK_R=8, BLOCK_C=256), pointers=("src0", "dst0", "src1", "dst1")),
    LessonKernel(lesson="07", name="ex07 tiled matmul (solution)",
                 module=SOLUTIONS.format("07"), kernel="tiled_matmul_kernel", dtype="fp16",
                 launches=_one(BLOCK_M=32, BLOCK_N=32, BLOCK_K=32), dot=True),
    # 07b: waves
    LessonKernel(lesson="07b", name="ex07b persistent matmul (solution)",
                 module=SOLUTIONS.format("07b"), kernel="persistent_matmul_kernel", dtype="fp16",
                 launches=_one(BLOCK_M=32, BLOCK_N=32, BLOCK_K=32), dot=True),
    # 08: FlashAttention
    LessonKernel(lesson="08", name="attention forward (pointer)",
                 module="flash_attention", kernel="flash_attention_fwd_kernel", dtype="bf16",
                 launches=_flash_fwd(False, False), dot=True, pointers=_QKVO, types=_FWD_TYPES,
                 more_dtypes=_ATTENTION_MORE),
    LessonKernel(lesson="08", name="attention forward causal (pointer)",
                 module="flash_attention", kernel="flash_attention_fwd_kernel", dtype="bf16",
                 launches=_flash_fwd(True, False), dot=True, pointers=_QKVO, types=_FWD_TYPES),
    LessonKernel(lesson="08", name="attention forward (TMA)",
                 module="flash_attention", kernel="flash_attention_fwd_kernel", dtype="bf16",
                 launches=_flash_fwd(False, True), dot=True, needs="tma", instead="attention forward (pointer)",
                 pointers=_QKVO, types=_FWD_TMA_TYPES, more_dtypes=_ATTENTION_MORE),
    LessonKernel(lesson="08", name="attention forward causal (TMA)",
                 module="flash_attention", kernel="flash_attention_fwd_kernel", dtype="bf16",
                 launches=_flash_fwd(True, True), dot=True, needs="tma", instead="attention forward causal (pointer)",
                 pointers=_QKVO, types=_FWD_TMA_TYPES),
    LessonKernel(lesson="08", name="attention backward: delta",
                 module="flash_attention", kernel="flash_attention_bwd_preprocess_kernel", dtype="bf16",
                 launches=_each(*(dict(HEAD_DIM=d, BLOCK=64) for d in sorted(HEAD_DIMS))),
                 pointers=("O", "DO"), types={"DELTA": "*fp32"}, more_dtypes=_ATTENTION_MORE),
    *_attention_backward_kernels(),
    *_teaching_attention_kernels(),
    *_exercise_attention_kernels(),
    # 09: the builder test
    # bench.lesson09.bias_gelu_times and the race time it, exercise 09's solution shows it
    LessonKernel(lesson="09", name="bias + GELU fused",
                 module="bias_gelu", kernel="bias_gelu_kernel", dtype="fp32",
                 launches=_one(BLOCK=bias_gelu.BLOCK)),
]
# fmt: on


def names() -> list[str]:
    """The names of ``LESSON_KERNELS``, in table order."""
    return [k.name for k in LESSON_KERNELS]
