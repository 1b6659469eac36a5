"""Lesson 09's Builder Test checker refuses an answer that calls the checker's own reference (by any name it is
reached by), passes the solution and a copy of it, and its hints name no function that computes the answer."""

import inspect
import re
import textwrap

import gpulab  # noqa: F401  (first: it sets TRITON_INTERPRET=1 before triton is imported)  # isort: skip
import pytest

from gpulab.exercises import ex09

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
