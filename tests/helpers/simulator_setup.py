"""Numba's CUDA simulator as the tests run it: every thread of a block gets the same shared
array (``simulator_shared_arrays``), and ``syncthreads`` waits instead of polling
(``simulator_barrier``). ``tests/conftest.py`` prepares the test session's workers with
:func:`prepare`; a script that a test runs in a process of its own goes through this file, so
that it runs its kernels the same way::

    python tests/helpers/simulator_setup.py benchmarks/gpu_check.py --dry-run --out results.json
"""
import os
import runpy
import sys


def prepare():
    """Make this process's simulator the tests' (numba.cuda must be the simulator)."""
    import simulator_barrier
    from simulator_shared_arrays import serialise_shared_array_creation

    serialise_shared_array_creation()
    simulator_barrier.install()


if __name__ == "__main__":
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"  # before numba.cuda is first imported
    prepare()
    script, *arguments = sys.argv[1:]
    sys.argv = [script, *arguments]
    runpy.run_path(script, run_name="__main__")
