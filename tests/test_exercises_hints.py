"""Hints guide without giving the code: no hint of any checker in ex00-ex10 holds a statement of that checker's
solution (the source ``show_solution`` prints), nor the right-hand side of one of its assignments, nor one of its
index expressions (a ``%`` or ``//``, as in ``(r - s) % p``). Compared after
``ast.unparse`` (and as written) with all whitespace removed, so that spacing or line breaks do not hide a copied
line. Statements every kernel shares with the code on screen are not counted: imports, ``def`` lines, docstrings,
a bare ``return``/``pass``, the copy kernel's skeleton that lesson 00b prints (``SKELETON``); a right-hand side
that is a bare call of an API with plain arguments (``tl.program_id(0)``) names a function, which a hint may.
Each kernel exercise gives at least two hints, and none holds a line of its hidden solution module (one line of a
statement written over several included)."""

import ast
import importlib
import re
import textwrap

import pytest

from gpulab.exercises import solution_source

LESSONS = ("ex00", "ex01", "ex02", "ex03", "ex04", "ex05", "ex06", "ex07", "ex08", "ex08b", "ex09", "ex10")
#: The copy kernel's lines (lesson 00b prints them before any exercise), squashed: a hint may use them.
SKELETON = {
    "pid=tl.program_id(0)",
    "offs=pid*block+tl.arange(0,block)",
    "pid*block+tl.arange(0,block)",
    "mask=offs<n",
    "offs<n",
    "n=x.numel()",
}
#: Shorter fragments are names, not code (``x = y``).
MIN_CHARS = 6
#: Checkers of lessons 05-09 whose hints still hold solution code (their files are rewritten elsewhere): each
#: entry must fail this test (strict), so that the list shrinks as they are fixed.
KNOWN_LEAKS: set[str] = set()  # checkers whose hints are known to hold solution code (strict xfail)


def _squash(text: str) -> str:
    return re.sub(r"\s+", "", text).lower()  # BLOCK or block: the same code


def _bare_call(node) -> bool:
    """A call such as tl.program_id(0) or tl.arange(0, BLOCK): a function named with plain arguments."""
    return isinstance(node, ast.Call) and all(isinstance(a, (ast.Name, ast.Constant)) for a in node.args)


def solution_fragments(checker) -> set[str]:
    """The squashed statements (compound ones by their header) and assignment right-hand sides of the source that
    ``show_solution(checker)`` prints (``solution_source``), less the shared skeleton (module docstring)."""
    src = textwrap.dedent(solution_source(checker))
    tree = ast.parse(src)
    out = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.stmt) or isinstance(
            node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.Pass, ast.ClassDef)
        ):
            continue
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # a docstring
        if isinstance(node, ast.Return) and (node.value is None or isinstance(node.value, (ast.Name, ast.Constant))):
            continue
        compound = isinstance(node, (ast.For, ast.While, ast.If, ast.With))
        for text in (ast.unparse(node), ast.get_source_segment(src, node) or ""):
            out.add(_squash(text.splitlines()[0] if compound else text))  # a compound statement: its header only
        for sub in ast.walk(node):  # index arithmetic (chunk (r - s) % p, pid // tiles): the heart of a solution
            if isinstance(sub, ast.BinOp) and isinstance(sub.op, (ast.Mod, ast.FloorDiv)):
                out.add(_squash(ast.unparse(sub)))
        value = getattr(node, "value", None)
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and value is not None and not _bare_call(value):
            out.add(_squash(ast.unparse(value)))
            out.add(_squash(ast.get_source_segment(src, value) or ""))
    return {f for f in out if len(f) >= MIN_CHARS and f not in SKELETON}


def leaked(checker) -> list[tuple[int, str]]:
    """(hint number, fragment) for each solution fragment found in a hint."""
    return [
        (i + 1, f)
        for i, h in enumerate(getattr(checker, "hints", ()))
        for f in sorted(solution_fragments(checker))
        if f in _squash(h)
    ]


def _checkers():
    for lesson in LESSONS:
        mod = importlib.import_module(f"gpulab.exercises.{lesson}")
        for name, obj in sorted(vars(mod).items()):
            if name.startswith("check_") and callable(obj) and hasattr(obj, "solution"):
                qual = f"{lesson}.{name}"
                marks = [pytest.mark.xfail(strict=True, reason="hints rewritten elsewhere")] * (qual in KNOWN_LEAKS)
                yield pytest.param(obj, id=qual, marks=marks)


#: Exercises whose solution is torch code, not a Triton kernel (a ring all-reduce over ``Group``'s sends).
TORCH_SOLUTIONS = {"ex10.check_ring_all_reduce"}


@pytest.mark.parametrize(
    "checker", [c for c in _checkers() if hasattr(c.values[0], "solution_module") and c.id not in TORCH_SOLUTIONS]
)
def test_a_kernel_solution_shows_its_kernel_and_launcher(checker):
    """What ``show_solution`` prints for a kernel exercise holds a kernel and the launcher the checker runs, whether
    the solution module writes them or shows them from gpulab/kernels (its ``SHOWN``)."""
    src = solution_source(checker)
    assert "@triton.jit" in src and f"def {checker.solution.__name__}(" in src, checker.__name__


@pytest.mark.parametrize("checker", list(_checkers()))
def test_no_hint_holds_the_solutions_code(checker):
    found = leaked(checker)
    assert not found, f"{checker.__module__}.{checker.__name__}: hints hold solution code: {found}"


def test_the_detector_sees_a_copied_line_and_a_copied_expression():
    from gpulab.exercises import ex03, ex04

    sol = ex04.check_sincos_fused
    frags = solution_fragments(sol)
    assert "y=s*s-c*c" in frags and "s*s-c*c" in frags  # an assignment, and its right-hand side
    assert not any(f.startswith(("import", "def", "@")) for f in frags)
    assert "s=tl.sin(x)" in frags and "tl.sin(x)" not in frags  # a statement counts; naming tl.sin does not
    assert "mask=offs<n" not in frags  # the copy kernel's skeleton
    old = sol.hints
    try:
        sol.hints = ["keep the squares in registers and return s * s  -  c * c"]  # an expression, respaced
        assert leaked(sol) == [(1, "s*s-c*c")]
        sol.hints = ["for each block: amax = tl.max(tl.abs(x),\n axis=1)"]
        assert leaked(sol) == []  # not this checker's solution ...
        assert leaked(ex03.check_quantize_fp8) == []
        ex03.check_quantize_fp8.hints, q_old = sol.hints, ex03.check_quantize_fp8.hints
        try:
            assert (1, "tl.max(tl.abs(x),axis=1)") in leaked(ex03.check_quantize_fp8)  # ... but this one's
        finally:
            ex03.check_quantize_fp8.hints = q_old
    finally:
        sol.hints = old


def _own_functions_called(checker) -> set[str]:
    """The functions of the checker's lesson module that the source ``show_solution`` prints calls (by name): a
    hint naming one hands over a call that computes the answer."""
    mod = importlib.import_module(checker.__module__)
    src = textwrap.dedent(solution_source(checker))
    names = {n.id for n in ast.walk(ast.parse(src)) if isinstance(n, ast.Name)}
    names |= {n.attr for n in ast.walk(ast.parse(src)) if isinstance(n, ast.Attribute)}
    return {
        n
        for n in names
        if callable(getattr(mod, n, None)) and getattr(getattr(mod, n), "__module__", "") == mod.__name__
    }


@pytest.mark.parametrize("checker", list(_checkers()))
def test_no_hint_names_a_function_the_solution_calls(checker):
    named = [
        (i + 1, f)
        for i, h in enumerate(getattr(checker, "hints", ()))
        for f in _own_functions_called(checker)
        if f in h
    ]
    assert not named, f"{checker.__module__}.{checker.__name__}: hints name the answer's own functions: {named}"


#: Words that send a learner to copy a listing rather than to think through it.
COPY_WORDS = re.compile(r"line for line|line by line|verbatim|copy (it|them|the (code|listing|lines?))", re.I)


@pytest.mark.parametrize("checker", list(_checkers()))
def test_no_hint_asks_to_copy_a_listing(checker):
    said = [(i + 1, m.group(0)) for i, h in enumerate(getattr(checker, "hints", ())) if (m := COPY_WORDS.search(h))]
    assert not said, f"{checker.__module__}.{checker.__name__}: hints ask to copy: {said}"


def _solution_lines(source: str) -> set[str]:
    """The hidden solution's lines as ``show_solution`` prints them (``source``), comments and whitespace dropped,
    those of 16 characters or more that are code (not a ``def``, decorator, docstring or import line); a line
    holding several statements split."""
    out = set()
    for line in source.splitlines():
        code = re.sub(r"\s+", "", line.split("#")[0])
        if len(code) >= 16 and not code.startswith(("def", "@", '"""', "import", "from")):
            out |= {part for part in code.split(";") if len(part) >= 16}
    return out


@pytest.mark.parametrize("checker", [c for c in _checkers() if hasattr(c.values[0], "solution_module")])
def test_no_hint_of_a_kernel_exercise_holds_a_line_of_its_solution_module(checker):
    lines = _solution_lines(solution_source(checker))
    assert lines, "the solution module has code to compare with"
    assert len(checker.hints) >= 2
    for i, h in enumerate(checker.hints):
        leaked_lines = [line for line in lines if line in re.sub(r"\s+", "", h)]
        assert not leaked_lines, f"{checker.__name__} hint {i + 1} holds the solution's {leaked_lines[0]!r}"
