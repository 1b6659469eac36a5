"""Answers shown before their question: a reveal's answer (``gpulab.exercises.predict.reveal``) that an output of a
cell above its prediction cell already shows, so the learner reads it before writing a number.

A reveal's answer is the value of its ``measured=`` expression, or of ``model=`` where it has no measurement (beside
a measurement the model is what the learner computes, often from numbers the lesson shows on purpose); where it is
a quotient (``s[5] / s[3]``), its two terms are read too. An answer is shown before its question when an output of a cell
above the prediction cell (``my_x = None``, the number the learner writes)

* prints the answer: a number printed with two significant digits or more whose rounding interval, widened by 1%
  of the answer, holds it (0.110 for 0.1089), or a figure plots it (a value of its data equal to the answer);
* or shows both terms of a quotient: one cell's output prints each, in one unit (to its printed rounding, two
  significant digits or more: 99.0 and 42.0 printed above a question about the ratio of 99,000 and 42,000), or
  one figure plots each.

A one-digit number ("4 sectors", "2 waves") never counts, nor a whole-number answer below 100 (a count of 27
kernels), nor a figure's whole number (an axis of sizes plots 4096 whatever the answer): such numbers are
shown everywhere.

``tests/nbval_answers.py`` runs ``leaks`` on each reveal cell as nbval executes a lesson, with the values read
from the lesson's kernel; the functions here are pure, and ``tests/test_answer_leaks.py`` tests them.
"""

from __future__ import annotations

import ast
import math
import re
from dataclasses import dataclass

#: A number as a lesson prints one: 4,096 or 1.5e-3 or a factor x0.110; none inside a word ("fp32", "sm_90").
_NUMBER = re.compile(r"(?<![A-Za-wyz_\d.])[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)?(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w.])")
#: How far (a fraction of the answer) a printed number may lie outside its rounding and still print the answer:
#: the same quantity against a bandwidth of the same run, or rounded twice.
SLACK = 0.01
_FIGURE = "application/vnd.plotly.v1+json"


@dataclass(frozen=True)
class Number:
    """A printed number: its text, and the interval [lo, hi] any value printed that way lies in."""

    text: str
    lo: float
    hi: float


def _significant(text: str) -> int:
    mantissa = re.split(r"[eE]", text.replace(",", "").lstrip("+-"))[0]
    digits = mantissa.replace(".", "").lstrip("0")
    return len(digits) if "." in mantissa else len(digits.rstrip("0")) or 1


def numbers(text: str) -> list[Number]:
    """The numbers ``text`` prints with two significant digits or more, each with its rounding interval."""
    found = []
    for m in _NUMBER.finditer(text):
        t = m.group(0)
        if not re.search(r"\d", t) or _significant(t) < 2:
            continue
        plain = t.replace(",", "")
        mantissa, _, exp = plain.lower().partition("e")
        decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
        half = 0.5 * 10.0 ** (-decimals + (int(exp) if exp else 0))
        found.append(Number(t, float(plain) - half, float(plain) + half))
    return found


def _figure_values(fig: dict) -> list[float]:
    """Every number a plotly figure's traces plot (x, y, z, their custom data), flattened."""
    values = []

    def walk(v):
        if isinstance(v, bool):
            return
        if isinstance(v, (int, float)):
            values.append(float(v))
        elif isinstance(v, list):
            for x in v:
                walk(x)

    for trace in fig.get("data", []):
        for key in ("x", "y", "z", "customdata"):
            walk(trace.get(key))
    return values


def _figure_text(fig: dict) -> str:
    """The text a plotly figure shows: names, text and hover text, annotations, its title."""
    parts = []
    for trace in fig.get("data", []):
        for key in ("name", "text", "hovertext"):
            v = trace.get(key)
            parts += [str(x) for x in v] if isinstance(v, list) else [str(v)] if v else []
    layout = fig.get("layout", {})
    parts += [str(a.get("text", "")) for a in layout.get("annotations", [])]
    title = layout.get("title")
    parts.append(str(title.get("text", "")) if isinstance(title, dict) else str(title or ""))
    return "\n".join(parts)


@dataclass(frozen=True)
class Shown:
    """What one cell's outputs show: the text printed (stream, text results, figures' text) and the values its
    figures plot."""

    text: str
    plotted: tuple[float, ...]

    @classmethod
    def of(cls, outputs: list[dict]) -> Shown:
        text, plotted = [], []
        for o in outputs:
            if o.get("output_type") == "stream":
                text.append("".join(o["text"]) if isinstance(o["text"], list) else o["text"])
                continue
            data = o.get("data", {})
            if _FIGURE in data:
                text.append(_figure_text(data[_FIGURE]))
                plotted += _figure_values(data[_FIGURE])
            elif "text/plain" in data:
                t = data["text/plain"]
                text.append("".join(t) if isinstance(t, list) else t)
        return cls("\n".join(text), tuple(plotted))


def _printed(value: float, shown: Shown, slack: float = 0.0, scale: float = 1.0) -> str | None:
    """How ``shown`` prints ``value`` / ``scale`` (a number whose rounding, widened by ``slack`` of the value,
    holds it) or plots ``value`` (a figure's value equal to it; not a whole number, which a figure's axis grid
    plots anyway), or None."""
    v = value / scale
    if float(value).is_integer() and abs(value) < 100:
        return None  # a count of two digits (27 kernels) is printed in many tables
    for n in numbers(shown.text):
        if re.fullmatch(r"-?\d{1,2}", n.text) and not float(v).is_integer():
            continue  # a two-digit whole number (15 lanes) is a count, not a rounded 15.24
        if n.lo - slack * abs(v) <= v <= n.hi + slack * abs(v):
            return f"prints {n.text}"
    if scale == 1.0 and not float(value).is_integer():
        if any(math.isclose(p, value, rel_tol=1e-9) for p in shown.plotted):
            return f"plots {value:.4g}"
    return None


@dataclass(frozen=True)
class Answer:
    """A reveal's answer: ``which`` ("model" or "measured"), its value and, for a quotient, its two terms."""

    which: str
    value: float
    terms: tuple[float, float] | None = None


def leaks(answer: Answer, shown: Shown) -> str | None:
    """How ``shown`` (an earlier cell's outputs) shows ``answer``, or None."""
    if not (math.isfinite(answer.value) and answer.value != 0):
        return None
    how = _printed(answer.value, shown, SLACK if answer.which == "measured" else 0.0)  # a model prints as it is
    if how:
        return how
    if answer.terms and all(math.isfinite(t) and t != 0 for t in answer.terms):
        for k in range(-12, 13):  # both terms in one unit: 99.0 and 42.0 for 99,000 and 42,000
            a, b = (_printed(t, shown, scale=10.0**k) for t in answer.terms)
            if a and b:
                return f"{a} and {b.removeprefix('prints ').removeprefix('plots ')}, the terms of its quotient"
    return None


@dataclass(frozen=True)
class RevealCall:
    """A ``reveal(...)`` call of a cell: the guess's name, and the source of its answers' expressions (the whole
    expression, and for a quotient its numerator and denominator)."""

    guess: str
    expressions: dict[str, str]


def reveal_calls(source: str) -> list[RevealCall]:
    """The ``reveal`` calls in a cell's ``source`` whose first argument is a name."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    calls = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "reveal" and node.args):
            continue
        if not isinstance(node.args[0], ast.Name):
            continue
        exprs = {}
        for kw in node.keywords:
            if kw.arg in ("model", "measured"):
                exprs[kw.arg] = ast.unparse(kw.value)
                if isinstance(kw.value, ast.BinOp) and isinstance(kw.value.op, ast.Div):
                    exprs[f"{kw.arg}:num"] = ast.unparse(kw.value.left)
                    exprs[f"{kw.arg}:den"] = ast.unparse(kw.value.right)
        calls.append(RevealCall(node.args[0].id, exprs))
    return calls


def answers(call: RevealCall, values: dict[str, float]) -> list[Answer]:
    """The answer of ``call`` a learner must not see first, from ``values`` (its expressions' keys -> their values;
    a key missing where the expression could not be read): the measurement where the reveal has one, else the
    model. Beside a measurement, the model is what the learner computes, often from numbers shown on purpose."""
    which = "measured" if "measured" in call.expressions else "model"
    if which not in values:
        return []
    num, den = values.get(f"{which}:num"), values.get(f"{which}:den")
    return [Answer(which, values[which], (num, den) if num is not None and den is not None else None)]


def source(cell: dict) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def prediction_cell(cells: list[dict], guess: str, before: int) -> int | None:
    """The index of the last cell above ``before`` that asks for ``guess`` (``guess = None``, the learner's number
    to write, most often with ``# your number``)."""
    asks = re.compile(rf"^\s*{re.escape(guess)} = None\b", re.M)
    for i in range(before - 1, -1, -1):
        if cells[i]["cell_type"] == "code" and asks.search(source(cells[i])):
            return i
    return None


def check_reveal(cells: list[dict], outputs: dict[int, list[dict]], at: int, call: RevealCall, values) -> list[str]:
    """One line per answer of ``call`` (the reveal in cell ``at``, its expressions' ``values``) that an output
    above its prediction cell shows; ``outputs``: cell index -> the outputs that cell gave in this run."""
    asked = prediction_cell(cells, call.guess, at)
    if asked is None:
        return []
    found = []
    model = values.get("model") if "measured" in values else None
    for ans in answers(call, values):
        for i in range(asked):
            shown = Shown.of(outputs.get(i, []))
            how = leaks(ans, shown)
            if how and model is not None and math.isfinite(model) and _printed(model, shown) == how:
                continue  # the number shown is the model's (to its rounding), near the measurement: the learner's
            if how:
                found.append(
                    f"cell {i} {how} ({ans.which} {ans.value:.4g}) before cell {asked} asks for {call.guess}, "
                    f"revealed in cell {at}: ask first, then show"
                )
    return found
