"""Lesson 09's Builder Test checker refuses an answer that calls the checker's own reference (by any name it is
reached by), passes the solution and a copy of it, and its hints name no function that computes the answer. The
bias + GELU kernel checker reaches rows wider than any block a row kernel may fix."""

import inspect
import re
import textwrap

import gpulab  # noqa: F401  (first: it sets TRITON_INTERPRET=1 before triton is imported)  # isort: skip
import pytest
import triton
import triton.language as tl

from gpulab.exercises import ex09
from gpulab.exercises.cases import ROW_LIMIT

check = ex09.check_builder_test
REFUSED = "calls the checker's own answer"


def _copy_of_the_solution():
    """The solution as a learner copies it from show_solution: the printed source, run afresh."""
    ns = vars(ex09).copy()
    exec(textwrap.dedent(inspect.getsource(check.solution)), ns)
    return ns[check.solution.__name__]


def test_the_solution_and_a_copy_of_it_pass():
    assert check(check.solution).ok
    rep = check(_copy_of_the_solution())
    assert rep.ok, str(rep)


kept = ex09._habit_factors  # a reference kept before the check, under another name


@pytest.mark.parametrize(
    "answer",
    [
        lambda op: (
            max(ex09._habit_factors(op), key=ex09._habit_factors(op).get),
            max(ex09._habit_factors(op).values()),
        ),
        lambda op: (max(kept(op), key=kept(op).get), max(kept(op).values())),
        lambda op: ex09._reference(op),
        lambda op: check.solution(op),
        lambda op: ex09._time_ms(op, 1.0, 1.0, "fp32") and check.solution(op),
    ],
    ids=["habit_factors", "kept", "reference", "solution", "time_ms"],
)
def test_an_answer_that_calls_the_reference_is_refused(answer):
    rep = check(answer)
    assert not rep.ok and REFUSED in str(rep) and len(rep.failures) == rep.cases, str(rep)


def test_the_watch_leaves_the_profiler_as_it_was():
    import sys

    calls = []
    sys.setprofile(lambda frame, event, arg: calls.append(event))
    try:
        assert check(check.solution).ok
        assert sys.getprofile() is not None
    finally:
        sys.setprofile(None)
    assert calls  # the learner's profiler still saw the calls


def test_no_hint_names_a_function_of_ex09_that_computes_the_answer():
    allowed = {"builder_ops", *(n for n in vars(ex09) if n.startswith("check_"))}
    for h in check.hints:
        named = set(re.findall(r"ex09\.(\w+)", h)) - allowed
        assert not named and "habit_factors" not in h and "_reference" not in h, h


def test_the_reference_is_private_and_the_notebook_does_not_call_it():
    assert not hasattr(ex09, "habit_factors")
    nb = open("notebooks/09_builder_test.ipynb", encoding="utf-8").read()
    assert "habit_factors" not in nb and "_reference" not in nb


@triton.jit
def _row_gelu(x_ptr, b_ptr, y_ptr, N, BLOCK_N: tl.constexpr):
    """One program per row, the whole row in one block: right only while N <= BLOCK_N."""
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    h = tl.load(x_ptr + row * N + cols, mask=mask) + tl.load(b_ptr + cols, mask=mask)
    z = 0.7978845608028654 * (h + 0.044715 * h * h * h)
    tl.store(y_ptr + row * N + cols, 0.5 * h * (2.0 * tl.sigmoid(2.0 * z)), mask=mask)


@pytest.mark.parametrize("block_n", [2048, 4096])
def test_a_row_kernel_with_a_fixed_block_fails_on_the_wide_rows(block_n):
    """Rows were never wider than 2003, so BLOCK_N = 2048 passed; a drawn case is wider than ``ROW_LIMIT`` (2^14),
    past any block a row kernel might fix (GPT-2's 3072 fits 4096): that case fails (and the drawn one of up to 3000
    columns where it is wider than the block), the fixed shapes pass."""
    rep = ex09.check_bias_gelu(lambda x, bias, out: _row_gelu[(x.shape[0],)](x, bias, out, x.shape[1], BLOCK_N=block_n))
    text = str(rep)
    assert not rep.ok and 1 <= rep.failed <= 2 and "never written" in text, text
    assert ROW_LIMIT >= 4 * block_n
