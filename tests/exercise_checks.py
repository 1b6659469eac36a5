"""Checks shared by the exercise tests: the protocol every checker follows for a stub and for hints; the GPU
compiler's recorded errors (tests/fixtures/compile_error_*.txt, made by tests/compile_errors.py)."""

from pathlib import Path


def check_stub_not_attempted(check, n_args: int) -> None:
    """A launcher that raises NotImplementedError (the notebook's stub) is reported as not attempted, not as
    failed. ``n_args``: how many arguments the checker passes (inputs and ``out``)."""

    def stub(*args):
        assert len(args) == n_args, f"{check.__name__} passes {len(args)} arguments, expected {n_args}"
        raise NotImplementedError

    rep = check(stub)
    assert not rep.attempted and "not attempted" in str(rep), str(rep)


def check_hints_then_solution(check, capsys) -> None:
    """``hint(check)`` prints the hints one at a time ("hint i of n"), then points to ``show_solution`` by the
    name the notebook calls the checker (``show_solution(ex01.check_scale_add)``)."""
    from gpulab.exercises import hint

    check._hints_shown = 0
    n = len(check.hints)
    assert n >= 1, f"{check.__name__} has no hints"
    try:
        for i in range(n):
            hint(check)
            assert f"hint {i + 1} of {n}" in capsys.readouterr().out
        hint(check)
        lesson = check.__module__.rsplit(".", 1)[-1]
        assert f"show_solution({lesson}.{check.__name__})" in capsys.readouterr().out
    finally:
        check._hints_shown = 0


def recorded_compile_error(name: str) -> Exception:
    """The recorded sm_90 compile error ``name`` rebuilt as Triton raises it: a CompilationError whose text is
    the fixture's first part, caused by the exception of its last part."""
    from triton.compiler.errors import CompilationError

    text = (Path(__file__).parent / "fixtures" / f"compile_error_{name}.txt").read_text()
    parts = [p.split("\n", 1) for p in text.split("\n", 1)[1].split("\n---\n")]
    assert parts[0][0] == "CompilationError", parts[0][0]
    err = CompilationError.__new__(CompilationError)
    err.message = parts[0][1].rstrip("\n")  # what str(err) returns
    cause_type = {"ValueError": ValueError, "AssertionError": AssertionError, "NameError": NameError}[parts[-1][0]]
    err.__cause__ = cause_type(parts[-1][1].rstrip("\n"))
    return err
