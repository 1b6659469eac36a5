"""A pytest plugin (loaded by the root conftest.py): as nbval executes a lesson (``pytest --nbval-lax
notebooks/NN.ipynb``), each cell that reveals a prediction fails when a cell above its question already showed the
answer (``tests/answer_leaks.py`` says what counts). The answers' values, and the terms of a quotient, are read from
the lesson's kernel right after the reveal cell ran, as Jupyter ``user_expressions`` of an empty request (nothing
runs, nothing prints, the cell numbering stays)."""

from __future__ import annotations

import pytest

from tests import answer_leaks

#: Seconds to wait for the kernel to read the answers' expressions.
TIMEOUT_S = 30


def _is_nbval_cell(item) -> bool:
    return type(item).__name__ == "IPyNbCell" and hasattr(item, "test_outputs")


def _read(kernel, expressions: dict[str, str]) -> dict[str, float]:
    """The float value of each of ``expressions`` in ``kernel`` (nbval's RunningKernel); one that raises or is no
    number is left out."""
    asked = {k: f"float({v})" for k, v in expressions.items()}
    msg_id = kernel.kc.execute("", silent=True, store_history=False, user_expressions=asked, allow_stdin=False)
    while True:
        msg = kernel.get_message(stream="shell", timeout=TIMEOUT_S)
        if msg["parent_header"].get("msg_id") == msg_id:
            break
    values = {}
    for key, res in msg["content"].get("user_expressions", {}).items():
        if res.get("status") == "ok":
            try:
                values[key] = float(res["data"]["text/plain"])
            except (ValueError, KeyError):
                pass
    return values


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    result = yield
    if not _is_nbval_cell(item):
        return result
    nb = item.parent
    cells = nb.nb.cells
    at = next(i for i, c in enumerate(cells) if c is item.cell)
    outputs = nb.__dict__.setdefault("_gpulab_outputs", {})
    outputs[at] = list(item.test_outputs or [])
    calls = answer_leaks.reveal_calls(answer_leaks.source(item.cell))
    found = []
    for call in calls:
        values = _read(nb.kernel, call.expressions) if call.expressions else {}
        found += answer_leaks.check_reveal(cells, outputs, at, call, values)
    if found:
        raise AssertionError("an answer is shown before its question:\n" + "\n".join(found))
    return result
