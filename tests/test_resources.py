"""gpulab.kernels.resources: what a compiled kernel reports, and Nones where the interpreter has no kernel."""

from gpulab.kernels.resources import kernel_resources


def test_interpreter_launch_gives_nones():
    assert kernel_resources(None) == {"n_regs": None, "n_spills": None, "shared_bytes": None, "num_warps": None}


def test_reads_registers_spills_and_metadata():
    class Meta:
        shared, num_warps = 0, 8

    class Fake:
        n_regs, n_spills, metadata = 40, 2, Meta()

    assert kernel_resources(Fake()) == {"n_regs": 40, "n_spills": 2, "shared_bytes": 0, "num_warps": 8}


def test_loads_the_binary_when_registers_are_not_read_yet():
    class Meta:
        shared, num_warps = 1024, 4

    class Lazy:
        n_regs = n_spills = None
        metadata = Meta()

        def _init_handles(self):
            self.n_regs, self.n_spills = 64, 0

    assert kernel_resources(Lazy()) == {"n_regs": 64, "n_spills": 0, "shared_bytes": 1024, "num_warps": 4}
