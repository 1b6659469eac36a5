"""The kernels ``python -m gpulab.targets`` compiles: one ``LessonKernel`` row per kernel as a lesson launches it
(``LESSON_KERNELS``), each with the configurations the plan of a GPU gives it. ``gpulab.targets`` compiles them.

A row names the lesson, the kernel (``module``: a file of ``gpulab/kernels``, ``kernel``: its ``@triton.jit``
function), the element type the lesson wants, and ``launches(plan, dtype)``: the candidate configurations, first
the one taken without autotuning. The lesson settings (lesson 07's build dtype, lesson 08's head dimensions) are
read from the lessons' suites, their one home.

This module imports the kernel modules and the suites: only the parent process of ``python -m gpulab.targets``
imports it, never a compile worker (which must import the kernels after clearing ``TRITON_INTERPRET``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from . import dtypes
from .bench.lesson07 import BUILD_DTYPE
from .bench.lesson08 import HEAD_DIMS, TEACHING_SETTINGS
from .counter_cases import COALESCING_LAUNCH
from .kernels import flash_attention, flash_teaching, matmul, matmul_precision, matmul_steps, sincos, strided, transpose

#: The head dimension of the production attention rows: the smaller of lesson 08's headline head dimensions.
HEAD_DIM = min(HEAD_DIMS)
#: The head dimension of lesson 08's teaching-against-production step (one, for every length it runs).
(TEACHING_HEAD_DIM,) = {d for d, _ in TEACHING_SETTINGS}
E_BLOCK = 1024  # elementwise kernels' BLOCK on a GPU


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
    of ``gpulab/kernels``) and ``kernel`` (its ``@triton.jit`` function), ``dtype`` (the element type wanted).
    ``dot``: the kernel multiplies on tensor cores (so ``plan.dtype`` may replace bf16 or fp8 by fp16);
    ``needs``: a ``plan.FEATURES`` key the path needs, ``instead`` the row taken without it; ``pointers``:
    arguments that are pointers of ``dtype`` beside those named ``*_ptr``; ``types``: argument -> Triton type
    where that rule (pointers of ``dtype``, other arguments i32) does not hold ("*fp32", "fp32", "none" for an
    argument passed as None, "desc<R,C>" for a TMA descriptor of (R, C) tiles named by constexprs or ints,
    "*dtype" for a pointer of the row's dtype); ``launches(plan, dtype)``: the candidate configurations, first
    the one taken without autotuning."""

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


# ---- launches: the configurations each kernel gets on a GPU's plan ----------------------------------------------


def _one(**constexprs):
    """One launch with these constexprs and Triton's default warps and stages."""
    return lambda p, dtype: [Launch({**constexprs})]


def _configs(module, attr: str, **extra):
    """Launches from a list of ``triton.Config`` in a kernel module (its autotuning candidates), with the
    constexprs ``extra`` added."""

    def launches(p, dtype):
        return [Launch({**c.kwargs, **extra}, c.num_warps, c.num_stages) for c in getattr(module, attr)]

    return launches


def _matmul(path: str):
    """Launches of ``matmul``'s ``path`` as the plan tunes it (``kernels.matmul.candidates``)."""

    def launches(p, dtype):
        out = []
        for c in matmul.candidates(path, dtypes.torch_dtype(dtype), p):
            ce = {"BLOCK_M": c.BLOCK_M, "BLOCK_N": c.BLOCK_N, "BLOCK_K": c.BLOCK_K, "GROUP_M": c.GROUP_M}
            if path == "tma":
                ce.update(FLATTEN=c.flatten, WARP_SPECIALIZE=c.warp_specialize)
            else:
                ce["INPUT_PRECISION"] = p.input_precision("tf32") if dtype == "fp32" else "tf32"
            out.append(Launch(ce, c.num_warps, c.num_stages))
        return out

    return launches


def _flash_fwd(causal: bool, tma: bool):
    """Launches of the attention forward as the plan tunes it (``kernels.flash_attention.fwd_candidates``)."""

    def launches(p, dtype):
        flags = dict(HEAD_DIM=HEAD_DIM, CAUSAL=causal, USE_TMA=tma, UPCAST=False)
        flags["DOT_PREC"] = "ieee" if dtype == "fp32" else "tf32"
        return [
            Launch(dict(c.kwargs, **flags), c.num_warps, c.num_stages)
            for c in flash_attention.fwd_candidates(dtypes.torch_dtype(dtype), causal, HEAD_DIM, p)
        ]

    return launches


def _flash_bwd(part: str):
    """Launches of one part of the attention backward as the plan tunes it (``bwd_candidates``)."""

    def launches(p, dtype):
        flags = dict(HEAD_DIM=HEAD_DIM, CAUSAL=False, USE_TMA=False, UPCAST=False, DOT_PREC="tf32")
        return [
            Launch(dict(c.kwargs, **flags, **flash_attention.BWD_PARTS[part]), c.num_warps, c.num_stages)
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


#: (BLOCK, num_warps, dtype, CONTIGUOUS) of the strided copy whose layout ``gpulab.targets.strided_layouts``
#: compiles: lesson 06's coalescing counter case's launch (``counter_cases.COALESCING_LAUNCH``, its one home), in
#: fp32, at stride 1 (contiguous) and above.
STRIDED_VARIANTS = tuple(
    (COALESCING_LAUNCH["block"], COALESCING_LAUNCH["num_warps"], "fp32", contiguous) for contiguous in (True, False)
)


# ---- the rows, by lesson ---------------------------------------------------------------------------------------


def _step_kernels() -> list[LessonKernel]:
    """Lesson 07's build (``bench.lesson07.build_steps``): each step of ``kernels.matmul_steps``."""
    return [
        LessonKernel(
            lesson="07",
            name=f"matmul step: {step}",
            module="matmul_steps",
            kernel="naive_kernel" if step == "no reuse" else "tiled_kernel",
            dtype=BUILD_DTYPE,
            launches=_step(step),
            dot=step != "no reuse",
        )
        for step in ("no reuse", "tiled", "grouped", "pipelined")
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


# One row a kernel, its arguments by keyword on a few lines: the formatter would give each argument a line.
# fmt: off
LESSON_KERNELS: list[LessonKernel] = [
    # 00b: the first kernel
    LessonKernel(lesson="00b", name="vector add",
                 module="vector_add", kernel="vector_add_kernel", dtype="fp32",
                 launches=_one(BLOCK=E_BLOCK)),
    # 02: warp divergence
    LessonKernel(lesson="02", name="divergence: one path",
                 module="divergence", kernel="path_kernel", dtype="fp32",
                 launches=_one(K=32, PATH_A=True, BLOCK=E_BLOCK)),
    LessonKernel(lesson="02", name="divergence: branch by lane",
                 module="divergence", kernel="branch_where_kernel", dtype="fp32",
                 launches=_one(K_A=32, K_B=16, BLOCK=E_BLOCK), types={"take_a_ptr": "*i1"}),
    LessonKernel(lesson="02", name="divergence: branch by block",
                 module="divergence", kernel="branch_uniform_kernel", dtype="fp32",
                 launches=_one(K_A=32, K_B=16, BLOCK=E_BLOCK), types={"block_takes_a_ptr": "*i1"}),
    LessonKernel(lesson="02", name="divergence: loop trips",
                 module="divergence", kernel="loop_cost_kernel", dtype="fp32",
                 launches=_one(BLOCK=E_BLOCK), types={"trips_ptr": "*i32"}),
    # 03: precision
    LessonKernel(lesson="03", name="relu fp32",
                 module="relu", kernel="relu_kernel", dtype="fp32",
                 launches=_one(BLOCK=E_BLOCK)),
    LessonKernel(lesson="03", name="relu bf16",
                 module="relu", kernel="relu_kernel", dtype="bf16",
                 launches=_one(BLOCK=E_BLOCK)),
    LessonKernel(lesson="03", name="matmul precision fp32 (tf32)",
                 module="matmul_precision", kernel="matmul_precision_kernel", dtype="fp32",
                 launches=_precision("tf32", False), dot=True, types={"c_ptr": "*fp32"}),
    LessonKernel(lesson="03", name="matmul precision bf16",
                 module="matmul_precision", kernel="matmul_precision_kernel", dtype="bf16",
                 launches=_precision("tf32", False), dot=True, types={"c_ptr": "*fp32"}),
    LessonKernel(lesson="03", name="matmul precision fp16, fp16 sums",
                 module="matmul_precision", kernel="matmul_precision_kernel", dtype="fp16",
                 launches=_precision("tf32", True), dot=True, types={"c_ptr": "*fp32"}),
    LessonKernel(lesson="03", name="matmul fp8 e4m3 (pointer)",
                 module="matmul", kernel="matmul_kernel", dtype="fp8",
                 launches=_matmul("pointer"), dot=True, types={"c_ptr": "*fp16"}),
    # 04: fusion
    LessonKernel(lesson="04", name="sin (unfused)",
                 module="sincos", kernel="sin_kernel", dtype="fp32",
                 launches=_one(BLOCK=E_BLOCK)),
    LessonKernel(lesson="04", name="add (unfused)",
                 module="sincos", kernel="add_kernel", dtype="fp32",
                 launches=_one(BLOCK=E_BLOCK)),
    LessonKernel(lesson="04", name="sin^2+cos^2 fused",
                 module="sincos", kernel="sincos_kernel", dtype="fp32",
                 launches=_configs(sincos, "AUTOTUNE_CONFIGS", FAST=False, REPEAT=1, SHARED=False)),
    # 05: recomputation
    LessonKernel(lesson="05", name="three sigmoids forward",
                 module="sigmoid3", kernel="sigmoid3_kernel", dtype="fp32",
                 launches=_one(BLOCK=E_BLOCK, F64=False)),
    LessonKernel(lesson="05", name="three sigmoids backward",
                 module="sigmoid3", kernel="sigmoid3_backward_kernel", dtype="fp32",
                 launches=_one(BLOCK=E_BLOCK, F64=False, DY_SCALAR=False)),
    # 06: coalescing
    LessonKernel(lesson="06", name="strided copy",
                 module="strided", kernel="strided_copy_kernel", dtype="fp32",
                 launches=_configs(strided, "AUTOTUNE_CONFIGS", CONTIGUOUS=False)),
    LessonKernel(lesson="06", name="copy by rows",
                 module="strided", kernel="copy_by_rows_kernel", dtype="fp32",
                 launches=_one(BLOCK=E_BLOCK)),
    LessonKernel(lesson="06", name="copy by columns",
                 module="strided", kernel="copy_by_columns_kernel", dtype="fp32",
                 launches=_one(BLOCK=E_BLOCK)),
    LessonKernel(lesson="06", name="transpose naive",
                 module="transpose", kernel="transpose_naive_kernel", dtype="fp32",
                 launches=_one(BLOCK=E_BLOCK)),
    LessonKernel(lesson="06", name="transpose tiled",
                 module="transpose", kernel="transpose_tiled_kernel", dtype="fp32",
                 launches=_configs(transpose, "AUTOTUNE_CONFIGS")),
    # 07: tiling
    LessonKernel(lesson="07", name="matmul no reuse",
                 module="matmul", kernel="matmul_noreuse_kernel", dtype="bf16",
                 launches=_one(BLOCK=128, BLOCK_K=32)),
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
    # 08: FlashAttention
    LessonKernel(lesson="08", name="attention forward (pointer)",
                 module="flash_attention", kernel="flash_attention_fwd_kernel", dtype="bf16",
                 launches=_flash_fwd(False, False), dot=True, pointers=_QKVO, types=_FWD_TYPES),
    LessonKernel(lesson="08", name="attention forward causal (pointer)",
                 module="flash_attention", kernel="flash_attention_fwd_kernel", dtype="bf16",
                 launches=_flash_fwd(True, False), dot=True, pointers=_QKVO, types=_FWD_TYPES),
    LessonKernel(lesson="08", name="attention forward (TMA)",
                 module="flash_attention", kernel="flash_attention_fwd_kernel", dtype="bf16",
                 launches=_flash_fwd(False, True), dot=True, needs="tma", instead="attention forward (pointer)",
                 pointers=_QKVO, types=_FWD_TMA_TYPES),
    LessonKernel(lesson="08", name="attention backward: delta",
                 module="flash_attention", kernel="flash_attention_bwd_preprocess_kernel", dtype="bf16",
                 launches=_one(HEAD_DIM=HEAD_DIM, BLOCK=64), pointers=("O", "DO"), types={"DELTA": "*fp32"}),
    LessonKernel(lesson="08", name="attention backward: dk, dv",
                 module="flash_attention", kernel="flash_attention_bwd_kernel", dtype="bf16",
                 launches=_flash_bwd("dkdv"), dot=True, pointers=_BWD_POINTERS, types=_BWD_TYPES),
    LessonKernel(lesson="08", name="attention backward: dq",
                 module="flash_attention", kernel="flash_attention_bwd_kernel", dtype="bf16",
                 launches=_flash_bwd("dq"), dot=True, pointers=_BWD_POINTERS, types=_BWD_TYPES),
    *_teaching_attention_kernels(),
]
# fmt: on


def names() -> list[str]:
    """The names of ``LESSON_KERNELS``, in table order."""
    return [k.name for k in LESSON_KERNELS]
