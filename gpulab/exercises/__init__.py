"""Checked exercises. Each lesson's module holds checkers and hidden reference solutions.

A checker runs the learner's function on fresh random inputs, awkward ones included, and returns a
``Report`` that says which case failed, what was expected and what came back, with a hint for the
common mistakes. A stub that raises ``NotImplementedError`` reports "not attempted yet" instead of an
error, so a notebook runs top to bottom before the learner has written anything.

``hint(checker)`` prints the checker's next hint; ``show_solution(checker)`` prints the reference solution
(the reveal). Kernel exercises are checked by ``kernelcheck.check_kernel`` on guarded buffers, so a kernel
that forgets its mask gets a message instead of crashing the notebook.
"""

from __future__ import annotations

import copy
import inspect
import numbers
import re
from dataclasses import dataclass, field


@dataclass
class Report:
    """The outcome of a checker: ``ok`` is True only if every case passed."""

    name: str
    cases: int = 0
    failures: list = field(default_factory=list)
    attempted: bool = True
    #: how many cases failed, where one line of ``failures`` stands for several (None: one line a case)
    failed: int | None = None
    #: a line said under the report (e.g. what this platform could not check)
    note: str = ""
    #: the seed the cases were drawn from (``cases.Draw``; None: fixed cases): ``check(fn, seed=...)`` draws them again
    seed: int | None = None

    @property
    def ok(self) -> bool:
        return self.attempted and not self.failures

    def __str__(self) -> str:
        if not self.attempted:
            return f"[ ] {self.name}: not attempted yet (the stub raises NotImplementedError)"
        seed = "" if self.seed is None else f" (seed {self.seed})"
        if self.ok:  # a note is said on a pass too (a case slow in the interpreter, a check this platform lacks)
            return f"[pass] {self.name}: all {self.cases} cases pass{seed}" + (f"\n  ({self.note})" * bool(self.note))
        failed = len(self.failures) if self.failed is None else self.failed
        lines = [f"[FAIL] {self.name}: {failed} of {self.cases} cases fail{seed}"]
        lines += [f"  - {clip(f)}" for f in self.failures[:5]]
        if len(self.failures) > 5:
            lines.append(f"  ... and {len(self.failures) - 5} more")
        if self.note:
            lines.append(f"  ({self.note})")
        if self.seed is not None:
            lines.append(f"  (the same cases again: call the checker with seed={self.seed})")
        return "\n".join(lines)

    __repr__ = __str__

    def extend(self, other: Report) -> None:
        """Add ``other``'s cases and failures to this report (a checker made of several ``check_kernel`` runs)."""
        mine = len(self.failures) if self.failed is None else self.failed
        theirs = len(other.failures) if other.failed is None else other.failed
        self.cases += other.cases
        self.failures += other.failures
        self.failed = mine + theirs
        self.note = self.note or other.note


#: A failure line of ``kernelcheck.check_kernel``: the message, then "[hits of cases cases, e.g. name(arguments)]",
#: then any advice lines.
_CASE_LINE = re.compile(
    r"^(?P<msg>.*) \[(?P<hits>\d+) of (?P<cases>\d+) cases, e\.g\. (?P<name>[^(\[]*)\((?P<args>.*?)\)\](?P<rest>\n.*)?$",
    re.S,
)


def say_once(report: Report) -> Report:
    """``report`` (a checker made of several ``check_kernel`` runs, one per dtype: "relu_cast fp16->fp16", ...) with
    each message the runs share said once: the cases it hit in all, and the runs it hit ("in fp32, fp16, bf16"),
    beside the first run's example. Lines whose messages differ (an index, a value) stay apart. Returns
    ``report``, changed in place."""
    merged: dict[tuple, list] = {}
    for line in report.failures:
        m = _CASE_LINE.match(line)
        if m is None:
            merged.setdefault((line,), [line])
            continue
        entry = merged.setdefault((m["msg"], m["rest"] or ""), [m, 0, 0, []])
        entry[1], entry[2] = entry[1] + int(m["hits"]), entry[2] + int(m["cases"])
        entry[3].append(m["name"].strip().removeprefix(report.name).strip() or m["name"].strip())
    lines = []
    for entry in merged.values():
        if len(entry) == 1:
            lines.append(entry[0])
            continue
        m, hits, cases, runs = entry
        where = f", in {', '.join(runs)}" if len(runs) > 1 else ""
        example = f"{m['name'].strip()}({m['args']})"
        lines.append(f"{m['msg']} [{hits} of {cases} cases{where}; e.g. {example}]{m['rest'] or ''}")
    report.failures = lines
    return report


#: The note ``describe_error`` gives a 16-bit input to one of Triton's math functions (tl.sin, tl.exp, ...).
MATH_FP32_ONLY = "Triton's math functions (tl.sin, tl.cos, tl.exp, tl.log, tl.sqrt, ...) take fp32 or fp64 only"
_MATH_OPS = ("sin", "cos", "exp2", "exp", "log2", "log", "sqrt_rn", "sqrt", "rsqrt", "erf", "floor", "ceil")
_AT = re.compile(r"^at (\d+):(\d+):$", re.M)
_GOT_DTYPE = re.compile(r"Expected dtype \[.*?\] but got (\w+)")


#: The longest line a report prints (characters); ``clip`` shortens a longer one at a space.
LINE_LIMIT = 400


def clip(text: str, limit: int = LINE_LIMIT) -> str:
    """``text`` cut to at most ``limit`` characters at a space or punctuation (never inside a number or a
    word), with " ..." where it was cut; newlines kept up to the limit."""
    text = str(text)
    if len(text) <= limit:
        return text
    cut = text[: limit - 4]
    stop = max(cut.rfind(c) for c in " ,;:([{\n")
    return (cut[:stop] if stop > limit // 2 else cut).rstrip() + " ..."


def _chain(exc: BaseException) -> list[BaseException]:
    out = []
    while exc is not None and all(exc is not e for e in out):
        out.append(exc)
        exc = exc.__cause__ or exc.__context__
    return out


def _source_line(text: str) -> tuple[int | None, str]:
    """(line, source) of the statement a Triton CompilationError points at: the line above its ``^``."""
    m = _AT.search(text)
    if not m:
        return None, ""
    lines = text[m.end() :].splitlines()
    for i, ln in enumerate(lines):
        if ln.strip() == "^" and i > 0:
            return int(m.group(1)), lines[i - 1].strip()
    return int(m.group(1)), ""


def describe_error(exc: BaseException) -> str:
    """A short message for the learner about ``exc``, an exception their code raised: ``"<Type>: <first line>"``,
    or for a Triton compile error (``triton.compiler.errors.CompilationError``, whose first line is only
    ``at L:C:``) what went wrong and on which kernel line. Recognised wherever the wording is (the GPU
    compiler's message, its ``__cause__``, or the interpreter's exception, Triton 3.6 to 3.9), by the op and
    the dtype: a 16-bit input to a math function (``MATH_FP32_ONLY``), a ``tl.arange`` length that is not a
    power of 2, a ``tl.dot`` tile under 16, a name the kernel does not define."""
    chain = _chain(exc)
    text = "\n".join(str(e) for e in chain)
    compiled = any(type(e).__name__ == "CompilationError" for e in chain)
    line, src = _source_line(text) if compiled else (None, "")
    where = f" (kernel line {line}: {src})" if line is not None and src else ""
    got = _GOT_DTYPE.search(text)
    if got and got.group(1) in ("fp16", "bf16"):
        op = next((f"tl.{o}" for o in _MATH_OPS if f"tl.{o}(" in src or f"math.{o}(" in src), "a math function")
        return f"{op} on {got.group(1)}: {MATH_FP32_ONLY}; load, then x.to(tl.float32), and cast on the store{where}"
    if "arange's range must be a power of 2" in text:
        return f"tl.arange's length must be a power of 2 (a constexpr such as BLOCK = 128){where}"
    if "Input shapes should have" in text and ">= 16" in text:
        return f"tl.dot needs tiles of at least 16 in each dimension (BLOCK_M, BLOCK_N, BLOCK_K >= 16){where}"
    name = next((e for e in chain if isinstance(e, NameError)), None)
    if name is not None:
        return f"NameError: {str(name).splitlines()[0] if str(name) else 'a name is not defined'}{where}"
    if compiled:
        detail = next((ln.strip() for ln in reversed(text.splitlines()) if ln.strip() and ln.strip() != "^"), "")
        return f"the kernel does not compile: {detail}{where}"
    first = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {first}"


def _call_on_copies(fn, case: dict):
    """``fn(*case.values())`` (keys starting with "_" left out) on copies: tensors cloned, everything else
    deep-copied, so a function that changes its inputs cannot change what it is compared against."""
    args = [v.clone() if hasattr(v, "clone") else copy.deepcopy(v) for k, v in case.items() if not k.startswith("_")]
    return fn(*args)  # positional, so the learner may name the parameters as they like


def run_cases(name: str, fn, cases, compare, *, call=_call_on_copies) -> Report:
    """Call ``call(fn, case)`` for each case; ``compare(case, got)`` returns None or a failure message.

    The default ``call`` is ``fn(*case.values())`` on copies of the case (see ``_call_on_copies``); kernel
    checkers pass one that launches on guarded buffers (``kernelcheck.check_kernel``). ``NotImplementedError``
    on the first case means "not attempted"; anything the learner's code raises (its first line reported), or
    a result the comparison cannot read, is a failure of that case.
    """
    rep = Report(name)
    for i, case in enumerate(cases):
        rep.cases += 1
        # the arguments name the case; cut short, so that the message after them stays within the line
        args = clip(", ".join(f"{k}={_short(v)}" for k, v in case.items() if not k.startswith("_")), LINE_LIMIT // 2)
        try:
            got = call(fn, case)
        except NotImplementedError:
            if i == 0:
                return Report(name, attempted=False)
            rep.failures.append(f"{name}({args}) raised NotImplementedError")
            continue
        except KeyboardInterrupt:
            raise
        except BaseException as e:  # the learner's bug (SystemExit too), reported rather than raised
            rep.failures.append(clip(f"{name}({args}) raised {describe_error(e)}"))
            continue
        try:
            msg = compare(case, got)
        except Exception as e:
            msg = f"could not read the result {_short(got)} ({type(e).__name__}: {clip(str(e), 120)})"
        if msg:
            rep.failures.append(clip(f"{name}({args}): {msg}"))
    return rep


def run_cases_once(name: str, fn, cases, compare, *, call=_call_on_copies, describe=None) -> Report:
    """``run_cases``, with one line per distinct message instead of one per case: the message, how many cases it
    hit and one of them, ``describe(case)`` (default: its arguments, as ``run_cases`` writes them). For checkers
    whose cases share their mistakes (the same wrong formula at every shape), so the report stays a few short
    lines. What the learner's code raises is a message too ("raised ...")."""
    said: dict[str, list] = {}  # message -> [cases hit, the first case]

    def call_once(fn, case):
        try:
            return call(fn, case)
        except (NotImplementedError, KeyboardInterrupt):
            raise
        except BaseException as e:  # the learner's bug, reported as this case's message
            return _Raised(describe_error(e))

    def compare_once(case, got):
        msg = f"raised {got.text}" if isinstance(got, _Raised) else compare(case, got)
        if msg:
            entry = said.setdefault(msg, [0, case])
            entry[0] += 1
        return msg

    rep = run_cases(name, fn, cases, compare_once, call=call_once)
    if rep.attempted and said:
        rep.failed = sum(hits for hits, _ in said.values())
        show = describe or (lambda c: ", ".join(f"{k}={_short(v)}" for k, v in c.items() if not k.startswith("_")))
        rep.failures = [
            clip(f"{msg} [{hits} of {rep.cases} cases, e.g. {name}({show(case)})]")
            for msg, (hits, case) in said.items()
        ]
    return rep


@dataclass(frozen=True)
class _Raised:
    """What the learner's function raised, described (``describe_error``), as ``run_cases_once`` passes it on."""

    text: str


def _short(v) -> str:
    if hasattr(v, "shape") and hasattr(v, "dtype"):  # a tensor: its shape and dtype, not its values
        kind = "array" if type(v).__module__ == "numpy" else "tensor"
        return f"<{str(v.dtype).replace('torch.', '')} {kind} of shape {tuple(v.shape)}>"
    return f"{v:.6g}" if isinstance(v, float) else clip(repr(v), 80)


def close(got, expected, rel: float = 1e-6) -> bool:
    """True if ``got`` is a real number (not a string or bool) within ``rel`` of ``expected``."""
    if isinstance(got, (str, bytes, bool)) or not isinstance(got, numbers.Real):
        return False
    return abs(float(got) - float(expected)) <= rel * max(abs(float(expected)), 1e-300)


def is_int(v) -> bool:
    """True for a Python or NumPy integer (not a bool, float or tensor)."""
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _require_checker(fn: str, checker) -> None:
    """TypeError naming ``checker`` unless it is an exercise checker: a function with a ``solution``."""
    if not callable(checker) or not hasattr(checker, "solution"):
        raise TypeError(
            f"{fn}(checker): checker must be an exercise checker, a function such as ex07.check_largest_tile "
            f"(pass the checker itself, not its report or your function), got {checker!r}"
        )


def solution_source(checker) -> str:
    """The source ``show_solution`` prints: the ``solution`` function, or, when the solution is a kernel, the whole
    module that holds it (``solution_module``) followed by each kernel and launcher it shows from
    ``gpulab/kernels`` (the module's ``SHOWN``: a solution that a suite times too is written once, there).
    Raises TypeError naming ``checker`` for anything but a checker."""
    _require_checker("solution_source", checker)
    mod = getattr(checker, "solution_module", None)
    if mod is None:
        return inspect.getsource(checker.solution)
    parts = [inspect.getsource(mod)]
    for obj in getattr(mod, "SHOWN", ()):
        fn = getattr(obj, "fn", obj)  # a @triton.jit kernel's Python function
        parts.append(f"# {fn.__module__}\n{inspect.getsource(fn)}")
    return "\n\n".join(parts)


def show_solution(checker) -> None:
    """Print the reference solution of ``checker`` (``solution_source``). Raises TypeError naming ``checker`` for
    anything but a checker."""
    _require_checker("show_solution", checker)
    print(solution_source(checker))


def qualified(checker) -> str:
    """The name a notebook calls ``checker`` by: its lesson module and its name (``ex01.check_scale_add``)."""
    return f"{checker.__module__.rsplit('.', 1)[-1]}.{checker.__name__}"


def hint(checker) -> None:
    """Print the next hint of ``checker`` (its ``hints`` list), one more per call; after the last, say how
    to see the solution, by the name the notebook has (``show_solution(ex00.check_add)``). Raises TypeError
    naming ``checker`` for anything but a checker (``hint(None)``)."""
    _require_checker("hint", checker)
    hints = getattr(checker, "hints", ())
    shown = getattr(checker, "_hints_shown", 0)
    if shown < len(hints):
        print(f"hint {shown + 1} of {len(hints)}: {hints[shown]}")
        checker._hints_shown = shown + 1
    else:
        print(f"no more hints; show_solution({qualified(checker)}) prints the solution")
