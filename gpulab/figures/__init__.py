"""The lessons' figures and explorers, one module per lesson: a notebook cell that draws is one call here.

``figures.lessonNN`` builds plotly figures and slider explorers from the models (``gpulab.models.simt``,
``gpulab.models.sectors``, ...) and the suites' records; the shared pieces (``LiveFigure``, sliders, the static
fallback) are in ``gpulab.figures.widgets``, the roofline in ``gpulab.figures.plots``. Notebooks write ``from gpulab import
figures`` and call ``figures.lesson07.WaveExplorer(...)``: the names never collide with the suites
(``gpulab.bench.lessonNN``) or the exercises (``gpulab.exercises.exNN``).
"""

from . import (  # noqa: F401
    lesson00,
    lesson01,
    lesson02,
    lesson03,
    lesson04,
    lesson05,
    lesson06,
    lesson07,
    lesson08,
    lesson09,
    lesson10,
)
