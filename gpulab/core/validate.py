"""Validators for the models' arguments: each returns the value as a Python number, or raises an error
that names the argument and what was expected. NumPy integers and floats are accepted wherever Python's
are; bool is refused where a number is expected (``True`` is not a count)."""

from __future__ import annotations

import math
import numbers


def integer(name: str, value, *, low: int | None = 0, high: int | None = None) -> int:
    """``value`` as an int in [low, high] (either bound None for open). Raises TypeError for a non-integer
    (floats such as 32.0, tuples, bools) and ValueError out of range, each naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {value!r} ({type(value).__name__})")
    v = int(value)
    if low is not None and v < low:
        raise ValueError(f"{name} must be >= {low}, got {v}")
    if high is not None and v > high:
        raise ValueError(f"{name} must be <= {high}, got {v}")
    return v


def positive_int(name: str, value) -> int:
    """``value`` as an int >= 1 (see ``integer``)."""
    return integer(name, value, low=1)


def real(name: str, value, *, low: float | None = None, strict: bool = False, finite: bool = True) -> float:
    """``value`` as a float; NaN is always refused, inf unless ``finite=False``; ``low`` is a lower bound
    (exclusive when ``strict``). Raises TypeError for a non-number and ValueError otherwise, naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {value!r} ({type(value).__name__})")
    try:
        v = float(value)
    except OverflowError:  # an int beyond float's range
        bits = int(value).bit_length()
        raise ValueError(f"{name} must be a finite number, got an int too large for a float ({bits} bits)") from None
    if math.isnan(v) or (finite and math.isinf(v)):
        raise ValueError(f"{name} must be a finite number, got {v}")
    if low is not None and (v <= low if strict else v < low):
        raise ValueError(f"{name} must be {'>' if strict else '>='} {low}, got {v}")
    return v


def positive(name: str, value, *, finite: bool = True) -> float:
    """``value`` as a float > 0 (see ``real``)."""
    return real(name, value, low=0.0, strict=True, finite=finite)


def nonnegative(name: str, value, *, finite: bool = True) -> float:
    """``value`` as a float >= 0 (see ``real``); -0.0 comes back as 0.0."""
    return real(name, value, low=0.0, finite=finite) + 0.0


def one_of(name: str, value, allowed) -> object:
    """``value`` if it is one of ``allowed`` (compared with ==, bools only to bools); else ValueError."""
    for a in allowed:
        if type(a) is type(value) and a == value:
            return value
    raise ValueError(f"{name} must be one of {list(allowed)}, got {value!r}")
