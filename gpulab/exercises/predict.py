"""The learner's prediction before a reveal: ``reveal(my_guess, model=..., measured=..., unit=...)``.

A lesson asks for a number first (bytes, a time, a ratio) in a cell of its own, ``my_guess = None``; the reveal
cell then shows the model's answer and the measurement (live, or recorded with its label) and says how far off
the guess was from the nearer of the two, naming it: the ratio guess / answer, "close" within 25%, and a one-line
why when it is off by more than 2x. A guess that counts what the model counts is judged against the model, so it is
never "far off" because the hardware departs from the model; where the model and the measurement are 2x or more
apart, the reveal gives the reason for the gap.
An empty guess (``None`` or ``...``) is not an error: the reveal asks for a prediction and still shows the
answer, so a notebook runs top to bottom before the learner has written anything.

The habit is the JAX scaling book's: the question first, the answer folded; a guess compared with the answer
teaches which term of a count was missed.
"""

from __future__ import annotations

import math
import numbers
import re
import unicodedata
from dataclasses import dataclass

#: Units a guess written as text ("120 us", "2 GB") may carry: unit -> (quantity, size in the quantity's base
#: unit). "" and "x" are plain ratios, so "8%" converts to 0.08; bytes are decimal (GB = 1e9 B) beside the
#: binary KiB, MiB, GiB; TB/s is 1e12 bytes per second. Microseconds are "us" or "µs", with either mu a keyboard
#: gives (the micro sign U+00B5 or the Greek letter U+03BC).
UNITS = {
    "s": ("time", 1.0),
    "ms": ("time", 1e-3),
    "us": ("time", 1e-6),
    "µs": ("time", 1e-6),
    "ns": ("time", 1e-9),
    "B": ("bytes", 1.0),
    "KB": ("bytes", 1e3),
    "MB": ("bytes", 1e6),
    "GB": ("bytes", 1e9),
    "TB": ("bytes", 1e12),
    "KiB": ("bytes", 2.0**10),
    "MiB": ("bytes", 2.0**20),
    "GiB": ("bytes", 2.0**30),
    "GB/s": ("bandwidth", 1e9),
    "TB/s": ("bandwidth", 1e12),
    "GFLOP/s": ("rate", 1e9),
    "TFLOP/s": ("rate", 1e12),
    "": ("ratio", 1.0),
    "x": ("ratio", 1.0),
    "%": ("ratio", 0.01),
}
CLOSE = 1.25  # within this factor of the answer: "close"
FAR = 2.0  # beyond this factor: "far off", with a one-line why; model and measurement this far apart: the gap's reason
#: A number ("1000", "1,000", "2.5e3", ".5") and one word of unit after it; commas group thousands only.
_TEXT = re.compile(r"^\s*([-+]?(?:\d{1,3}(?:,\d{3})+(?:\.\d*)?|\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*(\S*)\s*$")


def _is_empty(guess) -> bool:
    return guess is None or guess is Ellipsis or (isinstance(guess, str) and not guess.strip())


def _unit_key(unit: str) -> str:
    """``unit`` as ``UNITS`` spells it: the Greek mu (U+03BC) and any compatibility form (NFKC) read as the micro
    sign of "µs"."""
    return unicodedata.normalize("NFKC", unit).replace("\u03bc", "\u00b5")


def _as_float(name: str, v) -> float:
    """``v`` (a real number) as a float; ValueError naming ``name`` for an int beyond a float's range."""
    try:
        return float(v)
    except OverflowError:
        raise ValueError(
            f"{name} must be a positive, finite number: an int of {len(str(abs(int(v))))} digits is beyond a "
            "float's range (about 1.8e308)"
        ) from None


def _convert(value: float, frm: str, to: str) -> float:
    """``value`` in unit ``frm`` expressed in unit ``to`` (both in ``UNITS``, same quantity)."""
    (q_from, s_from), (q_to, s_to) = UNITS[frm], UNITS[to]
    if q_from != q_to:
        raise ValueError(f"my_guess is a {q_from} ({frm}) but this prediction asks for a {q_to} ({to})")
    return value * s_from / s_to


def _guess_value(guess, unit: str) -> float:
    """The guess as a float in ``unit``: a real number (in ``unit``) or text "<number> <unit>" converted."""
    if isinstance(guess, str):
        m = _TEXT.match(guess)
        if not m:
            raise ValueError(
                f"my_guess must be a number (in {unit or 'the units asked'}), or text such as '2 GB'; got {guess!r}"
            )
        value, given = float(m.group(1).replace(",", "")), _unit_key(m.group(2))
        if given.startswith(","):
            raise ValueError(
                f"my_guess {guess!r}: a comma may only group thousands (1,000 or 12,345,678); write a decimal "
                "point as '.' (1.5)"
            )
        if given and given != unit:
            if given not in UNITS or unit not in UNITS:
                known = ", ".join(UNITS)
                raise ValueError(
                    f"my_guess {guess!r}: cannot convert {given!r} to {unit or 'a plain number'!r} "
                    f"(units known: {known})"
                )
            value = _convert(value, given, unit)
    elif isinstance(guess, bool) or not isinstance(guess, numbers.Real):
        raise TypeError(f"my_guess must be a number in {unit or 'the units asked'} (or None), got {guess!r}")
    else:
        value = _as_float("my_guess", guess)
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"my_guess must be a positive, finite number, got {guess!r}")
    return value


def _answer(name: str, v):
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise ValueError(f"{name} must be a positive, finite number or None, got {v!r}")
    f = _as_float(name, v)
    if not (math.isfinite(f) and f > 0):
        raise ValueError(f"{name} must be a positive, finite number or None, got {v!r}")
    return f


def _auto_why(log10_factor: float) -> str:
    """A why from the size of the miss alone (``log10_factor``: log10 of how many times off, >= 0): a power of 1000
    is a unit, 8 is bits against bytes."""
    for k, name in ((9, "1e9"), (6, "a million"), (3, "1000")):
        if abs(log10_factor - k) < 0.15:
            return f"a factor of about {name}: check the unit (s, ms, µs, ns; B, KB, MB, GB)"
    if abs(log10_factor / math.log10(2) - 3) < 0.2:
        return "a factor of about 8: bits against bytes?"
    return "compare your count with the model's, term by term"


def _log10_ratio(a: float, b: float) -> float:
    """log10(a / b) of positive finite floats, also where a / b would overflow or underflow (5e-324 / 1e300)."""
    r = a / b
    return math.log10(r) if 1e-300 < r < 1e300 else math.log10(a) - math.log10(b)


def _factor(a: float, b: float) -> tuple[float, bool]:
    """(how many times a is from b, >= 1, or inf beyond a float's range; whether a is the larger)."""
    r = a / b
    if 1e-300 < r < 1e300:
        return max(r, 1 / r), r > 1
    lr = _log10_ratio(a, b)
    return 10 ** abs(lr) if abs(lr) < 308 else math.inf, lr > 0


def _times(log10_factor: float, digits: int = 3) -> str:
    """10 ** log10_factor with ``digits`` significant digits, written "3.2e+325" beyond a float's range."""
    if abs(log10_factor) < 300:
        return f"{10**log10_factor:.{digits}g}"
    e = math.floor(log10_factor)
    return f"{10 ** (log10_factor - e):.{digits}g}e{e:+d}"


@dataclass(frozen=True)
class Reveal:
    """A prediction beside its answers. ``guess``: the learner's number in ``unit`` (None: no prediction yet);
    ``model`` and ``measured``: the answers in ``unit`` (None where there is none); ``model_how`` and
    ``where``: what the model counts and where the measurement comes from; ``why``: the line shown when the
    guess is far off; ``gap_why``: why the measurement departs from the model, shown when they are ``FAR`` or more
    apart."""

    guess: float | None
    model: float | None
    measured: float | None
    unit: str = ""
    model_how: str = ""
    where: str = ""
    why: str = ""
    gap_why: str = ""

    @property
    def matches(self) -> str:
        """Which answer the guess is judged against: "model" or "measurement", the nearer of the two to the guess
        (by ratio; the measurement on a tie or without a guess), or the only one given."""
        if self.model is None:
            return "measurement"
        if self.measured is None:
            return "model"
        if self.guess is None:
            return "measurement"
        to_model = abs(_log10_ratio(self.guess, self.model))
        return "model" if to_model < abs(_log10_ratio(self.guess, self.measured)) else "measurement"

    @property
    def answer(self) -> float:
        """What the guess is judged against: the nearer of the model and the measurement (``matches``)."""
        return self.model if self.matches == "model" else self.measured

    @property
    def gap(self) -> float | None:
        """measured / model (None unless both are given; 0.0 or inf where beyond a float's range)."""
        if self.model is None or self.measured is None:
            return None
        return self.measured / self.model

    @property
    def ratio(self) -> float | None:
        """guess / answer (None without a guess; 0.0 or inf where the quotient is beyond a float's range)."""
        return None if self.guess is None else self.guess / self.answer

    def _factor(self) -> tuple[float, bool]:
        """(how many times off, >= 1, or inf beyond a float's range; whether the guess is too high)."""
        return _factor(self.guess, self.answer)

    @property
    def verdict(self) -> str:
        """ "none", "close" (within ``CLOSE``), "off" or "far" (beyond ``FAR``)."""
        if self.guess is None:
            return "none"
        f = self._factor()[0]
        return "close" if f <= CLOSE else ("off" if f <= FAR else "far")

    def _num(self, v: float) -> str:
        return f"{v:.3g} {self.unit}".rstrip()

    def _vs(self, v: float, what: str) -> str:
        if self.guess is None:
            return ""
        return f"  -> your guess is {_times(_log10_ratio(self.guess, v))}x the {what}"

    def __str__(self) -> str:
        lines = []
        if self.guess is None:
            lines.append(
                f"no prediction yet: write your number ({self.unit or 'a plain number'}) in the prediction cell "
                "above, run it and this cell again. The answer:"
            )
        else:
            lines.append(f"your prediction: {self._num(self.guess)}")
        if self.model is not None:
            how = f" ({self.model_how})" if self.model_how else ""
            lines.append(f"model:    {self._num(self.model)}{how}{self._vs(self.model, 'model')}")
        if self.measured is not None:
            where = f" ({self.where})" if self.where else ""
            lines.append(f"measured: {self._num(self.measured)}{where}{self._vs(self.measured, 'measurement')}")
        if self.guess is not None:
            lr = abs(_log10_ratio(self.guess, self.answer))
            side = "high" if self._factor()[1] else "low"
            both = self.model is not None and self.measured is not None
            lines.append(
                {
                    "close": f"close{' to the ' + self.matches if both else ''}: within {CLOSE - 1:.0%}",
                    "off": f"off by {self._factor()[0]:.2g}x (too {side})",
                    "far": f"far off: {_times(lr, 3)}x too {side}",
                }[self.verdict]
                + (f" against the {self.matches}, the nearer answer" if both and self.verdict != "close" else "")
            )
            if self.verdict == "far":
                lines.append(f"why: {self.why or _auto_why(lr)}")
        if self.gap is not None and _factor(self.measured, self.model)[0] >= FAR:
            lg = _log10_ratio(self.measured, self.model)
            reason = self.gap_why or "the lesson does not say what the model leaves out here"
            lines.append(
                f"the measurement is {_times(abs(lg), 2)}x {'above' if lg > 0 else 'below'} the model: {reason}"
            )
        return "\n".join(lines)

    __repr__ = __str__


def reveal(
    my_guess,
    *,
    model=None,
    measured=None,
    unit: str = "",
    model_how: str = "",
    where: str = "",
    why: str = "",
    gap_why: str = "",
) -> Reveal:
    """The reveal of a prediction: ``my_guess`` beside ``model`` and ``measured``, and how far off it was.

    ``my_guess``: a positive real number in ``unit``, text with a unit of ``UNITS`` ("120 us", converted to
    ``unit``), or None / ``...`` / "" for no prediction yet (the reveal asks for one and still shows the
    answer). ``model``, ``measured``: positive finite numbers in ``unit``, or None; at least one of them.
    ``unit``: what the numbers are in (a key of ``UNITS``, or any name such as "instructions"; "" for a plain
    ratio). ``model_how``: what the model counts; ``where``: the measurement's label (``live.Shown.where``);
    ``why``: the one line shown when the guess is more than ``FAR`` times off (default: a hint from the size of
    the miss); ``gap_why``: why the measurement departs from the model, shown whenever the two are ``FAR`` or
    more times apart (a lesson passing both answers passes it). Returns a ``Reveal`` (its text is the report, at
    most six lines). The guess is judged against the nearer of the model and the measurement, and the report
    names which: a guess equal to the model is close, however far the measurement lies. Raises TypeError for a guess that is not a number or text,
    ValueError for a non-positive or non-finite number, a unit that does not convert, or no answer at all.
    """
    if not isinstance(unit, str):
        raise TypeError(f"unit must be a string such as 'ms' or 'GB', got {unit!r}")
    unit = _unit_key(unit)
    model, measured = _answer("model", model), _answer("measured", measured)
    if model is None and measured is None:
        raise ValueError("reveal needs an answer: model=, measured= or both")
    guess = None if _is_empty(my_guess) else _guess_value(my_guess, unit)
    return Reveal(guess, model, measured, unit, model_how, where, why, gap_why)
