"""What a notebook's cells or a benchmark suite cost on a GPU, counted on a CPU: Triton compiles, autotuner
benchmarks, timed measurements, torch.compile graphs, Nsight Compute runs and full garbage collections, per cell.

    python tools/gpu_cost.py notebooks/04_fusion.ipynb            # every code cell, nbval's numbering ("Cell 13")
    python tools/gpu_cost.py notebooks/04_fusion.ipynb --cells 13  # show some cells only (all of them run)
    python tools/gpu_cost.py --suite lesson04                      # the suite's headline, as tools/gpu_check.py runs it
    python tools/gpu_cost.py --suite lesson04 --steps all          # the whole suite
    python tools/gpu_cost.py notebooks/06_coalescing.ipynb --recorded h200   # the autotuner's recorded choices taken

How it counts. The cells (or the suite) run on the CPU under gpulab's test clock (``gpulab.core.timing.test_clock``), read
as a GPU would: in a cell's source ``gpulab.ON_GPU`` is True and ``gpulab.size`` gives its ``gpu=`` size; the modules
of ``GPU_CHOICES`` read ``gpulab.ON_GPU`` as True (their launchers autotune and take their GPU launch shapes;
other library code keeps the interpreter's choices); fast math counts as available, and so does torch.compile for the
capstone's fused rungs (``gpt.fusion_available``). Tensors live on torch's ``meta``
device (shapes and dtypes, no data), so the GPU's sizes cost nothing here; a Triton launch is recorded and not
executed; a value read back from a tensor (``.item()``, ``float``, ``bool``, ``torch.equal``) is 0 or True. The
numbers computed are meaningless and a cell's own asserts may fail (the table says so); only the work is counted:

- compiles: Triton specializations first seen in the process (the kernel, its constexprs, its launch options, and
  what Triton specializes the other arguments on: tensor dtypes and 16-byte alignment, ints equal to 1 or
  divisible by 16), as the GPU's in-memory JIT cache sees them after a cold disk cache; those of kernels calling
  ``tl.dot`` or libdevice math (``kernel_kind``) are counted apart, as they take longer to build;
- tuned: autotuner keys timed (``gpulab.kernels._autotune.fastest``; a ``triton.autotune`` object, None without a
  GPU, is built here from its source: its keys, its pruned configs, each benchmarked, 25 + 100 ms), and bench: the
  candidates timed for them, with their budgets. ``--recorded GPU`` lets the shared autotuner take the choices that
  ``gpulab/data/autotune-<gpu>.json`` records, as on that GPU with that Triton;
- timed: ``gpulab.core.timing.time_ms`` calls and their warm-up + repeat budgets (do_bench runs about that long);
- graphs: torch.compile compilations (the first shape static; a second shape compiles once more with dynamic
  shapes, torch's ``automatic_dynamic_shapes``; ``dynamic=True`` compiles once, ``dynamic=False`` per shape);
- ncu: live Nsight Compute runs (``gpulab.measure.counters.measure``: a child process under ncu);
- gc: full garbage collections (``gc.collect()``: a notebook kernel's heap takes a good fraction of a second);
- host s: this machine's wall time for the cell here, less the collections (numpy and Python work; no GPU work).

``est s`` is a rough estimate for the H200 machine: ``COST_S`` per event, plus the budgets, plus the host time times
``HOST_FACTOR``. The constants were fitted by hand to the cell times tools/gpu_check.py measured there (lesson 02
to 06, a cold cache); counts are exact for the code as run here, the seconds are not. Not seen: cuBLAS and torch's
own kernels loading once per process (seconds, in the first timed cell), the kernel's start, and nvcc builds
(lesson 02's lane_branch step). CPU only: it refuses to run on a GPU (there, time it: tools/gpu_check.py).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import functools
import gc
import importlib
import inspect
import io
import json
import os
import pkgutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import gpulab  # noqa: E402  (before triton: it sets TRITON_INTERPRET=1 on a CPU)

#: Seconds on the H200 machine per counted event (hand-fitted; see the module docstring).
COST_S = {
    "compile": 0.17,  # one Triton specialization of a plain kernel, cold cache: ttir -> ptx -> cubin
    "compile_math": 0.6,  # one of a kernel calling libdevice math (sin, cos, exp, ...): a larger module to build
    "compile_dot": 2.0,  # one of a kernel calling tl.dot: tensor-core tiles, pipelining, the longest ptxas runs
    "bench": 0.01,  # per autotuner benchmark beyond its budgets (triton.autotune's do_bench: 25 + 100 ms)
    "timed": 0.02,  # per time_ms call beyond its budgets: the first call, the L2-flush buffer, events
    "gc": 0.12,  # one full garbage collection of a notebook kernel's heap (torch, plotly loaded)
    "graph": 10.0,  # one torch.compile graph, cold inductor cache: dynamo, inductor, its Triton compile
    "inductor_start": 7.0,  # the first graph of a process, more: inductor's imports and its compile workers
    "ncu": 11.0,  # one Nsight Compute run: a child Python, its compiles, replayed passes
}
HOST_FACTOR = 0.25  # the H200 machine's CPU against this one's (2 cores shared by several developers)
TUNE_BENCH_MS = 25 + 100  # triton.autotune's do_bench budgets (warm-up + repeat, ms)
LAUNCH_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg", "enable_fp_fusion", "launch_cooperative_grid")
#: Modules that read ``gpulab.ON_GPU`` as True here: the kernels' GPU launch shapes (blocks, tiles) and cuBLAS in
#: place of the CPU's emulation (``precision.matmul_errors``); the other modules' GPU branches need CUDA itself (TMA
#: descriptors, nvcc, stream capture) and keep the interpreter's.
GPU_CHOICES = (
    "gpulab.kernels.strided",
    "gpulab.kernels.transpose",
    "gpulab.kernels.sincos",
    "gpulab.kernels.matmul_precision",
    "gpulab.models.precision",
    "gpulab.kernels.flash_attention",  # autotuned launches, TMA loads, the backward's block
    "gpulab.kernels.flash_teaching",  # the GPU's tiles
)
LAUNCH_DEFAULTS = {"num_warps": 4, "num_stages": 3, "num_ctas": 1}  # Triton's CUDA options where a launch names none


@dataclass
class Cost:
    """What one cell (or one suite run) costs, counted."""

    name: str
    compiles: int = 0
    math_compiles: int = 0  # of ``compiles``: kernels calling libdevice math
    dot_compiles: int = 0  # of ``compiles``: kernels calling tl.dot
    tuned: int = 0
    bench: int = 0
    bench_budget_ms: float = 0.0  # the benchmarks' warm-up + repeat budgets
    timed: int = 0
    timed_budget_ms: float = 0.0
    graphs: int = 0
    first_graph: bool = False  # this scope compiled the process's first torch.compile graph
    ncu: int = 0
    gc: int = 0  # full garbage collections (gc.collect() of every generation)
    host_s: float = 0.0
    error: str = ""
    kernels: dict = field(default_factory=dict)  # kernel name -> compiles

    def estimate_s(self) -> float:
        """Seconds on the H200 machine (``COST_S``, ``HOST_FACTOR``)."""
        c = COST_S
        return (
            (self.compiles - self.math_compiles - self.dot_compiles) * c["compile"]
            + self.math_compiles * c["compile_math"]
            + self.dot_compiles * c["compile_dot"]
            + self.bench * c["bench"]
            + self.bench_budget_ms / 1e3
            + self.timed * c["timed"]
            + self.timed_budget_ms / 1e3
            + self.graphs * c["graph"]
            + self.first_graph * c["inductor_start"]
            + self.ncu * c["ncu"]
            + self.gc * c["gc"]
            + self.host_s * HOST_FACTOR
        )

    def row(self) -> dict:
        return dict(
            name=self.name,
            compiles=self.compiles,
            math_compiles=self.math_compiles,
            dot_compiles=self.dot_compiles,
            tuned=self.tuned,
            bench=self.bench,
            bench_s=round(self.bench_budget_ms / 1e3, 2),
            timed=self.timed,
            timed_s=round(self.timed_budget_ms / 1e3, 2),
            graphs=self.graphs,
            ncu=self.ncu,
            gc=self.gc,
            host_s=round(self.host_s, 2),
            est_s=round(self.estimate_s(), 1),
            kernels=self.kernels,
            error=self.error,
        )


class Ledger:
    """The counts of the current scope (``open``), and what the process has compiled and tuned so far."""

    def __init__(self):
        self.cost = Cost("")
        self.seen_compiles: set = set()
        self.graphs = 0  # torch.compile graphs in the process
        self.timed_full_gc = False  # model time_ms as collecting every generation before each call
        self.recorded = None  # a GPU whose recorded autotuner choices (gpulab/data/autotune-<gpu>.json) are taken
        self.gc_s = 0.0  # this machine's seconds in the full collections of the current scope

    def open(self, name: str) -> Cost:
        self.cost = Cost(name)
        self.gc_s = 0.0
        return self.cost

    def compile(self, key, kind: str = "plain") -> None:
        """Count the specialization ``key`` once per process; ``kind``: "plain", "math" or "dot" (``kernel_kind``)."""
        if key not in self.seen_compiles:
            self.seen_compiles.add(key)
            self.cost.compiles += 1
            self.cost.math_compiles += kind == "math"
            self.cost.dot_compiles += kind == "dot"
            self.cost.kernels[key[0]] = self.cost.kernels.get(key[0], 0) + 1


# ---- what Triton specializes a launch on -----------------------------------------------------------------------


def _constexpr_names(fn) -> set[str]:
    ann = inspect.get_annotations(fn)
    return {k for k, v in ann.items() if "constexpr" in str(v)}


def _arg_spec(v):
    import torch

    if isinstance(v, torch.Tensor):
        return (str(v.dtype), (v.storage_offset() * v.element_size()) % 16 == 0)
    if isinstance(v, bool):
        return "i1"
    if isinstance(v, int):
        return ("i64" if abs(v) >= 2**31 else "i32", "1" if v == 1 else "D" if v % 16 == 0 else "")
    if isinstance(v, float):
        return "fp32"
    return type(v).__name__


def launch_key(fn, args, kwargs) -> tuple:
    """The specialization a GPU compiles for ``fn(*args, **kwargs)`` (a ``@triton.jit`` function's Python
    function): its name, constexpr values, launch options and the other arguments' ``_arg_spec``."""
    given = {k: v for k, v in kwargs.items() if k in LAUNCH_OPTIONS and v is not None}
    opts = tuple(sorted({**LAUNCH_DEFAULTS, **given}.items()))
    sig = inspect.signature(fn)
    bound = sig.bind_partial(*args, **{k: v for k, v in kwargs.items() if k not in LAUNCH_OPTIONS})
    bound.apply_defaults()
    const = _constexpr_names(fn)
    parts = tuple((name, ("c", repr(v)) if name in const else _arg_spec(v)) for name, v in bound.arguments.items())
    return (fn.__name__, fn.__module__, parts, opts)


MATH_CALLS = ("sin(", "cos(", "exp(", "exp2(", "log(", "sigmoid(", "libdevice", "sqrt(")


def _sources(fn, seen=None) -> list[str]:
    """The source of ``fn`` (a ``@triton.jit`` function's Python function) and of the jit functions it calls."""
    seen = set() if seen is None else seen
    if fn in seen:
        return []
    seen.add(fn)
    try:
        out = [inspect.getsource(fn)]
    except (OSError, TypeError):
        return []
    for name in fn.__code__.co_names:
        callee = getattr(fn.__globals__.get(name), "fn", None)
        if inspect.isfunction(callee):
            out += _sources(callee, seen)
    return out


@functools.cache
def kernel_kind(fn) -> str:
    """How long ``fn`` takes to build: "dot" if it or a jit function it calls uses ``tl.dot``, else "math" if one
    names a libdevice math call (``MATH_CALLS``), else "plain"."""
    src = "\n".join(_sources(fn))
    return "dot" if "tl.dot(" in src else "math" if any(m in src for m in MATH_CALLS) else "plain"


# ---- the autotuned kernels, as a GPU builds them ---------------------------------------------------------------


def autotuned_kernels() -> list[tuple]:
    """``(module, attribute, base kernel attribute, key names, configs attribute, prune attribute or None)`` for
    every ``X_autotuned = triton.autotune(configs=C, key=[...], prune_configs_by={"early_config_prune": P})(X)``
    in gpulab.kernels, read from the source (the object is None without a GPU)."""
    import gpulab.kernels as pkg

    out = []
    for info in pkgutil.iter_modules(pkg.__path__):
        mod = importlib.import_module(f"gpulab.kernels.{info.name}")
        tree = ast.parse(Path(mod.__file__).read_text())
        for node in tree.body:
            if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
                continue
            name = node.targets[0].id
            value = node.value.body if isinstance(node.value, ast.IfExp) else node.value
            if not name.endswith("_autotuned") or not isinstance(value, ast.Call):
                continue
            tune = value.func
            if not (isinstance(tune, ast.Call) and ast.unparse(tune.func) == "triton.autotune"):
                continue
            kw = {k.arg: k.value for k in tune.keywords}
            prune = None
            if isinstance(kw.get("prune_configs_by"), ast.Dict):
                d = kw["prune_configs_by"]
                for k, v in zip(d.keys, d.values):
                    if ast.literal_eval(k) == "early_config_prune":
                        prune = ast.unparse(v)
            out.append(
                (mod, name, ast.unparse(value.args[0]), ast.literal_eval(kw["key"]), ast.unparse(kw["configs"]), prune)
            )
    return out


class _GpuView:
    """``gpulab`` as a module of ``GPU_CHOICES`` sees it here: ``ON_GPU`` True, the compute capability the plan's,
    everything else the package's."""

    ON_GPU = True

    @staticmethod
    def compute_capability():
        from gpulab.core import plan

        return tuple(plan.current().compute_capability)

    def __getattr__(self, name):
        return getattr(gpulab, name)


class FakeAutotuner:
    """A ``triton.autotune`` object that counts instead of timing: keys as Triton's ``Autotuner.run`` makes them,
    every pruned config of a new key launched once (a compile each) and counted as a benchmark, the first kept."""

    def __init__(self, ledger: Ledger, fn, configs, keys, prune):
        self.ledger, self.fn, self.configs, self.keys, self.prune = ledger, fn, configs, keys, prune
        self.arg_names = list(inspect.signature(fn.fn).parameters)
        self.cache: dict = {}
        self.best_config = None

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.run(*args, grid=grid, **kwargs)

    def _launch(self, args, kwargs, config, grid):
        extra = {k: v for k, v in config.all_kwargs().items() if v is not None}
        meta = {**dict(zip(self.arg_names, args)), **kwargs, **extra}
        return self.fn.run(*args, grid=grid(meta) if callable(grid) else grid, warmup=False, **kwargs, **extra)

    def run(self, *args, grid, warmup=False, **kwargs):
        nargs = dict(zip(self.arg_names, args))
        config = self.configs[0]
        if len(self.configs) > 1:
            every = {**nargs, **kwargs}
            key = tuple(every[k] for k in self.keys if k in every)
            key += tuple(str(v.dtype) for v in every.values() if hasattr(v, "dtype"))
            if key not in self.cache:
                pruned = self.prune(self.configs, nargs, **kwargs) if self.prune else self.configs
                self.ledger.cost.tuned += 1
                for cfg in pruned:
                    self.ledger.cost.bench += 1
                    self.ledger.cost.bench_budget_ms += TUNE_BENCH_MS
                    self._launch(args, kwargs, cfg, grid)
                self.cache[key] = pruned[0]
            config = self.cache[key]
        self.best_config = config
        return self._launch(args, kwargs, config, grid)


# ---- the GPU-like run ------------------------------------------------------------------------------------------


def _fake_compile(ledger: Ledger):
    def compile_(fn=None, *, dynamic=None, **_):
        if fn is None:
            return lambda f: compile_(f, dynamic=dynamic)
        shapes: set = set()

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            import torch

            sig = tuple((tuple(a.shape), a.dtype) for a in args if isinstance(a, torch.Tensor))
            dtypes = tuple(d for _, d in sig)
            if sig not in shapes:
                same_dtypes = [s for s in shapes if tuple(d for _, d in s) == dtypes]
                if dynamic is False or not same_dtypes or (dynamic is None and len(same_dtypes) == 1):
                    ledger.cost.graphs += 1
                    ledger.cost.first_graph |= ledger.graphs == 0
                    ledger.graphs += 1
                shapes.add(sig)
            return fn(*args, **kwargs)

        return wrapper

    return compile_


@contextlib.contextmanager
def gpu_like(ledger: Ledger):
    """Inside: gpulab runs as described in the module docstring, under the test clock. Every patch is undone on
    exit. Raises RuntimeError on a GPU."""
    if gpulab.ON_GPU:
        raise RuntimeError("tools/gpu_cost.py counts on a CPU; on a GPU, time the notebook (tools/gpu_check.py)")
    import numpy as np
    import plotly.basedatatypes
    import torch
    import torch._dynamo  # noqa: F401  (imported before torch.Generator is wrapped below)
    from triton.runtime.interpreter import InterpretedFunction

    from gpulab.core import timing
    from gpulab.kernels import _autotune
    from gpulab.measure import counters, device, ncu

    undo = []

    def patch(obj, name, value):
        undo.append((obj, name, getattr(obj, name)))
        setattr(obj, name, value)

    def run(self, *args, grid, warmup, **kwargs):
        ledger.compile(launch_key(self.fn, args, kwargs), kernel_kind(self.fn))
        tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]
        if any(t.device.type == "meta" for t in tensors):
            return None
        return real_run(self, *args, grid=grid, warmup=warmup, **kwargs)

    real_run = InterpretedFunction.run
    patch(InterpretedFunction, "run", run)
    for mod, name, base, keys, configs, prune in autotuned_kernels():
        fn = getattr(mod, base)
        patch(mod, name, FakeAutotuner(ledger, fn, getattr(mod, configs), keys, prune and getattr(mod, prune)))
    from gpulab.kernels import sincos

    patch(sincos, "FAST_MATH_AVAILABLE", True)
    from gpulab.capstone import gpt

    patch(gpt, "fusion_available", lambda device: (True, ""))  # the ladder's fused rungs compile, as on a GPU
    patch(gpt, "_COMPILED", {})

    class AdamW(torch.optim.AdamW):  # fused=True has no meta kernel; it compiles nothing either
        def __init__(self, params, *args, fused=None, **kwargs):
            super().__init__(params, *args, **kwargs)

    patch(torch.optim, "AdamW", AdamW)
    for name in GPU_CHOICES:
        patch(importlib.import_module(name), "gpulab", _GpuView())

    real_time_ms = timing.time_ms

    tuning = [False]  # inside the shared autotuner's fastest(): its timings are benchmarks

    def time_ms(fn, *, warmup_ms=50, rep_ms=300, graph=False):
        if tuning[0]:
            ledger.cost.bench += 1
            ledger.cost.bench_budget_ms += warmup_ms + rep_ms
        else:
            ledger.cost.timed += 1
            ledger.cost.timed_budget_ms += warmup_ms + rep_ms
        ledger.cost.gc += ledger.timed_full_gc
        return real_time_ms(fn, warmup_ms=warmup_ms, rep_ms=rep_ms, graph=graph)

    real_fastest = _autotune.fastest

    def fastest(*args, **kwargs):
        ledger.cost.tuned += 1
        tuning[0] = True
        try:
            return real_fastest(*args, **kwargs)
        finally:
            tuning[0] = False

    patch(_autotune, "fastest", fastest)
    for name in ("_CACHE", "_ORIGIN", "_TIMED", "_LOADED"):
        patch(_autotune, name, {})
    if ledger.recorded is not None:  # the stores hold what gpulab/data/autotune-<gpu>.json records for that GPU
        path = _autotune.reference.DATA_DIR / f"autotune-{ledger.recorded}.json"
        data = json.loads(path.read_text()) if path.exists() else {}
        patch(_autotune, "identity", lambda: (data.get("gpu", "?"), data.get("triton", "?")))
        patch(_autotune, "store_path", lambda gpu: Path(os.devnull))
        patch(_autotune, "_write", lambda path, data: path)

    profiles = []

    def get_profile(measure=True, progress=True, matmul_n=8192):  # a cold cache: measured once, then loaded
        if not profiles:
            profiles.append(device.measure_profile(matmul_n=matmul_n, progress=False))
        return profiles[0]

    real_get_profile = device.get_profile
    for name, mod in list(sys.modules.items()):
        if name.startswith("gpulab"):
            if getattr(mod, "time_ms", None) is real_time_ms:
                patch(mod, "time_ms", time_ms)
            if getattr(mod, "get_profile", None) is real_get_profile:
                patch(mod, "get_profile", get_profile)

    def measure(case, executable=None):
        ledger.cost.ncu += 1
        name = getattr(case, "name", case)
        return counters.recorded(name).data

    real_collect = gc.collect

    def collect(generation=2):
        if generation < 2:
            return real_collect(generation)
        t0 = time.perf_counter()
        try:
            return real_collect(generation)
        finally:
            ledger.cost.gc += 1
            ledger.gc_s += time.perf_counter() - t0

    patch(gc, "collect", collect)
    patch(ncu, "available", lambda: (True, ""))
    patch(counters, "measure", measure)
    patch(torch, "compile", _fake_compile(ledger))
    patch(gpulab, "DEVICE", "meta")
    patch(plotly.basedatatypes.BaseFigure, "show", lambda self, *a, **k: None)

    real_gen = torch.Generator

    class Generator(real_gen):  # meta has no generator: a CPU one seeds nothing that matters here
        def __new__(cls, device="cpu"):
            return real_gen("cpu") if str(device) == "meta" else real_gen(device)

    patch(torch, "Generator", Generator)

    def no_meta_generator(f):
        @functools.wraps(f)
        def g(*a, **k):
            if str(k.get("device")) == "meta":
                k.pop("generator", None)
            return f(*a, **k)

        return g

    for name in ("randn", "rand", "randint", "randperm", "normal"):
        patch(torch, name, no_meta_generator(getattr(torch, name)))

    def on_meta(name, value):
        real = getattr(torch.Tensor, name)

        def f(self, *a, **k):
            return value(self) if self.device.type == "meta" else real(self, *a, **k)

        patch(torch.Tensor, name, f)

    on_meta("item", lambda t: 0.0)
    on_meta("__float__", lambda t: 0.0)
    on_meta("__int__", lambda t: 0)
    on_meta("__bool__", lambda t: True)
    on_meta("tolist", lambda t: np.zeros(tuple(t.shape)).tolist())
    on_meta("numpy", lambda t: np.zeros(tuple(t.shape), dtype=np.float32))
    on_meta("cpu", lambda t: torch.zeros(t.shape, dtype=t.dtype))
    patch(torch.Tensor, "cuda", lambda self, *a, **k: self.to("meta"))
    real_to = torch.Tensor.to

    def to(self, *a, **k):  # "cuda" is the meta device here
        a = tuple("meta" if str(x).startswith("cuda") else x for x in a)
        if str(k.get("device", "")).startswith("cuda"):
            k["device"] = "meta"
        return real_to(self, *a, **k)

    patch(torch.Tensor, "to", to)

    def any_meta(f, value):
        @functools.wraps(f)
        def g(*a, **k):
            if any(isinstance(t, torch.Tensor) and t.device.type == "meta" for t in (*a, *k.values())):
                return value
            return f(*a, **k)

        return g

    for name in ("equal", "allclose"):
        patch(torch, name, any_meta(getattr(torch, name), True))
    try:
        with timing.test_clock(ms=1.0):
            yield ledger
    finally:
        for obj, name, value in reversed(undo):
            setattr(obj, name, value)


def _cell_sources(path: Path) -> list[str]:
    from IPython.core.inputtransformer2 import TransformerManager

    nb = json.loads(path.read_text())
    tm = TransformerManager()
    out = []
    for c in nb["cells"]:
        if c["cell_type"] == "code":
            src = "".join(c["source"]) if isinstance(c["source"], list) else c["source"]
            src = src.replace("gpulab.ON_GPU", "True").replace("gpulab.size(", "_gpu_size(")
            out.append(tm.transform_cell(src))
    return out


def _run_scoped(ledger: Ledger, name: str, fn, quiet: bool = True) -> Cost:
    cost = ledger.open(name)
    if os.environ.get("GPU_COST_TRACE"):
        print(f"[gpu_cost] {name}", file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out) if quiet else contextlib.nullcontext():
            fn()
    except BaseException as e:  # noqa: BLE001  (a cell that fails here still shows what it cost up to there)
        if isinstance(e, KeyboardInterrupt):
            raise
        cost.error = f"{type(e).__name__}: {str(e).splitlines()[0][:120] if str(e) else ''}"
    cost.host_s = time.perf_counter() - t0 - ledger.gc_s
    return cost


def cost_notebook(
    path: Path, quiet: bool = True, timed_full_gc: bool = False, recorded: str | None = None
) -> list[Cost]:
    """Run every code cell of the notebook at ``path`` in one namespace under ``gpu_like``; one ``Cost`` per cell,
    named as nbval names them ("Cell 0" is the first code cell). ``timed_full_gc``: count a full garbage collection
    in every ``time_ms`` call (``gpulab.core.timing`` did until 2026-12: ``gc.collect()`` before each); ``recorded``: a
    GPU (``"h200"``) whose recorded autotuner choices the shared autotuner takes, as on that GPU."""
    ledger = Ledger()
    ledger.timed_full_gc, ledger.recorded = timed_full_gc, recorded
    ns: dict = {"__name__": "__main__", "_gpu_size": lambda *, gpu, interpreter: gpu}
    costs = []
    os.environ.setdefault("GPULAB_STATIC_FIGURES", "1")
    with gpu_like(ledger):
        for i, src in enumerate(_cell_sources(path)):
            code = compile(src, f"{path.name}:Cell {i}", "exec")
            costs.append(_run_scoped(ledger, f"Cell {i}", lambda code=code: exec(code, ns), quiet))
    return costs


def cost_suite(
    key: str, steps: tuple[str, ...] | None = None, timed_full_gc: bool = False, recorded: str | None = None
) -> Cost:
    """One suite's run as ``python -m gpulab.bench --only key [--steps ...]`` makes it; ``steps`` None: the
    headline steps ``tools/gpu_check.py`` runs (``suite_list``), () the whole suite."""
    from gpulab.bench.__main__ import LESSON_SUITES

    mod = next(importlib.import_module(m) for m in LESSON_SUITES if m.endswith(key))
    if steps is None:
        sys.path.insert(0, str(ROOT / "tools"))
        from gpu_check import suite_list

        steps = dict(suite_list())[key]
    ledger = Ledger()
    ledger.timed_full_gc, ledger.recorded = timed_full_gc, recorded
    with gpu_like(ledger):
        run = functools.partial(mod.run, progress=False, **({"steps": list(steps)} if steps else {}))
        return _run_scoped(ledger, f"{key} {' '.join(steps) or 'all'}", run)


def table(costs: list[Cost], only: set[str] | None = None) -> str:
    head = f"{'cell':10} {'compiles':>8} {'tuned':>5} {'bench':>5} {'timed':>5} {'timed s':>7} {'graphs':>6} {'ncu':>3} {'gc':>3} "
    head += f"{'host s':>6} {'est s':>6}"
    lines = [head]
    total = Cost("total")
    for c in costs:
        for f in (
            "compiles",
            "math_compiles",
            "dot_compiles",
            "tuned",
            "bench",
            "bench_budget_ms",
            "timed",
            "timed_budget_ms",
            "graphs",
            "ncu",
            "gc",
            "host_s",
        ):
            setattr(total, f, getattr(total, f) + getattr(c, f))
        total.first_graph |= c.first_graph
        if only is not None and c.name not in only:
            continue
        if only is None and c.estimate_s() < 0.5 and not c.error:
            continue
        lines.append(
            f"{c.name:10} {c.compiles:8} {c.tuned:5} {c.bench:5} {c.timed:5} {c.timed_budget_ms / 1e3:7.2f} "
            f"{c.graphs:6} {c.ncu:3} {c.gc:3} {c.host_s:6.2f} {c.estimate_s():6.1f}"
            + (f"  raised {c.error}" if c.error else "")
        )
    lines.append(
        f"{'total':10} {total.compiles:8} {total.tuned:5} {total.bench:5} {total.timed:5} "
        f"{total.timed_budget_ms / 1e3:7.2f} {total.graphs:6} {total.ncu:3} {total.gc:3} {total.host_s:6.2f} "
        f"{total.estimate_s():6.1f}"
    )
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("notebooks", nargs="*", type=Path, help="notebooks to count, cell by cell")
    ap.add_argument("--cells", default="", help="comma-separated nbval cell numbers to show (default: those >= 0.5 s)")
    ap.add_argument("--suite", default="", help="comma-separated suites (lesson02, ...) to count instead")
    ap.add_argument("--steps", default="", help="the suite's steps: comma-separated, 'all', or unset for its headline")
    ap.add_argument("--json", type=Path, help="also write every count to this file")
    ap.add_argument("--kernels", action="store_true", help="list the compiles of each shown cell by kernel")
    ap.add_argument("--verbose", action="store_true", help="let the cells print")
    ap.add_argument(
        "--recorded", metavar="GPU", help="take the autotuner choices recorded for GPU (h200) as that GPU would"
    )
    ap.add_argument(
        "--timed-full-gc",
        action="store_true",
        help="count a full gc.collect() per time_ms call (gpulab before 2026-12)",
    )
    args = ap.parse_args(argv)
    rows = {}
    for path in args.notebooks:
        costs = cost_notebook(path, not args.verbose, args.timed_full_gc, args.recorded)
        only = {f"Cell {c.strip()}" for c in args.cells.split(",") if c.strip()} or None
        print(f"\n{path.name} (est s: H200 machine, rough; counts exact)\n" + table(costs, only))
        if args.kernels:
            for c in costs:
                if c.kernels and (only is None or c.name in only):
                    print(f"  {c.name}: " + ", ".join(f"{k} {v}" for k, v in sorted(c.kernels.items())))
        rows[path.name] = [c.row() for c in costs]
    for key in (k.strip() for k in args.suite.split(",") if k.strip()):
        steps = None if not args.steps else () if args.steps == "all" else tuple(args.steps.split(","))
        c = cost_suite(key, steps, args.timed_full_gc, args.recorded)
        print(f"\nsuite {c.name}\n" + table([c], {c.name}))
        if args.kernels:
            print("  " + ", ".join(f"{k} {v}" for k, v in sorted(c.kernels.items())))
        rows[c.name] = c.row()
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
