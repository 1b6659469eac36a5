"""Checks shared by the exercise tests: the protocol every checker follows for a stub and for hints."""


def check_stub_not_attempted(check, n_args: int) -> None:
    """A launcher that raises NotImplementedError (the notebook's stub) is reported as not attempted, not as
    failed. ``n_args``: how many arguments the checker passes (inputs and ``out``)."""

    def stub(*args):
        assert len(args) == n_args, f"{check.__name__} passes {len(args)} arguments, expected {n_args}"
        raise NotImplementedError

    rep = check(stub)
    assert not rep.attempted and "not attempted" in str(rep), str(rep)


def check_hints_then_solution(check, capsys) -> None:
    """``hint(check)`` prints the hints one at a time ("hint i of n"), then points to ``show_solution``."""
    from gpulab.exercises import hint

    check._hints_shown = 0
    n = len(check.hints)
    assert n >= 1, f"{check.__name__} has no hints"
    try:
        for i in range(n):
            hint(check)
            assert f"hint {i + 1} of {n}" in capsys.readouterr().out
        hint(check)
        assert f"show_solution({check.__name__})" in capsys.readouterr().out
    finally:
        check._hints_shown = 0
