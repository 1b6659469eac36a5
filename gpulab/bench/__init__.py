"""The benchmark suite: one module per lesson (``bench/lessonNN.py``), the ceilings (``suite``) and the
command line (``python -m gpulab.bench``, see ``__main__``). Timing itself lives in ``gpulab.core.timing``."""
