"""Every kernel of the collection compiled ahead of time for every GPU generation, on any machine.

``python -m gpulab.targets`` compiles each kernel a lesson launches, with the dtype, path and configuration
``gpulab.plan`` chooses on each GPU of ``gpulab.hardware``, for compute capabilities 7.5 (T4), 8.0 (A100),
8.6 (A10), 8.9 (L4, RTX 4090) and 9.0 (H100, H200), and prints one row per kernel and target: ``ok``, or
the reason a path is not taken there (TMA only from 9.0, fp8 from 8.9, bf16 and tf32 tensor cores from 8.0)
with what is taken instead; tensor-core instructions in the PTX (``mma``: mma.sync and wgmma counted, 0 where a
tl.dot runs on FMA), registers per thread, spill bytes (stores + loads) and shared memory per block.

How, without a GPU: ``triton.compile(ASTSource(kernel, signature, constexprs), target=GPUTarget("cuda", cc,
32))`` runs Triton's whole pipeline down to a cubin with the ``ptxas`` Triton ships. The compiled kernel's
``n_regs`` and ``n_spills`` are only filled in when it is loaded onto a GPU, so registers and spills come
from ptxas's own report (Triton passes ``-v`` and prints the log under ``TRITON_DUMP_PTXAS_LOG=1``);
shared memory from the compiled metadata.

Compiling needs real ``@triton.jit`` functions, but ``import gpulab`` sets ``TRITON_INTERPRET=1`` on a machine
without a GPU, and then kernels are defined for the interpreter. So the compiles run in worker processes
(``--worker``) that clear ``TRITON_INTERPRET`` after importing gpulab and before importing any kernel module;
this module imports no kernel module at its top. Results are cached per kernel, target and configuration
(keyed by the kernel file's text and Triton's version) under ``gpulab.device.cache_dir()/targets``.

Flags: ``--cc 75,90`` (targets), ``--only matmul,vector add`` (rows whose name contains one of these),
``--all-configs`` (every autotuning candidate, not only the first), ``--jobs N`` (worker processes),
``--no-cache``; ``--strided-layout --cc 90``: the strided copy's blocked layout (``sizePerThread``) and PTX
global loads and stores as the coalescing counters launch it (lesson 06), instead of the table.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from . import dtypes, hardware, plan

CCS = (75, 80, 86, 89, 90)
# The GPU whose plan each target compiles for: the one the lessons name (all GPUs of one compute capability
# share the compiler's target; their shared memory per block is the same).
PLANNED = {75: "T4", 80: "A100 40GB SXM", 86: "A10", 89: "L4", 90: "H200"}
TRITON_TYPES = {
    "fp32": "fp32",
    "fp16": "fp16",
    "bf16": "bf16",
    "fp8": "fp8e4nv",
    "i32": "i32",
    "i1": "i1",
    "fp64": "fp64",
}
HEAD_DIM = 64  # lesson 08's head dimension


def gpus_of(cc: int) -> list[str]:
    """Names of the table's GPUs with compute capability ``cc`` (75 -> ["T4"])."""
    return [n for n, s in hardware.GPUS.items() if s.compute_capability and s.compute_capability == divmod(cc, 10)]


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
class Case:
    """One kernel as a lesson launches it. ``dtype``: the element type wanted; ``dot``: the kernel multiplies on
    tensor cores (so ``plan.dtype`` may replace bf16 or fp8 by fp16); ``needs``: a ``plan.FEATURES`` key the path
    needs, ``instead`` the case taken without it; ``types``: argument -> Triton type where the rule (``*_ptr``
    and ``pointers`` are pointers of ``dtype``, other arguments i32) does not hold ("*fp32", "fp32", "none" for
    an argument passed as None, "desc<R,C>" for a TMA descriptor of (R, C) tiles named by constexprs or ints);
    ``launches(plan, dtype)``: the candidate configurations, first the one taken without autotuning."""

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
    constexprs: dict = field(default_factory=dict)


def _kernel_module(name: str):
    import importlib

    return importlib.import_module(f"gpulab.kernels.{name}")


def _one(constexprs, warps=4, stages=3):
    return lambda p, dtype: [Launch({**constexprs}, warps, stages)]


def _triton_configs(module: str, attr: str):
    """Launches from a list of ``triton.Config`` in a kernel module (its autotuning candidates)."""

    def launches(p, dtype):
        return [Launch(dict(c.kwargs), c.num_warps, c.num_stages) for c in getattr(_kernel_module(module), attr)]

    return launches


def _matmul(path: str):
    """Launches of ``matmul``'s ``path`` as the plan tunes it (``kernels.matmul.candidates``)."""

    def launches(p, dtype):
        m = _kernel_module("matmul")
        out = []
        for c in m.candidates(path, dtypes.torch_dtype(dtype), p):
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
        fa = _kernel_module("flash_attention")
        return [
            Launch(
                dict(
                    c.kwargs,
                    HEAD_DIM=HEAD_DIM,
                    CAUSAL=causal,
                    USE_TMA=tma,
                    UPCAST=False,
                    DOT_PREC="ieee" if dtype == "fp32" else "tf32",
                ),
                c.num_warps,
                c.num_stages,
            )
            for c in fa.fwd_candidates(dtypes.torch_dtype(dtype), causal, HEAD_DIM, p)
        ]

    return launches


def _flash_bwd(part: str):
    def launches(p, dtype):
        fa = _kernel_module("flash_attention")
        return [
            Launch(
                dict(
                    c.kwargs,
                    HEAD_DIM=HEAD_DIM,
                    CAUSAL=False,
                    USE_TMA=False,
                    UPCAST=False,
                    DOT_PREC="tf32",
                    **fa.BWD_PARTS[part],
                ),
                c.num_warps,
                c.num_stages,
            )
            for c in fa.bwd_candidates(part, dtypes.torch_dtype(dtype), p)
        ]

    return launches


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
_E = 1024  # elementwise kernels' BLOCK on a GPU


def _precision(input_precision: str, acc_fp16: bool):
    """The launch of ``matmul_precision`` on a GPU: the plan's blocks (``planned_blocks``), its warps."""

    def launches(p, dtype):
        mp = _kernel_module("matmul_precision")
        bm, bn, bk = mp.planned_blocks(p)
        prec = p.input_precision(input_precision) if dtype == "fp32" else input_precision
        ce = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "UPCAST": False, "INPUT_PRECISION": prec}
        return [Launch({**ce, "ACC_FP16": acc_fp16}, mp.num_warps_for(bm, bn), 3)]

    return launches


STEP_DTYPE = "fp16"  # lesson 07's build (bench.lesson07.BUILD_DTYPE)
TEACHING_HEAD_DIM = 128  # lesson 08's teaching-against-production step (d of bench.lesson08.TEACHING_SETTINGS)


def _step(step: str):
    """The launch of one step of ``kernels.matmul_steps`` on a GPU: ``StepConfig()``, ``STEP_LAUNCH[step]``."""

    def launches(p, dtype):
        ms = _kernel_module("matmul_steps")
        c = ms.StepConfig()
        if ms.STEP_LAUNCH[step] is None:
            return [Launch({"BLOCK": c.BLOCK, "BLOCK_K": c.BLOCK_K})]  # Triton's default warps and stages
        group_m, stages = ms.STEP_LAUNCH[step]
        ce = {"BLOCK_M": c.BLOCK_M, "BLOCK_N": c.BLOCK_N, "BLOCK_K": c.BLOCK_K, "GROUP_M": group_m}
        return [Launch(ce, c.num_warps, stages)]

    return launches


def _step_cases() -> list[Case]:
    """Lesson 07's build (``bench.lesson07.build_steps``): each step of ``kernels.matmul_steps``."""
    return [
        Case(
            "07",
            f"matmul step: {step}",
            "matmul_steps",
            "naive_kernel" if step == "no reuse" else "tiled_kernel",
            STEP_DTYPE,
            _step(step),
            dot=step != "no reuse",
        )
        for step in ("no reuse", "tiled", "grouped", "pipelined")
    ]


def _teaching(part: str, causal: bool):
    """The launch of the ``kernels.flash_teaching`` kernel ``part`` on a GPU: the plan's tiles
    (``planned_blocks``), Triton's default warps and stages."""

    def launches(p, dtype):
        ft = _kernel_module("flash_teaching")
        bm, bn = ft.planned_blocks(TEACHING_HEAD_DIM, dtypes.itemsize(dtype), part, p)
        prec = ft.dot_precision(dtypes.torch_dtype(dtype))
        return [Launch({"BLOCK_M": bm, "BLOCK_N": bn, "D": TEACHING_HEAD_DIM, "CAUSAL": causal, "DOT_PREC": prec})]

    return launches


def _teaching_attention_cases() -> list[Case]:
    """Lesson 08's teaching kernels (``kernels.flash_teaching``) as ``bench.lesson08.teaching`` launches them:
    bf16 (the plan's dtype where bf16 has no tensor cores), both causal flags."""
    kernels = (
        ("forward", "fwd", "flash_fwd_kernel", ("Q", "K", "V", "O")),
        ("bwd dk, dv", "dkdv", "flash_bwd_dkdv_kernel", ("Q", "K", "V", "DO", "DK", "DV")),
        ("bwd dq", "dq", "flash_bwd_dq_kernel", ("Q", "K", "V", "DO", "DQ")),
    )
    return [
        Case(
            "08",
            f"teaching attention {what}{' causal' if causal else ''}",
            "flash_teaching",
            kernel,
            "bf16",
            _teaching(part, causal),
            dot=True,
            pointers=pointers,
            types={"LSE": "*fp32", "DELTA": "*fp32", "scale": "fp32"},
        )
        for what, part, kernel, pointers in kernels
        for causal in (False, True)
    ]


CASES = [
    Case("00", "vector add", "vector_add", "vector_add_kernel", "fp32", _one({"BLOCK": _E})),
    Case(
        "02", "divergence: one path", "divergence", "path_kernel", "fp32", _one({"K": 32, "PATH_A": True, "BLOCK": _E})
    ),
    Case(
        "02",
        "divergence: branch by lane",
        "divergence",
        "branch_where_kernel",
        "fp32",
        _one({"K_A": 32, "K_B": 16, "BLOCK": _E}),
        types={"take_a_ptr": "*i1"},
    ),
    Case(
        "02",
        "divergence: branch by block",
        "divergence",
        "branch_uniform_kernel",
        "fp32",
        _one({"K_A": 32, "K_B": 16, "BLOCK": _E}),
        types={"block_takes_a_ptr": "*i1"},
    ),
    Case(
        "02",
        "divergence: loop trips",
        "divergence",
        "loop_cost_kernel",
        "fp32",
        _one({"BLOCK": _E}),
        types={"trips_ptr": "*i32"},
    ),
    Case("03", "relu fp32", "relu", "relu_kernel", "fp32", _one({"BLOCK": _E})),
    Case("03", "relu bf16", "relu", "relu_kernel", "bf16", _one({"BLOCK": _E})),
    Case(
        "03",
        "matmul precision fp32 (tf32)",
        "matmul_precision",
        "matmul_precision_kernel",
        "fp32",
        _precision("tf32", False),
        dot=True,
        types={"c_ptr": "*fp32"},
    ),
    Case(
        "03",
        "matmul precision bf16",
        "matmul_precision",
        "matmul_precision_kernel",
        "bf16",
        _precision("tf32", False),
        dot=True,
        types={"c_ptr": "*fp32"},
    ),
    Case(
        "03",
        "matmul precision fp16, fp16 sums",
        "matmul_precision",
        "matmul_precision_kernel",
        "fp16",
        _precision("tf32", True),
        dot=True,
        types={"c_ptr": "*fp32"},
    ),
    Case(
        "03",
        "matmul fp8 e4m3 (pointer)",
        "matmul",
        "matmul_kernel",
        "fp8",
        _matmul("pointer"),
        dot=True,
        types={"c_ptr": "*fp16"},
    ),
    Case("04", "sin (unfused)", "sincos", "sin_kernel", "fp32", _one({"BLOCK": _E})),
    Case("04", "add (unfused)", "sincos", "add_kernel", "fp32", _one({"BLOCK": _E})),
    Case(
        "04",
        "sin^2+cos^2 fused",
        "sincos",
        "sincos_kernel",
        "fp32",
        lambda p, d: [
            Launch(dict(L.constexprs, FAST=False, REPEAT=1, SHARED=False), L.num_warps, L.num_stages)
            for L in _triton_configs("sincos", "AUTOTUNE_CONFIGS")(p, d)
        ],
    ),
    Case("05", "three sigmoids forward", "sigmoid3", "sigmoid3_kernel", "fp32", _one({"BLOCK": _E, "F64": False})),
    Case(
        "05",
        "three sigmoids backward",
        "sigmoid3",
        "sigmoid3_backward_kernel",
        "fp32",
        _one({"BLOCK": _E, "F64": False, "DY_SCALAR": False}),
    ),
    Case(
        "06",
        "strided copy",
        "strided",
        "strided_copy_kernel",
        "fp32",
        lambda p, d: [
            Launch(dict(L.constexprs, CONTIGUOUS=False), L.num_warps, L.num_stages)
            for L in _triton_configs("strided", "AUTOTUNE_CONFIGS")(p, d)
        ],
    ),
    Case("06", "copy by rows", "strided", "copy_by_rows_kernel", "fp32", _one({"BLOCK": _E})),
    Case("06", "copy by columns", "strided", "copy_by_columns_kernel", "fp32", _one({"BLOCK": _E})),
    Case("06", "transpose naive", "transpose", "transpose_naive_kernel", "fp32", _one({"BLOCK": _E})),
    Case(
        "06",
        "transpose tiled",
        "transpose",
        "transpose_tiled_kernel",
        "fp32",
        _triton_configs("transpose", "AUTOTUNE_CONFIGS"),
    ),
    Case("07", "matmul no reuse", "matmul", "matmul_noreuse_kernel", "bf16", _one({"BLOCK": 128, "BLOCK_K": 32})),
    Case("07", "matmul fp32 (pointer)", "matmul", "matmul_kernel", "fp32", _matmul("pointer"), dot=True),
    Case("07", "matmul bf16 (pointer)", "matmul", "matmul_kernel", "bf16", _matmul("pointer"), dot=True),
    Case(
        "07",
        "matmul bf16 (TMA)",
        "matmul",
        "matmul_tma_kernel",
        "bf16",
        _matmul("tma"),
        dot=True,
        needs="tma",
        instead="matmul bf16 (pointer)",
        types={"a_desc": "desc<BLOCK_M,BLOCK_K>", "b_desc": "desc<BLOCK_K,BLOCK_N>", "c_ptr": "*dtype"},
        constexprs={},
    ),
    *_step_cases(),
    Case(
        "07",
        "pad rows",
        "pad",
        "pad_rows_kernel",
        "fp16",
        _one({"BLOCK_R": 8, "BLOCK_C": 256}),
        pointers=("src0", "dst0", "src1", "dst1"),
        types={},
    ),
    Case(
        "08",
        "attention forward (pointer)",
        "flash_attention",
        "flash_attention_fwd_kernel",
        "bf16",
        _flash_fwd(False, False),
        dot=True,
        pointers=("Q", "K", "V", "O"),
        types=_FWD_TYPES,
    ),
    Case(
        "08",
        "attention forward causal (pointer)",
        "flash_attention",
        "flash_attention_fwd_kernel",
        "bf16",
        _flash_fwd(True, False),
        dot=True,
        pointers=("Q", "K", "V", "O"),
        types=_FWD_TYPES,
    ),
    Case(
        "08",
        "attention forward (TMA)",
        "flash_attention",
        "flash_attention_fwd_kernel",
        "bf16",
        _flash_fwd(False, True),
        dot=True,
        needs="tma",
        instead="attention forward (pointer)",
        pointers=("Q", "K", "V", "O"),
        types=_FWD_TMA_TYPES,
    ),
    Case(
        "08",
        "attention backward: delta",
        "flash_attention",
        "flash_attention_bwd_preprocess_kernel",
        "bf16",
        _one({"HEAD_DIM": HEAD_DIM, "BLOCK": 64}),
        pointers=("O", "DO"),
        types={"DELTA": "*fp32"},
    ),
    Case(
        "08",
        "attention backward: dk, dv",
        "flash_attention",
        "flash_attention_bwd_kernel",
        "bf16",
        _flash_bwd("dkdv"),
        dot=True,
        pointers=("Q", "K", "V", "DO", "DQ", "DK", "DV"),
        types=_BWD_TYPES,
    ),
    Case(
        "08",
        "attention backward: dq",
        "flash_attention",
        "flash_attention_bwd_kernel",
        "bf16",
        _flash_bwd("dq"),
        dot=True,
        pointers=("Q", "K", "V", "DO", "DQ", "DK", "DV"),
        types=_BWD_TYPES,
    ),
    *_teaching_attention_cases(),
]


@dataclass
class Row:
    """One kernel on one target: ``status`` is "ok" or why the lesson's path is not taken there (then
    ``instead`` names what is taken); ``configs`` holds one result dict per compiled configuration."""

    case: Case
    cc: int
    dtype: str
    status: str
    instead: str = ""
    configs: list = field(default_factory=list)  # [{"config", "regs", "spill_bytes", "smem", "fits", "error"}]

    @property
    def compiled(self) -> bool:
        return bool(self.configs) and all(not c.get("error") for c in self.configs)


# ---- jobs: what a worker compiles ----------------------------------------------------------------------------


def _signature_types(case: Case, dtype: str) -> dict:
    """Argument -> type rule of the case, with the dtype filled in; the worker applies it to the parameters."""
    t = TRITON_TYPES[dtype]
    types = {k: v.replace("dtype", t) for k, v in case.types.items()}
    types.update({p: f"*{t}" for p in case.pointers if p not in types})
    return {"default_pointer": f"*{t}", "dtype": t, "types": types}


def _job(case: Case, cc: int, dtype: str, launch: Launch) -> dict:
    return {
        "module": case.module,
        "kernel": case.kernel,
        "cc": cc,
        "constexprs": launch.constexprs,
        "num_warps": launch.num_warps,
        "num_stages": launch.num_stages,
        **_signature_types(case, dtype),
    }


def _key(job: dict) -> str:
    import triton

    src = (Path(__file__).parent / "kernels" / f"{job['module']}.py").read_bytes()
    blob = json.dumps(job, sort_keys=True, default=str).encode() + src + triton.__version__.encode() + b"v2"
    return hashlib.sha256(blob).hexdigest()[:32]


def plan_rows(ccs=CCS, only=(), all_configs: bool = False) -> tuple[list[Row], dict]:
    """The rows of the table (without results) and the jobs they need: ``{key: job}``."""
    rows, jobs = [], {}
    for case in CASES:
        if only and not any(o.lower() in case.name.lower() for o in only):
            continue
        for cc in ccs:
            p = plan.for_gpu(hardware.get(PLANNED[cc]))
            dtype = p.dtype(case.dtype) if case.dot else case.dtype
            if case.needs and not plan.has(p.gpu, case.needs):
                rows.append(Row(case, cc, dtype, f"not taken: {plan.FEATURES[case.needs].why}", case.instead))
                continue
            status = (
                "ok" if dtype == case.dtype else f"{dtype} instead of {case.dtype}: {plan.FEATURES[case.dtype].why}"
            )
            if case.dot and dtype == "fp32" and not plan.has(p.gpu, "tf32"):
                status = f"ieee instead of tf32: {plan.FEATURES['tf32'].why}"
            row = Row(case, cc, dtype, status, dtype if dtype != case.dtype else "")
            launches = case.launches(p, dtype)
            for launch in launches if all_configs else launches[:1]:
                job = _job(case, cc, dtype, launch)
                key = _key(job)
                jobs[key] = job
                row.configs.append({"config": launch.short(), "key": key, "limit": p.smem_per_block_bytes})
            rows.append(row)
    return rows, jobs


# ---- the worker: compile in a process where kernels are real @triton.jit functions ---------------------------


def _param_type(name: str, rule: dict) -> str:
    if name in rule["types"]:
        return rule["types"][name]
    return rule["default_pointer"] if name.endswith("_ptr") else "i32"


def _descriptor_type(spec: str, constexprs: dict, dtype: str) -> str:
    dims = [constexprs[d] if d in constexprs else int(d) for d in spec[len("desc<") : -1].split(",")]
    return f"tensordesc<{dtype}[{dims[0]}, {dims[1]}]>"


_REGS = re.compile(r"Used (\d+) registers")
_SPILLS = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")


def compile_job(job: dict) -> dict:
    """Compile one job (in a worker: needs real ``@triton.jit`` kernels). Returns regs, spill bytes (stores +
    loads), shared memory in bytes, or ``error`` with the compiler's last line."""
    import inspect

    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    fn = getattr(_kernel_module(job["module"]), job["kernel"])
    defaults = {
        k: v.default for k, v in inspect.signature(fn.fn).parameters.items() if v.default is not inspect.Parameter.empty
    }
    signature, constexprs = {}, {}
    for p in fn.params:
        if p.is_constexpr:
            signature[p.name] = "constexpr"
            constexprs[p.name] = job["constexprs"].get(p.name, defaults.get(p.name))
            continue
        t = _param_type(p.name, job)
        if t == "none":
            signature[p.name], constexprs[p.name] = "constexpr", None
        elif t.startswith("desc<"):
            signature[p.name] = _descriptor_type(t, job["constexprs"], job["dtype"])
        else:
            signature[p.name] = t
    log = io.StringIO()
    try:
        with contextlib.redirect_stdout(log):
            k = triton.compile(
                ASTSource(fn, signature, constexprs=constexprs),
                target=GPUTarget("cuda", job["cc"], 32),
                options={"num_warps": job["num_warps"], "num_stages": job["num_stages"]},
            )
    except Exception as e:  # noqa: BLE001  (the table reports a target the kernel does not compile for)
        lines = [ln for ln in str(e).strip().splitlines() if ln.strip()] or [type(e).__name__]
        return {"error": f"{type(e).__name__}: {lines[-1][:200]}"}
    text = log.getvalue()
    regs = _REGS.search(text)
    spills = _SPILLS.search(text)
    ptx = k.asm.get("ptx", "")
    return {
        "mma": ptx.count("mma.sync") + ptx.count("wgmma.mma_async"),
        "regs": int(regs.group(1)) if regs else None,
        "spill_bytes": int(spills.group(1)) + int(spills.group(2)) if spills else None,
        "smem": int(k.metadata.shared),
    }


def _worker(jobs_path: str, out_path: str) -> None:
    """Entry of a worker process: the kernels must be real @triton.jit functions here."""
    os.environ.pop("TRITON_INTERPRET", None)
    if any(m.startswith("gpulab.kernels.") for m in sys.modules):
        raise RuntimeError("a kernel module was imported before the worker cleared TRITON_INTERPRET")
    jobs = json.loads(Path(jobs_path).read_text())
    results = {key: compile_job(job) for key, job in jobs.items()}
    Path(out_path).write_text(json.dumps(results))


def _run_workers(jobs: dict, n_workers: int) -> dict:
    """Compile ``jobs`` in ``n_workers`` processes; returns {key: result}."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(GPULAB_MODE="interpreter", TRITON_DUMP_PTXAS_LOG="1", TRITON_DEFAULT_FP_FUSION="1")
    keys = sorted(jobs, key=lambda k: (jobs[k]["module"] != "flash_attention", k))  # slow ones spread first
    shares = [keys[i::n_workers] for i in range(n_workers)]
    results = {}
    with tempfile.TemporaryDirectory(prefix="gpulab-targets-") as tmp:
        env["TRITON_CACHE_DIR"] = str(Path(tmp) / "triton")  # a fresh cache: ptxas runs, and logs, every time
        procs = []
        for i, share in enumerate(s for s in shares if s):
            jp, op = Path(tmp) / f"jobs{i}.json", Path(tmp) / f"out{i}.json"
            jp.write_text(json.dumps({k: jobs[k] for k in share}))
            procs.append(
                (
                    subprocess.Popen(
                        [sys.executable, "-m", "gpulab.targets", "--worker", str(jp), str(op)],
                        env=env,
                        stderr=subprocess.PIPE,
                        text=True,
                    ),
                    op,
                )
            )
        for proc, op in procs:
            _, err = proc.communicate()
            if proc.returncode != 0:
                raise RuntimeError(f"a targets worker failed (exit {proc.returncode}):\n{err[-2000:]}")
            results.update(json.loads(op.read_text()))
    return results


# ---- the strided copy's layout (lesson 06) -------------------------------------------------------------------

# (BLOCK, num_warps, dtype, CONTIGUOUS): the launch of gpulab.counters' coalescing case, at stride 1 and above
STRIDED_VARIANTS = ((1024, 4, "fp32", True), (1024, 4, "fp32", False))
_SIZE_PER_THREAD = re.compile(r"#blocked\d* = #ttg\.blocked<\{sizePerThread = \[(\d+)\]")
_GLOBAL_OPS = re.compile(r"\b((?:ld|st)\.global[\w.]*)")


def compile_strided_layout(block: int, num_warps: int, dtype: str, contiguous: bool, cc: int = 90) -> dict:
    """Compile ``strided_copy_kernel`` (in a worker: needs the real ``@triton.jit`` kernel) as a launch on
    torch's allocations specializes it: both pointers and n (here 2**24) divisible by 16, stride a plain i32.
    Returns ``size_per_thread`` (every ``sizePerThread`` of the TTGIR's blocked layouts) and ``ptx``
    ({"ld.global.b32": count, ...}: global loads and stores in the PTX, each one per thread)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    fn = _kernel_module("strided").strided_copy_kernel
    t = TRITON_TYPES[dtype]
    signature = {
        "x_ptr": f"*{t}",
        "y_ptr": f"*{t}",
        "n": "i32",
        "stride": "i32",
        "CONTIGUOUS": "constexpr",
        "BLOCK": "constexpr",
    }
    aligned = {(i,): [["tt.divisibility", 16]] for i in range(3)}
    k = triton.compile(
        ASTSource(fn, signature, constexprs={"CONTIGUOUS": contiguous, "BLOCK": block}, attrs=aligned),
        target=GPUTarget("cuda", cc, 32),
        options={"num_warps": num_warps},
    )
    ops = {}
    for op in _GLOBAL_OPS.findall(k.asm["ptx"]):
        ops[op] = ops.get(op, 0) + 1
    return {
        "block": block,
        "num_warps": num_warps,
        "dtype": dtype,
        "contiguous": contiguous,
        "cc": cc,
        "size_per_thread": sorted({int(v) for v in _SIZE_PER_THREAD.findall(k.asm["ttgir"])}),
        "ptx": dict(sorted(ops.items())),
    }


def _layout_worker(variants_json: str, out_path: str) -> None:
    os.environ.pop("TRITON_INTERPRET", None)
    if any(m.startswith("gpulab.kernels.") for m in sys.modules):
        raise RuntimeError("a kernel module was imported before the worker cleared TRITON_INTERPRET")
    results = [compile_strided_layout(*v) for v in json.loads(variants_json)]
    Path(out_path).write_text(json.dumps(results))


def strided_layouts(variants=STRIDED_VARIANTS, cc: int = 90) -> list[dict]:
    """What Triton compiles ``gpulab.kernels.strided.strided_copy_kernel`` to for each variant
    ``(BLOCK, num_warps, dtype, CONTIGUOUS)``, ahead of time for compute capability ``cc`` (one worker process,
    a few seconds): a list of ``compile_strided_layout`` dicts. Raises RuntimeError when the worker fails."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(GPULAB_MODE="interpreter", TRITON_DEFAULT_FP_FUSION="1")
    todo = json.dumps([[int(b), int(w), str(d), bool(c), int(cc)] for b, w, d, c in variants])
    with tempfile.TemporaryDirectory(prefix="gpulab-layout-") as tmp:
        env["TRITON_CACHE_DIR"] = str(Path(tmp) / "triton")
        out = Path(tmp) / "layouts.json"
        proc = subprocess.run(
            [sys.executable, "-m", "gpulab.targets", "--layout-worker", todo, str(out)],
            env=env,
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"the layout worker failed (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
        return json.loads(out.read_text())


def layout_table(layouts: list[dict]) -> str:
    """One line per ``strided_layouts`` result: the launch, ``sizePerThread`` and the PTX's global accesses."""
    return "\n".join(
        f"strided_copy_kernel sm_{r['cc']} BLOCK {r['block']} w{r['num_warps']} {r['dtype']} "
        f"{'stride 1 (CONTIGUOUS)' if r['contiguous'] else 'stride > 1'}: sizePerThread "
        f"{r['size_per_thread']}, PTX " + ", ".join(f"{n} x {op}" for op, n in r["ptx"].items())
        for r in layouts
    )


def cache_path() -> Path:
    from .device import cache_dir

    return cache_dir() / "targets"


def run(ccs=CCS, only=(), all_configs: bool = False, jobs: int | None = None, use_cache: bool = True) -> list[Row]:
    """Compile every case for every target in ``ccs`` and return the rows with their results.

    ``only``: substrings of case names to keep; ``jobs``: worker processes (default: the CPU count, at most 4).
    Raises ValueError for a target outside ``CCS``."""
    bad = [c for c in ccs if c not in CCS]
    if bad:
        raise ValueError(f"ccs must be among {CCS}, got {bad}")
    rows, todo = plan_rows(tuple(ccs), tuple(only), all_configs)
    cache = cache_path()
    done = {}
    if use_cache:
        for key in todo:
            f = cache / f"{key}.json"
            if f.exists():
                done[key] = json.loads(f.read_text())
    missing = {k: j for k, j in todo.items() if k not in done}
    if missing:
        n = jobs or min(4, os.cpu_count() or 1)
        fresh = _run_workers(missing, max(1, min(n, len(missing))))
        cache.mkdir(parents=True, exist_ok=True)
        for key, result in fresh.items():
            (cache / f"{key}.json").write_text(json.dumps(result))
        done.update(fresh)
    for row in rows:
        for c in row.configs:
            c.update(done[c["key"]])
            if "smem" in c:
                c["fits"] = c["smem"] <= c["limit"]
    return rows


def _cell(row: Row) -> str:
    if not row.configs:
        return f"{row.status} -> {row.instead}"
    bad = [c for c in row.configs if c.get("error")]
    over = [c for c in row.configs if c.get("fits") is False]
    text = row.status
    if bad:
        text = f"FAILS to compile ({bad[0]['config']}): {bad[0]['error']}"
    elif over:
        text += f"; {len(over)} config(s) over {over[0]['limit'] // 1024} KiB shared memory"
    return text


def table(rows: list[Row]) -> str:
    """The rows as a text table: lesson, kernel, target, dtype, registers, spill bytes, shared KiB, result."""
    head = (
        f"{'':2} {'kernel':36} {'cc':>4} {'GPUs':30} {'dtype':5} {'mma':>5} {'regs':>4} {'spill':>6} {'smem':>8}"
        "  result"
    )
    out = [head, "-" * len(head)]
    for r in rows:
        first = r.configs[0] if r.configs else {}
        regs = first.get("regs")
        spill = first.get("spill_bytes")
        smem = f"{first['smem'] / 1024:.1f}K" if "smem" in first else "-"
        configs = f" [{len(r.configs)} configs]" if len(r.configs) > 1 else ""
        out.append(
            f"{r.case.lesson:2} {r.case.name:36} {r.cc / 10:>4.1f} {', '.join(gpus_of(r.cc))[:30]:30} "
            f"{r.dtype:5} {first.get('mma', '-'):>5} {regs if regs is not None else '-':>4} {spill if spill is not None else '-':>6} "
            f"{smem:>8}  {_cell(r)}{configs}"
        )
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m gpulab.targets", description=__doc__.split("\n\n")[0])
    ap.add_argument("--cc", default=",".join(map(str, CCS)), help="targets, e.g. 75,90")
    ap.add_argument("--only", default="", help="comma-separated substrings of kernel names")
    ap.add_argument("--all-configs", action="store_true", help="every autotuning candidate, not only the first")
    ap.add_argument("--jobs", type=int, default=None, help="worker processes")
    ap.add_argument("--no-cache", action="store_true")
    ap.add_argument(
        "--strided-layout", action="store_true", help="the strided copy's layout and PTX loads (lesson 06), and exit"
    )
    ap.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    ap.add_argument("--layout-worker", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        _worker(*args.worker)
        return 0
    if args.layout_worker:
        _layout_worker(*args.layout_worker)
        return 0
    if args.strided_layout:
        ccs = tuple(int(c) for c in args.cc.split(",") if c)
        print(layout_table([r for cc in ccs for r in strided_layouts(cc=cc)]))
        return 0
    ccs = tuple(int(c) for c in args.cc.split(",") if c)
    only = tuple(o.strip() for o in args.only.split(",") if o.strip())
    rows = run(ccs, only, args.all_configs, args.jobs, not args.no_cache)
    print(table(rows))
    failed = [r for r in rows if any(c.get("error") for c in r.configs)]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
