"""Every kernel of the collection compiled ahead of time for every GPU generation, on any machine.

``python -m gpulab.measure.targets`` compiles each kernel a lesson, a notebook or an exercise's solution launches, with the
dtypes, path and configurations ``gpulab.core.plan`` chooses on each GPU of ``gpulab.core.hardware``, for compute
capabilities 7.5 (T4), 8.0 (A100),
8.6 (A10), 8.9 (L4, RTX 4090) and 9.0 (H100, H200), and prints one row per kernel and target: ``ok``, or
the reason a path is not taken there (TMA only from 9.0, fp8 from 8.9, bf16 and tf32 tensor cores from 8.0)
with what is taken instead; tensor-core instructions in the PTX (``mma``: mma.sync and wgmma counted, 0 where a
tl.dot runs on FMA), registers per thread, spill bytes (stores + loads) and shared memory per block.

How, without a GPU: ``triton.compile(ASTSource(kernel, signature, constexprs), target=GPUTarget("cuda", cc,
32))`` runs Triton's whole pipeline down to a cubin with the ``ptxas`` Triton ships. The compiled kernel's
``n_regs`` and ``n_spills`` are only filled in when it is loaded onto a GPU, so registers and spills come
from ptxas's own report (Triton passes ``-v`` and prints the log under ``TRITON_DUMP_PTXAS_LOG=1``);
shared memory from the compiled metadata. A configuration that does not compile gets one line (``failures``):
the row, the kernel, the target, the launch and the compiler's first error line (``compile_error``), printed
after the table; the command then exits 1.

The kernels and their configurations are the rows of ``gpulab.measure.target_kernels`` (``LESSON_KERNELS``); this module
is the compile plumbing, the table and the command line. A row's kernel lives in ``gpulab/kernels``, in another
module (an exercise's solution, a test's), or in a notebook's code cells, which a worker writes to a module file
first (``notebook_kernel_source``: the cells' imports and ``@triton.jit`` functions).

Compiling needs real ``@triton.jit`` functions, but ``import gpulab`` sets ``TRITON_INTERPRET=1`` on a machine
without a GPU, and then kernels are defined for the interpreter. So the compiles run in worker processes
(``--worker``) that clear ``TRITON_INTERPRET`` after importing gpulab and before importing any kernel module;
this module imports no kernel module at its top, nor ``gpulab.measure.target_kernels`` (which imports them). Results are
cached per kernel, target and configuration (keyed by the kernel's file's text and Triton's version) under
``gpulab.measure.device.cache_dir()/targets``, each written atomically; a cache file that cannot be read is compiled
again (with a warning naming it), and a cache that cannot be written leaves the results uncached (with a
warning), never lost.

Flags: ``--cc 75,90`` or ``--cc 7.5,9.0`` (targets among ``CCS``), ``--only matmul,vector add`` (rows whose name
contains one of these; each must match a row), ``--all-configs`` (every configuration a row launches: the
autotuning candidates, the other head dimensions; not only the first), ``--jobs N`` (worker processes), ``--no-cache`` (neither read nor write the cache); ``--strided-layout
--cc 90``: the strided copy's blocked layout (``sizePerThread``) and PTX global loads and stores as the
coalescing counters launch it (lesson 06), instead of the table.
"""

from __future__ import annotations

import argparse
import ast
import atexit
import contextlib
import hashlib
import importlib
import importlib.util
import inspect
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..core import hardware, plan
from .device import cache_dir, write_json_atomic

if TYPE_CHECKING:
    from .target_kernels import Launch, LessonKernel

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


def gpus_of(cc: int) -> list[str]:
    """Names of the table's GPUs with compute capability ``cc`` (75 -> ["T4"])."""
    return [n for n, s in hardware.GPUS.items() if s.compute_capability and s.compute_capability == divmod(cc, 10)]


ROOT = Path(__file__).resolve().parents[2]  # the project: gpulab/, notebooks/, tests/


def module_name(module: str) -> str:
    """The importable name of a row's ``module``: a file of ``gpulab/kernels`` by its stem ("vector_add" ->
    "gpulab.kernels.vector_add"), any other module by its dotted name ("gpulab.exercises.ex00_solutions",
    "tests.compile_errors"); a notebook ("notebooks/00b_first_kernel.ipynb") keeps its path."""
    if module.endswith(".ipynb") or "." in module:
        return module
    return f"gpulab.kernels.{module}"


def source_file(module: str) -> Path:
    """The file that holds a row's ``module`` (a notebook, or ``<dotted name>.py`` under the project root).
    Raises FileNotFoundError naming the module when there is none."""
    name = module_name(module)
    path = ROOT / name if name.endswith(".ipynb") else ROOT / (name.replace(".", "/") + ".py")
    if not path.is_file():
        raise FileNotFoundError(f"module {module!r}: no file {path}")
    return path


_MAGIC = re.compile(r"^(\s*)[%!].*$")


def notebook_cells(path: Path) -> list[str]:
    """The code cells of the notebook at ``path``, each as Python source: IPython magics and shell lines (``%``,
    ``!``) become ``pass`` at their indentation, so that line numbers stay those of the cell."""
    cells = json.loads(Path(path).read_text())["cells"]
    out = []
    for cell in cells:
        if cell.get("cell_type") != "code":
            continue
        src = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        out.append("\n".join(_MAGIC.sub(r"\1pass", line) for line in src.split("\n")))
    return out


def is_jit(node) -> bool:
    """Whether the ``ast`` function definition ``node`` is decorated ``@triton.jit``, ``@triton.jit(...)``,
    ``@jit`` or ``@tl.core.jit``-like (an attribute or name ``jit``, called or not)."""
    for d in getattr(node, "decorator_list", ()):
        target = d.func if isinstance(d, ast.Call) else d
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", None)
        if name == "jit":
            return True
    return False


def notebook_kernel_source(path: Path) -> str:
    """One module's source for compiling the notebook's ``@triton.jit`` functions: its cells' top-level imports
    and those function definitions (nothing else of the cells runs), in cell order."""
    parts = []
    for src in notebook_cells(path):
        try:
            tree = ast.parse(src)
        except SyntaxError:  # a cell the learner is meant to complete: its kernels cannot be compiled either
            continue
        lines = src.split("\n")
        for node in tree.body:
            if isinstance(node, (ast.Import, ast.ImportFrom)) or (isinstance(node, ast.FunctionDef) and is_jit(node)):
                first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", ()))])
                parts.append("\n".join(lines[first - 1 : node.end_lineno]))
    return "\n\n".join(parts) + "\n"


_NOTEBOOK_MODULES: dict = {}


def _kernel_module(module: str):
    """The module of a row's kernel (``module_name``), imported when a worker compiles (after it cleared
    ``TRITON_INTERPRET``). A notebook's kernels are written to a temporary file (``notebook_kernel_source``) and
    imported from there: ``@triton.jit`` reads a function's source from its file."""
    name = module_name(module)
    if not name.endswith(".ipynb"):
        return importlib.import_module(name)
    if name not in _NOTEBOOK_MODULES:
        folder = Path(tempfile.mkdtemp(prefix="gpulab-notebook-"))
        atexit.register(shutil.rmtree, folder, True)
        stem = re.sub(r"\W", "_", Path(name).stem)
        path = folder / f"notebook_{stem}.py"
        path.write_text(notebook_kernel_source(source_file(module)))
        spec = importlib.util.spec_from_file_location(f"notebook_{stem}", path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod
        spec.loader.exec_module(mod)
        _NOTEBOOK_MODULES[name] = mod
    return _NOTEBOOK_MODULES[name]


def lesson_kernels() -> list[LessonKernel]:
    """``gpulab.measure.target_kernels.LESSON_KERNELS``: the rows of the table (imported here, not at the top: it imports
    the kernel modules, which a worker must import only after clearing ``TRITON_INTERPRET``)."""
    from .target_kernels import LESSON_KERNELS  # imports kernel modules: never in a worker

    return LESSON_KERNELS


@dataclass
class Row:
    """One lesson kernel on one target (``cc``): ``status`` is "ok" or why the lesson's path is not taken there
    (then ``instead`` names what is taken); ``configs`` holds one result dict per compiled configuration."""

    lesson_kernel: LessonKernel
    cc: int
    dtype: str
    status: str
    instead: str = ""
    configs: list = field(default_factory=list)  # [{"config", "regs", "spill_bytes", "smem", "fits", "error"}]

    @property
    def compiled(self) -> bool:
        return bool(self.configs) and all(not c.get("error") for c in self.configs)


# ---- jobs: what a worker compiles ----------------------------------------------------------------------------


def _signature_types(lk: LessonKernel, dtype: str) -> dict:
    """Argument -> type rule of the kernel, with the dtype filled in; the worker applies it to the parameters."""
    t = TRITON_TYPES[dtype]
    types = {k: v.replace("dtype", t) for k, v in lk.types.items()}
    types.update({p: f"*{t}" for p in lk.pointers if p not in types})
    return {"default_pointer": f"*{t}", "dtype": t, "types": types}


def _job(lk: LessonKernel, cc: int, dtype: str, launch: Launch) -> dict:
    """What a worker compiles: the kernel, the target, the launch, the argument types (JSON)."""
    return {
        "module": lk.module,
        "kernel": lk.kernel,
        "cc": cc,
        "constexprs": launch.constexprs,
        "num_warps": launch.num_warps,
        "num_stages": launch.num_stages,
        **_signature_types(lk, dtype),
    }


def _key(job: dict) -> str:
    import triton  # in the parent only: a worker imports Triton after clearing TRITON_INTERPRET

    path = source_file(job["module"])
    src = notebook_kernel_source(path).encode() if path.suffix == ".ipynb" else path.read_bytes()
    blob = json.dumps(job, sort_keys=True, default=str).encode() + src + triton.__version__.encode() + b"v3"
    return hashlib.sha256(blob).hexdigest()[:32]


def _selected(only, kernels=None) -> list[LessonKernel]:
    """The rows of ``kernels`` (default ``lesson_kernels()``) whose name contains one of the substrings ``only``
    (case-insensitive; all when empty). Raises ValueError naming a substring that matches no kernel, with the
    names known."""
    kernels = lesson_kernels() if kernels is None else list(kernels)
    if not only:
        return list(kernels)
    unmatched = [o for o in only if not any(o.lower() in lk.name.lower() for lk in kernels)]
    if unmatched:
        raise ValueError(
            f"only: {unmatched} match no kernel; the kernels are: " + ", ".join(repr(lk.name) for lk in kernels)
        )
    return [lk for lk in kernels if any(o.lower() in lk.name.lower() for o in only)]


def _launch_of(job: dict) -> dict:
    """What a failure line names of a job: its constexprs and launch options, as one string."""
    flags = ", ".join(f"{k}={v}" for k, v in job["constexprs"].items())
    return {"launch": f"{flags}, num_warps={job['num_warps']}, num_stages={job['num_stages']}".lstrip(", ")}


def plan_rows(ccs=CCS, only=(), all_configs: bool = False, kernels=None) -> tuple[list[Row], dict]:
    """The rows of the table (without results) and the jobs they need: ``{key: job}``; a row per kernel, target
    and element type (``LessonKernel.dtype``, then each of ``more_dtypes``). ``only``: substrings of kernel names
    to keep (``_selected``; raises ValueError for one that matches nothing); ``all_configs``: every launch of
    ``launches``, not only the first; ``kernels``: ``LessonKernel`` rows to compile instead of
    ``lesson_kernels()``."""
    rows, jobs = [], {}
    for lk in _selected(only, kernels):
        for cc in ccs:
            p = plan.for_gpu(hardware.get(PLANNED[cc]))
            for wanted in (lk.dtype, *lk.more_dtypes):
                dtype = p.dtype(wanted) if lk.dot and wanted != "fp64" else wanted
                if lk.needs and not plan.has(p.gpu, lk.needs):
                    rows.append(Row(lk, cc, dtype, f"not taken: {plan.FEATURES[lk.needs].why}", lk.instead))
                    continue
                status = "ok" if dtype == wanted else f"{dtype} instead of {wanted}: {plan.FEATURES[wanted].why}"
                if lk.dot and dtype == "fp32" and not plan.has(p.gpu, "tf32"):
                    status = f"ieee instead of tf32: {plan.FEATURES['tf32'].why}"
                row = Row(lk, cc, dtype, status, dtype if dtype != wanted else "")
                launches = lk.launches(p, dtype)
                for launch in launches if all_configs else launches[:1]:
                    job = _job(lk, cc, dtype, launch)
                    key = _key(job)
                    jobs[key] = job
                    row.configs.append(
                        {"config": launch.short(), "key": key, "limit": p.smem_per_block_bytes, **_launch_of(job)}
                    )
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
_ERROR_LINE = re.compile(r"\berror\b\s*:?\s*\S", re.IGNORECASE)


def _lines(text: str) -> list[str]:
    return [ln.strip() for ln in str(text).splitlines() if ln.strip()]


def _error_lines(text: str) -> list[str]:
    """The lines of ``text`` that say an error (``error:``, ``error :``: MLIR's and ptxas's reports)."""
    return [ln for ln in _lines(text) if _ERROR_LINE.search(ln)]


def compile_error(exc: BaseException, diagnostics: str = "") -> str:
    """One line for a failed ``triton.compile``: the exception's type, where in the source it arose and the
    compiler's first error line. For Triton's CompilationError (the front end: types, shapes, names), the
    innermost one (a helper's, not the call site's in the kernel): the function, the line number within it,
    that line, and its message's first line. For any other exception (a pass, ptxas), the first line that says
    an error, from the message or else from ``diagnostics`` (what MLIR printed to stderr), else the message's
    first line."""
    inner, seen = exc, set()
    while id(inner) not in seen:
        seen.add(id(inner))
        cause = inner.__cause__ or inner.__context__
        if cause is None or not hasattr(cause, "error_message"):
            break
        inner = cause
    where = ""
    node, src = getattr(inner, "node", None), getattr(inner, "src", None)
    if node is not None and hasattr(node, "lineno") and src:
        lines = src.split("\n")
        fn = re.search(r"def\s+(\w+)", src)
        code = lines[node.lineno - 1].split("  #")[0].strip() if 0 < node.lineno <= len(lines) else ""
        where = f" in {fn.group(1) if fn else '?'}, line {node.lineno} `{code}`"
    if hasattr(inner, "error_message"):
        cause = inner.__cause__ or inner.__context__
        found = _lines(inner.error_message or (str(cause) if cause is not None else ""))
    else:
        found = _error_lines(str(exc)) or _error_lines(diagnostics) or _lines(str(exc))
    first = found[0] if found else "(no message)"
    return f"{type(exc).__name__}{where}: {first}"[:400]


_SPILLS = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")


class _Captured:
    def __init__(self):
        self.file = tempfile.TemporaryFile()

    def read(self) -> str:
        self.file.seek(0)
        return self.file.read().decode(errors="replace")


@contextlib.contextmanager
def _stderr_captured():
    """Everything written to file descriptor 2 inside the block (MLIR's diagnostics are written there by C++, not
    through ``sys.stderr``), kept for ``.read()`` after it; nothing of it reaches the terminal."""
    captured = _Captured()
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        os.dup2(captured.file.fileno(), 2)
        yield captured
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


def _signature(fn, job: dict) -> tuple[dict, dict]:
    """``triton.compile``'s signature and constexprs of ``fn`` for ``job``. Raises TypeError when ``fn`` is not a
    ``@triton.jit`` function, ValueError naming the launch's constexprs the kernel lacks or those it needs and
    the launch leaves unset (no default)."""
    if not hasattr(fn, "params") or not hasattr(fn, "fn"):
        raise TypeError(f"{job['module']}.{job['kernel']} is not a @triton.jit function (got {type(fn).__name__})")
    defaults = {
        k: v.default for k, v in inspect.signature(fn.fn).parameters.items() if v.default is not inspect.Parameter.empty
    }
    names = {p.name for p in fn.params}
    unknown = sorted(set(job["constexprs"]) - names)
    if unknown:
        raise ValueError(f"the launch sets {unknown}, which {job['kernel']} does not take (it takes {sorted(names)})")
    signature, constexprs = {}, {}
    for p in fn.params:
        if p.is_constexpr:
            if p.name not in job["constexprs"] and p.name not in defaults:
                raise ValueError(
                    f"the launch leaves the constexpr {p.name} of {job['kernel']} unset (it has no default)"
                )
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
    return signature, constexprs


def compile_job(job: dict, done: dict | None = None) -> dict:
    """Compile one job (in a worker: needs real ``@triton.jit`` kernels). Returns tensor-core instructions in the
    PTX (``mma``), registers, spill bytes (stores + loads), shared memory in bytes, or ``error``: one line
    (``compile_error``) naming where the kernel failed and the compiler's first error line. ``done``: results by
    what Triton compiles (kernel, signature, constexprs, target, options), filled in here; two jobs that differ only
    in what does not reach the compiler (an argument type rule the kernel has no argument for) share one result,
    since Triton's cache would answer the second compile without running ptxas, whose report holds the registers."""
    try:
        fn = getattr(_kernel_module(job["module"]), job["kernel"])
        signature, constexprs = _signature(fn, job)
    except Exception as e:  # noqa: BLE001  (a row that names no kernel, or a launch it cannot take, is its error)
        return {"error": f"{type(e).__name__}: {_lines(str(e))[0] if _lines(str(e)) else ''}"[:400]}
    same = json.dumps(
        [job["module"], job["kernel"], job["cc"], signature, constexprs, job["num_warps"], job["num_stages"]],
        sort_keys=True,
        default=str,
    )
    done = {} if done is None else done
    if same not in done:
        done[same] = _compile(fn, signature, constexprs, job)
    return dict(done[same])


def _compile(fn, signature: dict, constexprs: dict, job: dict) -> dict:
    """``compile_job``'s compile of ``fn``: its result dict."""
    import triton  # here, not at the top: a worker imports Triton only after clearing TRITON_INTERPRET
    from triton.backends.compiler import GPUTarget  # (as above)
    from triton.compiler import ASTSource  # (as above)

    log = io.StringIO()
    try:
        with contextlib.redirect_stdout(log), _stderr_captured() as diagnostics:
            k = triton.compile(
                ASTSource(fn, signature, constexprs=constexprs),
                target=GPUTarget("cuda", job["cc"], 32),
                options={"num_warps": job["num_warps"], "num_stages": job["num_stages"]},
            )
    except Exception as e:  # noqa: BLE001  (the table reports a target the kernel does not compile for)
        return {"error": compile_error(e, diagnostics.read())}
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
    jobs = json.loads(Path(jobs_path).read_text())
    early = sorted({module_name(j["module"]) for j in jobs.values()} & set(sys.modules))
    if early or any(m.startswith("gpulab.kernels.") for m in sys.modules):
        raise RuntimeError(f"a kernel module was imported before the worker cleared TRITON_INTERPRET: {early}")
    done = {}
    results = {key: compile_job(job, done) for key, job in jobs.items()}
    Path(out_path).write_text(json.dumps(results))


def _run_workers(jobs: dict, n_workers: int) -> dict:
    """Compile ``jobs`` in ``n_workers`` processes; returns {key: result}."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(GPULAB_MODE="interpreter", TRITON_DUMP_PTXAS_LOG="1", TRITON_DEFAULT_FP_FUSION="1")
    keys = sorted(jobs, key=lambda k: (jobs[k]["module"] != "flash_attention", k))  # slow ones spread first
    shares = [keys[i::n_workers] for i in range(n_workers)]
    results = {}
    with tempfile.TemporaryDirectory(prefix="gpulab-targets-") as tmp:
        procs = []
        for i, share in enumerate(s for s in shares if s):
            # a fresh cache of its own for each worker: ptxas runs, and logs, for every compile (compile_job's
            # ``done`` answers a second compile of the same kernel)
            worker_env = dict(env, TRITON_CACHE_DIR=str(Path(tmp) / f"triton{i}"))
            jp, op = Path(tmp) / f"jobs{i}.json", Path(tmp) / f"out{i}.json"
            jp.write_text(json.dumps({k: jobs[k] for k in share}))
            procs.append(
                (
                    subprocess.Popen(
                        [sys.executable, "-m", "gpulab.measure.targets", "--worker", str(jp), str(op)],
                        env=worker_env,
                        cwd=ROOT,  # a row's module may be a test's or a notebook's, found from the project root
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

_SIZE_PER_THREAD = re.compile(r"#blocked\d* = #ttg\.blocked<\{sizePerThread = \[(\d+)\]")
_GLOBAL_OPS = re.compile(r"\b((?:ld|st)\.global[\w.]*)")


def compile_strided_layout(block: int, num_warps: int, dtype: str, contiguous: bool, cc: int = 90) -> dict:
    """Compile ``strided_copy_kernel`` (in a worker: needs the real ``@triton.jit`` kernel) as a launch on
    torch's allocations specializes it: both pointers and n (here 2**24) divisible by 16, stride a plain i32.
    Returns ``size_per_thread`` (every ``sizePerThread`` of the TTGIR's blocked layouts) and ``ptx``
    ({"ld.global.b32": count, ...}: global loads and stores in the PTX, each one per thread)."""
    import triton  # here, not at the top: a worker imports Triton only after clearing TRITON_INTERPRET
    from triton.backends.compiler import GPUTarget  # (as above)
    from triton.compiler import ASTSource  # (as above)

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


def strided_layouts(variants=None, cc: int = 90) -> list[dict]:
    """What Triton compiles ``gpulab.kernels.strided.strided_copy_kernel`` to for each variant
    ``(BLOCK, num_warps, dtype, CONTIGUOUS)`` (default ``gpulab.measure.target_kernels.STRIDED_VARIANTS``), ahead of time
    for compute capability ``cc`` (one worker process, a few seconds): a list of ``compile_strided_layout`` dicts.
    Raises RuntimeError when the worker fails."""
    if variants is None:
        from .target_kernels import STRIDED_VARIANTS as variants  # imports kernel modules: never in a worker
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(GPULAB_MODE="interpreter", TRITON_DEFAULT_FP_FUSION="1")
    todo = json.dumps([[int(b), int(w), str(d), bool(c), int(cc)] for b, w, d, c in variants])
    with tempfile.TemporaryDirectory(prefix="gpulab-layout-") as tmp:
        env["TRITON_CACHE_DIR"] = str(Path(tmp) / "triton")
        out = Path(tmp) / "layouts.json"
        proc = subprocess.run(
            [sys.executable, "-m", "gpulab.measure.targets", "--layout-worker", todo, str(out)],
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
    """The folder of cached compile results: ``gpulab.measure.device.cache_dir()/targets``."""
    return cache_dir() / "targets"


_RESULT_KEYS = {"mma", "regs", "spill_bytes", "smem"}


def _warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)


def _read_cache(cache: Path, keys) -> dict:
    """The cached results of ``keys`` in ``cache``: ``{key: result}``. A file that cannot be read, is not JSON
    or is not a compile result (a write cut short) counts as a miss: a warning names it, and the fresh result
    replaces it."""
    done = {}
    if not cache.is_dir():  # nothing cached yet (or no folder to cache in: writing says so)
        return done
    for key in keys:
        f = cache / f"{key}.json"
        try:
            result = json.loads(f.read_text())
        except FileNotFoundError:
            continue
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            _warn(f"the cache file {f} cannot be read ({type(e).__name__}: {e}); compiling it again")
            continue
        if not isinstance(result, dict) or not ("error" in result or _RESULT_KEYS <= set(result)):
            _warn(f"the cache file {f} holds no compile result; compiling it again")
            continue
        done[key] = result
    return done


def _write_cache(cache: Path, results: dict) -> None:
    """Write each result to ``cache``, atomically (``gpulab.measure.device.write_json_atomic``: a file is whole or
    absent). A cache that cannot be written gives one warning; the results are still returned."""
    try:
        for key, result in results.items():
            write_json_atomic(cache / f"{key}.json", result)
    except OSError as e:
        _warn(
            f"cannot write the compile cache in {cache} ({type(e).__name__}: {e}): the results are not cached; "
            "set GPULAB_CACHE_DIR to a folder you can write, or pass --no-cache"
        )


def run(
    ccs=CCS,
    only=(),
    all_configs: bool = False,
    jobs: int | None = None,
    use_cache: bool = True,
    kernels=None,
) -> list[Row]:
    """Compile every lesson kernel for every target in ``ccs`` and return the rows with their results.

    ``only``: substrings of kernel names to keep; ``all_configs``: every launch of each row, not only the first;
    ``jobs``: worker processes (default: the CPU count, at most 4); ``use_cache``: read and write
    ``cache_path()`` (False: neither); ``kernels``: ``LessonKernel`` rows to compile instead of
    ``lesson_kernels()``. Raises ValueError for a target outside ``CCS``, for no target, and for a substring of
    ``only`` that matches no kernel."""
    bad = [c for c in ccs if c not in CCS]
    if bad:
        raise ValueError(f"ccs must be among {CCS}, got {bad}")
    if not ccs:
        raise ValueError(f"ccs names no target; they are {CCS}")
    rows, todo = plan_rows(tuple(ccs), tuple(only), all_configs, kernels)
    cache = cache_path() if use_cache else None
    done = _read_cache(cache, todo) if cache else {}
    missing = {k: j for k, j in todo.items() if k not in done}
    if missing:
        n = jobs or min(4, os.cpu_count() or 1)
        fresh = _run_workers(missing, max(1, min(n, len(missing))))
        if cache:
            _write_cache(cache, fresh)
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


def failures(rows: list[Row]) -> list[str]:
    """One line per configuration that does not compile: the row, its kernel (module and function), the target
    with its GPUs, the element type, the configuration and the compiler's error (``compile_error``), e.g.
    ``sin 16-bit: tests.compile_errors.sin_16_bit_kernel does not compile for sm_75 (T4) in fp16, BLOCK=128,
    num_warps=4, num_stages=3: CompilationError in sin_16_bit_kernel, line 6 `s = tl.sin(x)`: Expected dtype
    ['fp32', 'fp64'] but got fp16``."""
    out = []
    for r in rows:
        lk = r.lesson_kernel
        for c in r.configs:
            if c.get("error"):
                out.append(
                    f"{lk.name}: {module_name(lk.module)}.{lk.kernel} does not compile for sm_{r.cc} "
                    f"({', '.join(gpus_of(r.cc))}) in {r.dtype}, {c['launch']}: {c['error']}"
                )
    return out


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
            f"{r.lesson_kernel.lesson:2} {r.lesson_kernel.name:36} {r.cc / 10:>4.1f} {', '.join(gpus_of(r.cc))[:30]:30} "
            f"{r.dtype:5} {first.get('mma', '-'):>5} {regs if regs is not None else '-':>4} {spill if spill is not None else '-':>6} "
            f"{smem:>8}  {_cell(r)}{configs}"
        )
    return "\n".join(out)


_ACCEPTED = ", ".join(map(str, CCS)) + " (or " + ", ".join(f"{c / 10:.1f}" for c in CCS) + ")"


def parse_ccs(text: str) -> tuple[int, ...]:
    """The targets of ``--cc``: comma-separated compute capabilities, each as 75 or 7.5 (``"7.5,90" -> (75, 90)``),
    in order, each once. Raises ValueError naming a value that is not one of ``CCS``, or when none is named,
    listing the accepted values."""
    out = []
    for part in text.split(","):
        t = part.strip()
        if not t:
            continue
        m = re.fullmatch(r"(\d)\.(\d)|(\d\d)", t)
        cc = None if m is None else int(m.group(3) or m.group(1) + m.group(2))
        if cc not in CCS:
            raise ValueError(f"{t!r} is not a target; accepted: {_ACCEPTED}")
        if cc not in out:
            out.append(cc)
    if not out:
        raise ValueError(f"{text!r} names no target; accepted: {_ACCEPTED}")
    return tuple(out)


def _ccs_arg(text: str) -> tuple[int, ...]:
    try:
        return parse_ccs(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _jobs_arg(text: str) -> int:
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of worker processes (an int >= 1)")
    return int(text)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m gpulab.measure.targets", description=__doc__.split("\n\n")[0])
    ap.add_argument("--cc", type=_ccs_arg, default=CCS, help=f"targets, e.g. 75,90 or 7.5,9.0; among {_ACCEPTED}")
    ap.add_argument("--only", default="", help="comma-separated substrings of kernel names (each must match one)")
    ap.add_argument("--all-configs", action="store_true", help="every configuration launched, not only the first")
    ap.add_argument("--jobs", type=_jobs_arg, default=None, help="worker processes")
    ap.add_argument("--no-cache", action="store_true", help="neither read nor write the cache of compile results")
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
        print(layout_table([r for cc in args.cc for r in strided_layouts(cc=cc)]))
        return 0
    only = tuple(o.strip() for o in args.only.split(",") if o.strip())
    try:
        _selected(only)
    except ValueError as e:
        ap.error(f"--{e}")
    rows = run(args.cc, only, args.all_configs, args.jobs, not args.no_cache)
    print(table(rows))
    failed = failures(rows)
    if failed:
        print(f"\n{len(failed)} configuration(s) do not compile:", *failed, sep="\n", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
