"""Every @triton.jit kernel compiles ahead of time for the GPUs the lessons plan for, on a CPU.

The interpreter runs a kernel that a GPU's compiler refuses (a 16-bit tl.sin, fp8 below sm_89, a dot of 8 rows),
so CI compiles them: ``gpulab.measure.targets`` (``triton.compile`` with ``GPUTarget``, no GPU needed) for each row of
``gpulab.measure.target_kernels.LESSON_KERNELS``. Here:

- coverage: every ``@triton.jit`` function in gpulab/**/*.py, in the notebooks' code cells and in tests/*.py is a
  row's kernel, a helper such a kernel calls, or in an allow-list below that says why it needs no row;
- the exhaustive compile (marked slow: minutes): every row, every configuration it launches, for 7.5, 8.0, 8.9
  and 9.0, and the test-only kernels of ``TEST_KERNELS``; the quick one (``make test``): every row's first
  configuration for 7.5 (9.0 for the rows 7.5 does not take);
- a kernel that only a GPU's compiler refuses (the 16-bit tl.sin of tests/compile_errors.py) is reported by this
  path with the kernel, the target and the compiler's first error line.
"""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import pytest

from gpulab.measure import target_kernels, targets
from gpulab.measure.target_kernels import LESSON_KERNELS, Launch, LessonKernel

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).parent / "fixtures"

#: The targets CI compiles every configuration for: the lessons' GPUs from the T4 to the H200 (8.6, the A10,
#: shares 8.0's compiler paths; ``python -m gpulab.measure.targets`` still compiles it).
CI_CCS = (75, 80, 89, 90)

# ---- what needs no row, and why -------------------------------------------------------------------------------

_STUB = "the learner's stub (its body is `pass`): launched only once the learner writes it; the solution's row compiles it written"
#: (file, function) -> why this @triton.jit function has no row of its own.
ALLOWED = {
    ("gpulab/exercises/ex03.py", "_cast_e4m3_kernel"): (
        "runs only in the interpreter: _interpreter_e4m3 raises on a GPU, where the GPU's own cast is judged"
    ),
    ("notebooks/03_precision.ipynb", "relu_cast_kernel"): _STUB,
    ("notebooks/04_fusion.ipynb", "sincos_fused_kernel"): _STUB,
    ("notebooks/05_recomputation.ipynb", "sigmoid3_fwd_kernel"): _STUB,
    ("notebooks/05_recomputation.ipynb", "sigmoid3_bwd_kernel"): _STUB,
    ("notebooks/06_coalescing.ipynb", "strided_copy_kernel"): _STUB,
    ("notebooks/06_coalescing.ipynb", "transpose_kernel"): _STUB,
    ("notebooks/07_tiling.ipynb", "tiled_matmul_kernel"): _STUB,
    ("notebooks/07b_waves.ipynb", "persistent_matmul_kernel"): _STUB,
    ("notebooks/08_flash_attention.ipynb", "flash_forward_kernel"): _STUB,
}
_FIXTURE = (
    "a checker's test fixture: the exercise's kernel right and deliberately wrong by constexpr flags (no mask, "
    "a wrong op, a wrong stride) or written to break a checker; the exercise's solution row compiles the right one"
)
_WRONG = (
    "deliberately wrong: the compile errors tests/fixtures/compile_error_*.txt record (python tests/compile_errors.py)"
)
#: test file -> (its @triton.jit functions that need no row, why).
ALLOWED_IN_TESTS = {
    "tests/compile_errors.py": (
        (
            "sin_16_bit_kernel",
            "exp_16_bit_kernel",
            "arange_not_power_of_2_kernel",
            "dot_too_small_kernel",
            "undefined_name_kernel",
        ),
        _WRONG,
    ),
    "tests/test_capstone.py": (("kernel",), "an unmasked bias + GELU, deliberately wrong for ex09's checker"),
    "tests/test_core_patches.py": (
        ("_double", "_double_by_helper", "_twice"),
        "small kernels the patch tests launch under the interpreter",
    ),
    "tests/test_exercises_ex00.py": (("_add", "_reverse"), _FIXTURE),
    "tests/test_exercises_ex02.py": (("_loop", "gather_unmasked"), _FIXTURE),
    "tests/test_exercises_ex03.py": (("_relu",), _FIXTURE),
    "tests/test_exercises_ex03_quantize.py": (("_quant",), _FIXTURE),
    "tests/test_exercises_ex04.py": (("_sincos", "_chain"), _FIXTURE),
    "tests/test_exercises_ex05.py": (("_fwd", "_bwd"), _FIXTURE),
    "tests/test_exercises_ex06.py": (
        ("_strided", "_transpose", "_transpose_a_stride", "_transpose_load_stride"),
        _FIXTURE,
    ),
    "tests/test_exercises_ex07.py": (
        ("_matmul_variant_kernel", "_persistent_variant_kernel", "_one_wave_kernel"),
        _FIXTURE,
    ),
    "tests/test_exercises_ex08.py": (("_flash",), _FIXTURE),
    "tests/test_exercises_ex08b.py": (("_copy_kernel",), _FIXTURE),
    "tests/test_exercises_ex09.py": (("_row_gelu",), _FIXTURE),
    "tests/test_kernelcheck.py": (("_scale_add",), _FIXTURE),
    "tests/test_exercises_mistakes_named.py": (
        (
            "_bias_gelu_variant_kernel",
            "_copy_unstrided_kernel",
            "_matmul_2d_kernel",
            "_persistent_carried_kernel",
            "_scale_add_swapped_kernel",
            "_sincos_unmasked_kernel",
        ),
        _FIXTURE,
    ),
    "tests/test_exercises_profile.py": (
        ("_copy_tile_kernel", "_unmasked_transpose_kernel", "_unstrided_copy_kernel"),
        _FIXTURE,
    ),
    "tests/test_kernelcheck_classes.py": (
        ("_add_from", "_add_order", "_add_quirk", "_add_stuck", "_copy", "_scratch", "add_kernel", "cast", "quantize"),
        _FIXTURE,
    ),
    "tests/test_kernelcheck_hostile.py": (
        ("_add", "keep", "short_store", "one_per_thread", "_sincos", "_transpose"),
        _FIXTURE,
    ),
    "tests/test_kernelcheck_offsets.py": (
        ("_scale_add", "_add", "_sincos_unmasked_load", "_scale_add_mask_le", "_scale_add_from"),
        _FIXTURE,
    ),
    "tests/test_kernelcheck_learner.py": (
        (
            "_matmul_mistake",
            "_add_without_pid",
            "_add_mask_le",
            "_gated_residual_x_g_swapped",
            "_scale_add_fp16",
            "_bias_gelu_row_bias",
            "_gated_residual_g_shifted",
            "_quantize_times_scale",
            "_bias_gelu_rows",
            "_quantize_scales_unmasked",
            "_reverse_each_block",
            "_loop_block_trips",
            "_sincos_sum",
            "_sigmoid3_bwd_without_inner_slope",
        ),
        _FIXTURE,
    ),
}

#: The tests' own kernels that are right and launched as they are: compiled by the exhaustive test, as the rows.
TEST_KERNELS = [
    LessonKernel(lesson="-", name="test: a loop over a reduced bound", module="tests.test_triton_compat",
                 kernel="_repeat", dtype="fp32", launches=lambda p, dtype: [Launch({"BLOCK": 64})],
                 types={"t_ptr": "*i32"}),
    LessonKernel(lesson="-", name="test: the grouped launch order", module="tests.test_matmul_steps",
                 kernel="_order_kernel", dtype="fp32", types={"out_ptr": "*i32"},
                 launches=lambda p, dtype: [Launch({"BLOCK_M": 16, "BLOCK_N": 16, "GROUP_M": g}) for g in (1, 2)]),
    LessonKernel(lesson="-", name="test: an fp32 dot in each input precision", module="tests.test_interpreter_fidelity",
                 kernel="_dot_kernel", dtype="fp32",
                 launches=lambda p, dtype: [Launch({"M": 16, "N": 16, "K": 64, "PREC": prec})
                                            for prec in ("default", "ieee", "tf32", "tf32x3")]),
]  # fmt: skip

#: (row, target) -> why it does not compile there; the exhaustive test fails when one of these compiles (then
#: remove it) or when any other row fails.
KNOWN_FAILURES = {
    ("ex03 quantize fp8 (solution)", cc): (
        "fp8e4nv (e4m3) needs sm_89: check_quantize_fp8 launches the learner's kernel on any GPU, and on a T4 or an "
        "A100 it cannot compile (the checker should say so and skip)"
    )
    for cc in (75, 80, 86)
}


# ---- finding the @triton.jit functions ---------------------------------------------------------------------


def _calls(node) -> set[str]:
    """Names a function calls: ``f(...)`` and ``module.f(...)`` (the attribute's last name)."""
    out = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Call):
            f = n.func
            out.add(f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else "")
    return out


def _jit_functions(tree) -> dict[str, ast.FunctionDef]:
    """Every @triton.jit function of a parsed file, nested ones included, by name."""
    return {n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and targets.is_jit(n)}


def _sources() -> dict[str, list[str]]:
    """Relative path -> the Python sources to scan (a notebook: its code cells)."""
    out = {}
    for p in sorted((ROOT / "gpulab").rglob("*.py")) + sorted((ROOT / "tests").glob("*.py")):
        out[str(p.relative_to(ROOT))] = [p.read_text()]
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        out[str(nb.relative_to(ROOT))] = targets.notebook_cells(nb)
    return out


def jit_inventory() -> dict[tuple[str, str], tuple[ast.FunctionDef, set]]:
    """(relative path, function name) -> (its definition, the names of the other @triton.jit functions of its file
    that it calls). A notebook's cells are one file."""
    found = {}
    for path, sources in _sources().items():
        jits = {}
        for src in sources:
            try:
                jits.update(_jit_functions(ast.parse(src)))
            except SyntaxError:  # a cell with a learner's blank to fill
                continue
        for name, node in jits.items():
            found[(path, name)] = (node, _calls(node) & set(jits))
    return found


def _row_kernels(kernels=LESSON_KERNELS) -> set[tuple[str, str]]:
    return {(str(targets.source_file(lk.module).relative_to(ROOT)), lk.kernel) for lk in kernels}


def _reached(roots: set, inventory: dict) -> set:
    """``roots`` and every @triton.jit function of the same file they call, transitively."""
    seen, todo = set(), list(roots)
    while todo:
        key = todo.pop()
        if key in seen or key not in inventory:
            continue
        seen.add(key)
        todo += [(key[0], callee) for callee in inventory[key][1]]
    return seen


def _allowed() -> dict:
    out = dict(ALLOWED)
    for path, (names, why) in ALLOWED_IN_TESTS.items():
        out.update({(path, n): why for n in names})
    return out


def test_every_jit_function_has_a_row_or_a_reason():
    inventory = jit_inventory()
    assert len(inventory) > 60  # the scan sees the package, the notebooks and the tests
    rows = _row_kernels([*LESSON_KERNELS, *TEST_KERNELS])
    covered = _reached(rows & set(inventory), inventory)
    missing = sorted(set(inventory) - covered - set(_allowed()))
    assert not missing, (
        "these @triton.jit functions have no gpulab.measure.targets row (gpulab/measure/target_kernels.py LESSON_KERNELS), are "
        "called by no kernel that has one, and are in no allow-list of tests/test_compile_coverage.py: "
        + ", ".join(f"{p}::{n}" for p, n in missing)
    )


def test_rows_and_allow_lists_name_what_exists():
    """Each row names a @triton.jit function in its file; each allow-listed function exists and has no row (a stub
    allowed as a stub has a body of `pass`)."""
    inventory = jit_inventory()
    rows = _row_kernels([*LESSON_KERNELS, *TEST_KERNELS])
    assert not rows - set(inventory), sorted(rows - set(inventory))
    allowed = _allowed()
    assert not set(allowed) - set(inventory), sorted(set(allowed) - set(inventory))
    assert not set(allowed) & rows, sorted(set(allowed) & rows)
    for key, why in allowed.items():
        if why == _STUB:
            body = [s for s in inventory[key][0].body if not isinstance(s, ast.Expr)]  # a docstring may stay
            assert [type(s) for s in body] == [ast.Pass], key


def test_a_kernel_without_a_row_is_named(monkeypatch):
    """The coverage check names a kernel missing from the rows, and counts a helper only its kernel calls."""
    inventory = jit_inventory()
    kept = [lk for lk in LESSON_KERNELS if lk.kernel != "sigmoid3_kernel"]
    covered = _reached(_row_kernels(kept) & set(inventory), inventory)
    assert ("gpulab/kernels/sigmoid3.py", "sigmoid3_kernel") not in covered
    assert ("gpulab/kernels/sigmoid3.py", "_sigmoid_and_slope") in covered  # the backward calls it too
    kept = [lk for lk in kept if lk.kernel != "sigmoid3_backward_kernel"]
    covered = _reached(_row_kernels(kept) & set(inventory), inventory)
    assert ("gpulab/kernels/sigmoid3.py", "_sigmoid_and_slope") not in covered


# ---- the solutions' rows launch what their launchers launch --------------------------------------------------

#: row -> (launcher in its module, {constexpr: the launcher's parameter whose default it takes}): every row of an
#: exercise's hidden solution, and the rows of the gpulab kernels a solution shows (its module's ``SHOWN``).
SOLUTION_LAUNCHERS = {
    "ex00 add (solution)": ("add", {"BLOCK": "block"}),
    "ex00 reverse (solution)": ("reverse", {"BLOCK": "block"}),
    "ex01 scale add (solution)": ("scale_add", {"BLOCK": "block"}),
    "ex02 loop grouped (solution)": ("loop_grouped", {"BLOCK": "block"}),
    "ex03 relu cast (solution)": ("relu_cast", {"BLOCK": "block"}),
    "ex03 relu cast from fp32 (solution)": ("relu_cast", {"BLOCK": "block"}),
    "ex03 quantize fp8 (solution)": ("quantize_fp8", {"ROWS": "rows"}),
    "ex04 sin^2+cos^2 fused (solution)": ("sincos_fused", {"BLOCK": "block"}),
    "ex04 gated residual (solution)": ("gated_residual", {"BLOCK": "block"}),
    "three sigmoids forward, teaching": ("sigmoid3_fwd", {"BLOCK": "block"}),
    "three sigmoids backward, teaching": ("sigmoid3_bwd", {"BLOCK": "block"}),
    "ex06 strided copy (solution)": ("strided_copy", {"BLOCK": "block"}),
    "ex06 transpose (solution)": ("transpose", {"BLOCK": "block"}),
    "ex07 tiled matmul (solution)": (
        "tiled_matmul",
        {"BLOCK_M": "block_m", "BLOCK_N": "block_n", "BLOCK_K": "block_k"},
    ),
    "ex07b persistent matmul (solution)": (
        "persistent_matmul",
        {"BLOCK_M": "block_m", "BLOCK_N": "block_n", "BLOCK_K": "block_k"},
    ),
    "bias + GELU fused": ("bias_gelu", {"BLOCK": "block"}),
    **{
        f"ex08 flash forward{c} (solution)": ("flash_forward", {"BLOCK_M": "block_m", "BLOCK_N": "block_n"})
        for c in ("", " causal")
    },
    **{
        f"ex08b flash backward {part}{c} (solution)": (
            "flash_backward_kernel",
            {"BLOCK_M": "block_m", "BLOCK_N": "block_n"},
        )
        for part in ("dk, dv", "dq")
        for c in ("", " causal")
    },
}


def test_solution_rows_launch_the_launchers_defaults():
    import importlib
    import pkgutil

    import gpulab.exercises
    from gpulab.core import hardware, plan

    p = plan.for_gpu(hardware.get("H200"))
    solutions = [
        importlib.import_module(f"gpulab.exercises.{m.name}")
        for m in pkgutil.iter_modules(gpulab.exercises.__path__)
        if m.name.endswith("_solutions")
    ]
    shown = [getattr(k, "fn", k) for mod in solutions for k in getattr(mod, "SHOWN", ())]  # a kernel's function
    shown = {(fn.__module__, fn.__name__) for fn in shown}  # the gpulab kernels and launchers a solution shows
    solution_rows = [
        lk
        for lk in LESSON_KERNELS
        if lk.module.startswith("gpulab.exercises.") or (targets.module_name(lk.module), lk.kernel) in shown
    ]
    assert sorted(lk.name for lk in solution_rows) == sorted(SOLUTION_LAUNCHERS)
    for lk in solution_rows:
        launcher, params = SOLUTION_LAUNCHERS[lk.name]
        fn = getattr(importlib.import_module(targets.module_name(lk.module)), launcher)
        defaults = {k: v.default for k, v in inspect.signature(fn).parameters.items()}
        source = inspect.getsource(fn)
        assert f"{lk.kernel}[" in source, (lk.name, launcher)  # the launcher launches the row's kernel
        for launch in lk.launches(p, lk.dtype):
            for constexpr, param in params.items():
                assert launch.constexprs[constexpr] == defaults[param], (lk.name, constexpr)


def test_exercise_head_dims_are_the_checkers_and_the_races():
    from gpulab.exercises import ex08, ex08b, race

    used = {*ex08.FLASH_HEAD_DIMS, *ex08b.BACKWARD_HEAD_DIMS, race._SHAPE08["d"]}
    assert set(target_kernels.EXERCISE_HEAD_DIMS) == used


# ---- compiling: the quick check, the exhaustive one, and a compile error made plain ----------------------------


@pytest.fixture
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setattr(targets, "cache_path", lambda: tmp_path / "targets")


def _failed(rows) -> set:
    return {(r.lesson_kernel.name, r.cc) for r in rows if any(c.get("error") for c in r.configs)}


def test_every_row_compiles_its_first_configuration(own_cache):
    """Each row's first configuration (the one taken without autotuning), in each of its element types, for 7.5
    (the T4: no bf16 tensor cores, tl.dot on FMA, 64 KiB of shared memory a block); the rows not taken there (TMA)
    for 9.0. The bf16, tf32 and fp8 paths of 8.0 and up are the exhaustive test's."""
    rows = targets.run((75,), jobs=2)
    untaken = {r.lesson_kernel.name for r in rows if not r.configs}
    assert untaken and all("TMA" in name for name in untaken)
    rows += targets.run((90,), jobs=2, kernels=[lk for lk in LESSON_KERNELS if lk.name in untaken])
    known = {k for k in KNOWN_FAILURES if k[1] == 75}
    failed = _failed(rows)
    assert failed == known, "\n".join(targets.failures([r for r in rows if (r.lesson_kernel.name, r.cc) not in known]))
    compiled = [c for r in rows for c in r.configs if not c.get("error")]
    assert len(compiled) > 100 and all(c["regs"] and c["smem"] >= 0 for c in compiled)
    assert {r.cc for r in rows if r.configs and r.lesson_kernel.name in untaken} == {90}


@pytest.mark.slow
def test_every_configuration_compiles_for_every_target(own_cache):
    """Every row, every configuration it launches (autotuning candidates, head dimensions), each element type,
    for ``CI_CCS``; and the tests' own kernels: about 1,300 compiles, some 20 CPU-minutes with Triton 3.9 (the
    production attention's 322 are most of them), so ``make test-all`` runs it and ``make test`` does not."""
    rows = targets.run(CI_CCS, all_configs=True)  # workers: the CPU count, at most 4
    rows += targets.run(CI_CCS, all_configs=True, kernels=TEST_KERNELS)
    known = {k for k in KNOWN_FAILURES if k[1] in CI_CCS}
    failed = _failed(rows)
    assert failed == known, "\n".join(targets.failures([r for r in rows if (r.lesson_kernel.name, r.cc) not in known]))
    n_configs = {r.lesson_kernel.name: len(r.configs) for r in rows if r.cc == 90 and r.dtype == r.lesson_kernel.dtype}
    assert n_configs["sin^2+cos^2 fused"] == len(target_kernels.sincos.AUTOTUNE_CONFIGS)  # every candidate


def _sin_row(dtype: str) -> LessonKernel:
    return LessonKernel(lesson="-", name=f"sin {dtype}", module="tests.compile_errors", kernel="sin_16_bit_kernel",
                        dtype=dtype, launches=lambda p, d: [Launch({"BLOCK": 128})])  # fmt: skip


def _fixture_error_line(name: str) -> str:
    """The compiler's message in a recorded fixture: the first line after the source excerpt's caret."""
    lines = (FIXTURES / f"compile_error_{name}.txt").read_text().splitlines()
    caret = next(i for i, ln in enumerate(lines) if ln.strip() == "^")
    return lines[caret + 1].strip()


def test_a_16_bit_sin_is_reported_with_kernel_target_and_first_error_line(own_cache, capsys, monkeypatch):
    """The interpreter runs tl.sin on fp16; a GPU's compiler refuses it. Compiled here for 7.5 and 9.0, it fails on
    both with one line naming the kernel, the target, the element type, the launch, the source line and the
    compiler's message (tests/fixtures/compile_error_sin_fp16.txt records it); in fp32 it compiles."""
    rows = targets.run((75, 90), kernels=[_sin_row("fp16"), _sin_row("bf16"), _sin_row("fp32")], jobs=2)
    assert _failed(rows) == {(f"sin {d}", cc) for d in ("fp16", "bf16") for cc in (75, 90)}
    lines = targets.failures(rows)
    assert len(lines) == 4
    want = _fixture_error_line("sin_fp16")
    assert want == "Expected dtype ['fp32', 'fp64'] but got fp16"
    (t4,) = [ln for ln in lines if ln.startswith("sin fp16:") and "sm_75" in ln]
    assert t4.startswith("sin fp16: tests.compile_errors.sin_16_bit_kernel does not compile for sm_75 (T4) in fp16")
    assert "BLOCK=128, num_warps=4, num_stages=3" in t4
    assert "CompilationError in sin_16_bit_kernel, line 6 `s = tl.sin(x)" in t4 and t4.endswith(want)
    (h200,) = [ln for ln in lines if ln.startswith("sin bf16:") and "sm_90" in ln]
    assert "(H100 SXM, H100 PCIe, H200)" in h200 and h200.endswith(_fixture_error_line("sin_bf16"))
    # the command line prints the same lines, after the table, and exits 1
    monkeypatch.setattr(targets, "lesson_kernels", lambda: [_sin_row("fp16")])
    assert targets.main(["--cc", "75", "--no-cache", "--jobs", "1"]) == 1
    out, err = capsys.readouterr()
    assert "FAILS to compile" in out and "1 configuration(s) do not compile:" in err
    assert re.search(r"sm_75 \(T4\) in fp16, .*line 6 `s = tl\.sin\(x\)`.*got fp16$", err.strip(), re.M)
