"""No hint of lessons 05 to 07's kernel exercises is the solution: a hint names the idea and the step, and no
statement of the hidden solution's kernel (whitespace aside) appears in any hint (issue 25, item 1)."""

import gpulab  # noqa: F401  (first: it sets TRITON_INTERPRET=1 before triton is imported)  # isort: skip
import inspect
import re

import pytest

from gpulab.exercises import ex05, ex06, ex07

CHECKERS = [
    ex05.check_sigmoid3_fwd,
    ex05.check_sigmoid3_bwd,
    ex06.check_strided_copy,
    ex06.check_transpose,
    ex07.check_tiled_matmul,
    ex07.check_persistent_matmul,
]


def _statements(module) -> set[str]:
    """The solution module's statements (comments and blank space dropped), those long enough to be code."""
    out = set()
    for line in inspect.getsource(module).splitlines():
        code = re.sub(r"\s+", "", line.split("#")[0])
        if len(code) >= 16 and not code.startswith(("def", "@", '"""', "import", "from")):
            out |= {part for part in code.split(";") if len(part) >= 16}
    return out


@pytest.mark.parametrize("check", CHECKERS, ids=lambda c: c.__name__)
def test_no_hint_holds_a_statement_of_the_solution(check):
    statements = _statements(check.solution_module)
    assert statements, "the solution module has code to compare with"
    assert len(check.hints) >= 2
    for i, h in enumerate(check.hints):
        flat = re.sub(r"\s+", "", h)
        leaked = [s for s in statements if s in flat]
        assert not leaked, f"{check.__name__} hint {i + 1} holds the solution's {leaked[0]!r}"
