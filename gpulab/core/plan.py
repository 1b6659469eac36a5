"""Per-GPU choices: the dtype, load path, problem sizes and autotuning candidates a lesson takes on one GPU.

Pure: every choice is a function of a ``hardware.GPUSpec`` (no CUDA calls, no timing), so the choices for a
T4, an L4, an A100 and an H200 can be checked on a CPU. ``current()`` is the plan for the GPU gpulab plans
for, chosen once:

1. ``GPULAB_AS_GPU=<name>`` (``gpulab.core.settings``): that GPU of ``gpulab.core.hardware``, on whatever GPU runs (on a
   GPU it must not ask for a feature or more memory than the GPU has);
2. else the GPU torch sees, looked up in ``gpulab.core.hardware`` by the name torch reports (a GPU the table does
   not know is described from torch's device properties);
3. else (the interpreter) the H200, the GPU the reference recordings in ``gpulab/data`` were made on, so that
   the choices match the recorded figures.

Features by compute capability (``FEATURES``; sources in each entry):

| feature | from | where it is missing |
|---|---|---|
| bf16 tensor cores | 8.0 | fp16 (same bytes, tensor cores since 7.0) |
| tf32 tensor cores | 8.0 | "ieee" fp32 FMA for an fp32 tl.dot |
| TMA (tensor memory accelerator) | 9.0 | pointer loads with masks |
| fp8 (e4m3/e5m2) tensor cores | 8.9 | fp16 |
| Triton's tensor-core tl.dot (mma) | 8.0 | FP32 FMA: small tiles (``Plan.small_tiles``) |

Lessons call ``current()`` and pass its choices to the launchers (``plan.matmul_path``, ``plan.dtype("bf16")``,
``plan.keep_fitting(configs, ...)``, ``plan.sizes_that_fit(...)``).

The kernels' policy: what a launch without a given path or config takes, per GPU generation (this is the one
description; the kernel modules point here). Every choosing function is pure, a function of a plan and a dtype,
and takes the plan as ``plan_`` (default ``current()``), so a test or a figure asks what another GPU would choose
without setting GPULAB_AS_GPU: ``matmul.candidates("pointer", torch.float16, for_gpu(hardware.get("T4")))``.

| choice (function) | compute capability >= 9.0 | 8.0 to 8.9 | 7.5 (``Plan.small_tiles``) |
|---|---|---|---|
| matmul path (``matmul.planned_path``) | "tma" (fp16, bf16); "pointer" (fp32) | "pointer" | "pointer" |
| matmul candidates (``matmul.candidates``) | ``CONFIGS[path]`` (fp32: "pointer_fp32") | same | "pointer_small" |
| attention TMA loads (``planned_tma``) | forward (``DEFAULT_FWD_TMA``), not backward | none | none |
| attention candidates (``fwd_candidates``) | ``FWD_CONFIGS``, ``BWD_CONFIGS`` (fp32: ``FP32_*``) | same | ``FP32_*`` |
| teaching tiles (``planned_blocks``) | the GPU tiles (fp32: smaller) | same | ``FMA_TILES``, ``SMALL_BLOCKS`` |

Each candidate list keeps only the configs whose shared-memory estimate (``matmul_smem_bytes``,
``attention_fwd_smem_bytes``) fits one block on the planned GPU (``Plan.keep_fitting``), in their order; causal
attention also keeps only tiles whose diagonal band starts on a tile edge. The names are the same in both fast
kernels: *candidates* are the lists the autotuner times (on a GPU the first launch of a tuning key times them
and keeps the fastest, ``kernels._autotune``); the *heuristic* config is the first candidate, taken untimed
(``matmul.heuristic_config``, ``config="heuristic"``, ``GPULAB_AUTOTUNE=first``); the *chosen* configs are those
the autotuner kept (``tuned_configs``; ``flash_attention.chosen_configs`` for given inputs); ``config_label``
writes a config in one line. The launchers (``matmul``, ``flash_attention``) always take ``current()``, and TMA
only on a GPU that can run it (``kernels._hopper.tma_available()``); the interpreter takes its own small fixed
configs (``INTERPRETER_CONFIG``, ``INTERPRETER_FWD``, ``INTERPRETER_BWD``) and pointer loads unless asked.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

from . import hardware
from .settings import SETTINGS


@dataclass(frozen=True)
class Feature:
    """A hardware path that exists from compute capability ``since`` on; ``instead`` is what gpulab takes
    before it."""

    name: str
    since: tuple[int, int]
    instead: str
    why: str
    source: str


FEATURES = {
    "bf16": Feature(
        "bf16 tensor cores",
        (8, 0),
        "fp16",
        "bf16 tensor cores from compute capability 8.0 (Ampere); before it Triton lowers a bf16 "
        "tl.dot to FP32 FMA on the CUDA cores",
        "NVIDIA A100 Tensor Core GPU Architecture whitepaper (2020), 'BF16 ... Tensor Core "
        "support'; T4 datasheet: FP16/INT8/INT4 tensor cores only",
    ),
    "tf32": Feature(
        "tf32 tensor cores",
        (8, 0),
        "ieee",
        "tf32 tensor cores from compute capability 8.0 (Ampere); before it an fp32 tl.dot runs as FP32 FMA ('ieee')",
        "NVIDIA A100 Tensor Core GPU Architecture whitepaper (2020), 'TF32 Tensor Core'",
    ),
    "mma": Feature(
        "Triton tensor-core dots",
        (8, 0),
        "FMA",
        "Triton emits tensor-core instructions (mma) for tl.dot from compute capability 8.0; on 7.5 a "
        "tl.dot compiles to FP32 FMA on the CUDA cores (no mma in the PTX: python -m gpulab.measure.targets), "
        "so attention takes the small tiles of its fp32 lists there",
        "the PTX Triton 3.9 emits for sm_75 (counted by gpulab.measure.targets); Triton's NVIDIA backend "
        "supports MMA from sm_80",
    ),
    "tma": Feature(
        "TMA",
        (9, 0),
        "pointer",
        "TMA (the tensor memory accelerator) from compute capability 9.0 (Hopper); before it "
        "gpulab loads tiles through pointers with masks",
        "NVIDIA H100 Tensor Core GPU Architecture whitepaper v1.04, 'Tensor Memory Accelerator'",
    ),
    "fp8": Feature(
        "fp8 tensor cores",
        (8, 9),
        "fp16",
        "fp8 (e4m3, e5m2) tensor cores from compute capability 8.9 (Ada, Hopper); Triton refuses fp8e4nv below sm_89",
        "NVIDIA Ada GPU Architecture whitepaper v2.1 ('Fourth-generation Tensor Cores ... FP8'); "
        "Triton's CUDA backend: 'type fp8e4nv not supported in this architecture'",
    ),
}

# Shared memory one block may opt into, in KiB: the per-SM capacity less 1 KiB the CUDA runtime reserves per
# block from compute capability 8.0 on (CUDA C++ Programming Guide, Technical Specifications per Compute
# Capability: 64 KB on 7.5, 163 KB on 8.0, 99 KB on 8.6 and 8.9, 227 KB on 9.0).
_RESERVED_SMEM_KIB_FROM_80 = 1

# Fraction of the GPU's memory a sweep may fill: the rest is for the CUDA context, torch's caching allocator
# (fragmentation) and the reference tensors a lesson keeps beside the kernel's buffers.
MEMORY_FRACTION = 0.5

REFERENCE_GPU = "H200"  # the GPU of the recordings in gpulab/data: the plan in the interpreter


def has(spec: hardware.GPUSpec, feature: str) -> bool:
    """True if ``spec``'s compute capability has ``feature`` (a key of ``FEATURES``). Raises ValueError for an
    unknown feature or a GPU without a compute capability (the seed's imaginary accelerator)."""
    if feature not in FEATURES:
        raise ValueError(f"feature must be one of {tuple(FEATURES)}, got {feature!r}")
    if spec.compute_capability is None:
        raise ValueError(f"{spec.name} has no compute capability: it is not a GPU gpulab can plan for")
    return tuple(spec.compute_capability) >= FEATURES[feature].since


def smem_per_block_bytes(spec: hardware.GPUSpec) -> int:
    """The most shared memory one block may use on ``spec``, in bytes (see ``_RESERVED_SMEM_KIB_FROM_80``)."""
    kib = spec.smem_per_sm_kib - (_RESERVED_SMEM_KIB_FROM_80 if tuple(spec.compute_capability) >= (8, 0) else 0)
    return kib * 1024


def matmul_smem_bytes(block_m: int, block_n: int, block_k: int, num_stages: int, itemsize: int) -> int:
    """Shared memory a pipelined matmul config needs, in bytes: ``num_stages`` buffers of an A tile (BLOCK_M x
    BLOCK_K) and a B tile (BLOCK_K x BLOCK_N). The estimate of Triton's own matmul pruner
    (``triton/ops/matmul_perf_model.py``, ``early_config_prune``: (BLOCK_M + BLOCK_N) * BLOCK_K * num_stages
    * dtsize)."""
    return (block_m + block_n) * block_k * num_stages * itemsize


def attention_fwd_smem_bytes(block_m: int, block_n: int, head_dim: int, num_stages: int, itemsize: int) -> int:
    """Shared memory a FlashAttention forward config needs, in bytes: the Q tile (BLOCK_M x d) once, and a K and
    a V tile (BLOCK_N x d each) per pipeline stage."""
    return (block_m + 2 * block_n * num_stages) * head_dim * itemsize


@dataclass(frozen=True)
class Plan:
    """What lessons choose on one GPU. ``gpu``: the GPU planned for; ``why``: how it was chosen."""

    gpu: hardware.GPUSpec
    why: str
    notes: tuple = field(default_factory=tuple)

    @property
    def compute_capability(self) -> tuple[int, int]:
        return tuple(self.gpu.compute_capability)

    @property
    def memory_bytes(self) -> int:
        return int(self.gpu.hbm_gb * 1e9)

    @property
    def smem_per_block_bytes(self) -> int:
        return smem_per_block_bytes(self.gpu)

    @property
    def matmul_path(self) -> str:
        """ "tma" where the GPU has TMA, else "pointer" (the path argument of ``kernels.matmul.matmul``)."""
        return "tma" if has(self.gpu, "tma") else "pointer"

    @property
    def attention_tma(self) -> bool:
        """True where FlashAttention may load through TMA descriptors (``use_tma`` of its launchers)."""
        return has(self.gpu, "tma")

    @property
    def small_tiles(self) -> bool:
        """True where a tl.dot compiles to FMA (no tensor-core mma from Triton, compute capability < 8.0): there
        the large tiles of the GPU lists spill registers (``python -m gpulab.measure.targets --cc 75`` shows how much), so
        attention takes the small tiles of its fp32 lists whatever the dtype, and a matmul should too."""
        return not has(self.gpu, "mma")

    def dtype(self, wanted: str) -> str:
        """The dtype to use where a lesson wants ``wanted`` ("fp32", "fp16", "bf16", "fp8"): itself where this
        GPU has its tensor cores, else ``FEATURES[wanted].instead``."""
        if wanted in ("fp32", "fp16"):
            return wanted
        if wanted not in FEATURES or FEATURES[wanted].instead != "fp16":
            raise ValueError(f"wanted must be 'fp32', 'fp16', 'bf16' or 'fp8', got {wanted!r}")
        return wanted if has(self.gpu, wanted) else FEATURES[wanted].instead

    def input_precision(self, wanted: str = "tf32") -> str:
        """An fp32 tl.dot's ``input_precision``: "tf32" where this GPU has tf32 tensor cores, else "ieee"."""
        if wanted not in ("tf32", "ieee"):
            raise ValueError(f"wanted must be 'tf32' or 'ieee', got {wanted!r}")
        return wanted if wanted == "ieee" or has(self.gpu, "tf32") else FEATURES["tf32"].instead

    @property
    def budget_bytes(self) -> int:
        """Bytes of buffers a sweep may allocate on this GPU: ``MEMORY_FRACTION`` of its memory."""
        return int(MEMORY_FRACTION * self.memory_bytes)

    def fits(self, nbytes: int) -> bool:
        """True if ``nbytes`` of buffers fit in ``budget_bytes``."""
        return nbytes <= self.budget_bytes

    def skip_reason(self, nbytes: int) -> str:
        """Why a point of ``nbytes`` is not run here, one line: 'needs 8.6 GB; the T4 plan allows 8.0 GB (50% of
        its 16 GB)'."""
        return (
            f"needs {nbytes / 1e9:.1f} GB; the {self.gpu.name} plan allows {self.budget_bytes / 1e9:.1f} GB "
            f"({MEMORY_FRACTION:.0%} of its {self.gpu.hbm_gb:g} GB)"
        )

    def feature_skip(self, feature: str) -> str | None:
        """None where this GPU has ``feature`` (a key of ``FEATURES``), else one line: 'skipped on the T4: ...'."""
        return None if has(self.gpu, feature) else f"skipped on the {self.gpu.name}: {FEATURES[feature].why}"

    def sizes_that_fit(self, sizes, nbytes) -> tuple[list, list]:
        """Split a sweep: ``(kept, skipped)`` where ``nbytes(size)`` (bytes a point allocates) fits or not.
        A figure marks the skipped points as out of memory on this GPU instead of running them."""
        kept, skipped = [], []
        for s in sizes:
            (kept if self.fits(nbytes(s)) else skipped).append(s)
        return kept, skipped

    def largest_elements(self, bytes_per_element: int, buffers: int = 1) -> int:
        """The largest element count n with ``buffers`` buffers of n elements fitting (``fits``)."""
        if bytes_per_element <= 0 or buffers <= 0:
            raise ValueError(f"bytes_per_element and buffers must be positive, got {bytes_per_element}, {buffers}")
        return self.budget_bytes // (bytes_per_element * buffers)

    def waves_of(self, blocks: int, blocks_per_sm: int = 1) -> float:
        """How many waves ``blocks`` blocks take on this GPU's SMs (``blocks_per_sm`` resident per SM)."""
        return blocks / (self.gpu.sms * blocks_per_sm)

    def keep_fitting(self, configs, smem_bytes) -> list:
        """The configs whose ``smem_bytes(config)`` estimate fits one block's shared memory on this GPU, in
        their order; if none fits, the one needing the least (the compiler then reports what it really uses,
        ``python -m gpulab.measure.targets``)."""
        configs = list(configs)
        limit = self.smem_per_block_bytes
        keep = [c for c in configs if smem_bytes(c) <= limit]
        return keep or ([min(configs, key=smem_bytes)] if configs else [])

    def choices(self) -> list[tuple[str, str, str]]:
        """(what, choice, why) rows for ``describe``."""
        cc = ".".join(map(str, self.compute_capability))
        rows = []
        for key, wanted in (("bf16", "bf16"), ("fp8", "fp8")):
            got = self.dtype(wanted)
            rows.append((f"{wanted} matmuls", got, f"compute capability {cc}" if got == wanted else FEATURES[key].why))
        path = self.matmul_path
        rows.append(("tile loads", path, f"compute capability {cc}" if path == "tma" else FEATURES["tma"].why))
        rows.append(
            (
                "sizes",
                f"<= {MEMORY_FRACTION * self.gpu.hbm_gb:.0f} GB of buffers",
                f"{MEMORY_FRACTION:.0%} of {self.gpu.hbm_gb:g} GB",
            )
        )
        rows.append(
            (
                "autotuning",
                f"<= {self.smem_per_block_bytes // 1024} KiB shared memory per config",
                f"{self.gpu.smem_per_sm_kib} KiB per SM on compute capability {cc}",
            )
        )
        return rows

    def describe(self) -> str:
        """A few lines: the GPU planned for, why, and each choice with its reason."""
        g = self.gpu
        cc = ".".join(map(str, self.compute_capability))
        lines = [f"plans for: {g.name} (compute capability {cc}, {g.sms} SMs, {g.hbm_gb:g} GB)", f"  why: {self.why}"]
        lines += [f"  {what}: {choice} ({why})" for what, choice, why in self.choices()]
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)


def as_gpu_spec(name: str) -> hardware.GPUSpec:
    """The GPU of ``gpulab.core.hardware`` named by GPULAB_AS_GPU. Raises ValueError naming the variable and the names
    it takes: every name of ``hardware.ACCEPTED_NAMES`` (table names and short names, any case) whose entry has a
    compute capability and a memory size."""
    plannable = [n for n, s in hardware.GPUS.items() if s.compute_capability and s.hbm_gb]
    spec = hardware.find(name) if isinstance(name, str) else None
    if spec is None or spec.name not in plannable:
        taken = [n for n in hardware.ACCEPTED_NAMES if hardware.find(n) and hardware.find(n).name in plannable]
        raise ValueError(
            f"GPULAB_AS_GPU must name a GPU of gpulab.core.hardware (one of: {', '.join(taken)}; any case), got {name!r}"
        )
    return spec


def for_gpu(spec: hardware.GPUSpec, why: str = "", notes=()) -> Plan:
    """The plan for ``spec``. Raises ValueError for a GPU without a compute capability or a memory size."""
    if not isinstance(spec, hardware.GPUSpec):
        raise TypeError(f"spec must be a hardware.GPUSpec (use hardware.get(name)), got {type(spec).__name__}")
    if spec.compute_capability is None or not spec.hbm_gb or not spec.sms or not spec.smem_per_sm_kib:
        raise ValueError(
            f"{spec.name} lacks a compute capability, SM count, shared memory or memory size: gpulab cannot plan for it"
        )
    return Plan(spec, why or f"asked for {spec.name}", tuple(notes))


def choose(as_gpu: str | None, found: hardware.GPUSpec | None, found_name: str = "") -> Plan:
    """The plan for ``as_gpu`` (GPULAB_AS_GPU's value, or None) given the GPU found (``None`` in the
    interpreter). Pure; ``current()`` calls it once. Raises ValueError when ``as_gpu`` is not a table GPU, or
    asks for a newer compute capability or more memory than the GPU found has."""
    if as_gpu:
        spec = as_gpu_spec(as_gpu)
        if found is not None:
            if tuple(spec.compute_capability) > tuple(found.compute_capability):
                raise ValueError(
                    f"GPULAB_AS_GPU={as_gpu} needs compute capability "
                    f"{'.'.join(map(str, spec.compute_capability))} features, but this GPU "
                    f"({found.name}) has {'.'.join(map(str, found.compute_capability))}"
                )
            if spec.hbm_gb > found.hbm_gb:
                raise ValueError(
                    f"GPULAB_AS_GPU={as_gpu} plans for {spec.hbm_gb:g} GB, but this GPU "
                    f"({found.name}) has {found.hbm_gb:g} GB"
                )
            return for_gpu(
                spec, f"GPULAB_AS_GPU={as_gpu} is set: choosing as a {spec.name} would, on the {found.name} found"
            )
        return for_gpu(spec, f"GPULAB_AS_GPU={as_gpu} is set (no GPU here: the interpreter runs the kernels)")
    if found is not None:
        return for_gpu(found, f"the GPU torch sees ({found_name or found.name})")
    return for_gpu(
        hardware.get(REFERENCE_GPU),
        f"no GPU: the interpreter plans as the {REFERENCE_GPU}, where the reference data was recorded",
    )


def _this_gpu() -> tuple[hardware.GPUSpec | None, str]:
    """The GPU torch sees as a table entry (or built from torch's device properties), or None."""
    import gpulab

    if not gpulab.ON_GPU:
        return None, ""
    name = gpulab.mode_info.device_name
    spec = hardware.find(name)
    if spec is None:  # a GPU the table does not know: its own properties, no datasheet rates
        import torch

        p = torch.cuda.get_device_properties(0)
        smem = getattr(p, "shared_memory_per_multiprocessor", 0) // 1024 or None
        spec = hardware.GPUSpec(
            name,
            p.multi_processor_count,
            smem,
            0.0,
            {d: None for d in hardware.DTYPES},
            (p.major, p.minor),
            note="from torch's device properties",
            hbm_gb=p.total_memory / 1e9,
        )
    return spec, name


@functools.cache
def current() -> Plan:
    """The plan for the GPU this process runs on: see the module docstring for the order of choice. Computed once."""
    found, name = _this_gpu()
    return choose(SETTINGS.as_gpu, found, name)
