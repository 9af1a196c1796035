"""Kernels that another process is compiling into the shared disk cache right now.

On a first run, seqattn.compile hands the slowest kernels to a helper process, so that they
compile on another core while this process compiles the rest. When this process reaches one of
them, it waits for the helper and then loads the kernel from the cache rather than compiling it
a second time (see SizedKernel.run in cpu/threads.py, and register in cpu/called_by_name.py
for the C functions that kernels call by name). Numba writes cache files atomically, so
a kernel is either loaded whole or, if the helper failed, compiled here as usual.
"""
import time

# A kernel's "module.qualname" (or the symbol of a C function, cpu/called_by_name.py) -> a
# callable that is True once the compiling process is done.
_PENDING = {}


def compiling_elsewhere(names, done, on_wait=None):
    """Register kernels (their "module.qualname", or a C function's symbol) that a process
    compiles until ``done()``; ``on_wait()``, if given, is called when a launch starts waiting
    for them."""
    for name in names:
        _PENDING[name] = (done, on_wait)


def wait_for(name, poll_seconds=0.05):
    """If another process is compiling the kernel ``name``, wait until it is done (once)."""
    done, on_wait = _PENDING.pop(name, (None, None))
    if done is None or done():
        return
    if on_wait is not None:
        on_wait()
    while not done():
        time.sleep(poll_seconds)
