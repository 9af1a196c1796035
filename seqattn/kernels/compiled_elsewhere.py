"""Kernels that another process is compiling into the shared disk cache right now.

On a first run, seqattn.compile hands the slowest kernels to a helper process, so that they
compile on another core while this process compiles the rest. When this process reaches one of
them, it waits for the helper and then loads the kernel from the cache rather than compiling it
a second time (see SizedKernel.run in cpu/threads.py, and register in cpu/called_by_name.py
for the C functions that kernels call by name); where the helper has not started it yet (busy
with other kernels), it takes it back and compiles it itself. Numba writes cache files atomically, so
a kernel is either loaded whole or, if the helper failed, compiled here as usual.

A C function called by name is also marked while a process compiles it (:func:`compiling_here`):
the job and the helper may reach the same one at once (the distance geometry's fill, the
register products), and the second waits for the first rather than compiling it beside it.
"""
import contextlib
import os
import time

# A kernel's "module.qualname" (or the symbol of a C function, cpu/called_by_name.py) ->
# (a callable that is True once the compiling process is done, on_wait, take_back).
_PENDING = {}


def compiling_elsewhere(names, done, on_wait=None, take_back=None):
    """Register kernels (their "module.qualname", or a C function's symbol) that a process
    compiles until ``done()``; ``on_wait()``, if given, is called when a launch starts waiting
    for them. ``take_back()``, if given, withdraws the work where that process has not started
    it, and says whether it did: then this process compiles them itself (waiting would take
    longer than that)."""
    for name in names:
        _PENDING[name] = (done, on_wait, take_back)


# While a helper process takes requests (seqattn.first_run sets it): a callable that hands it
# a C function by its symbol, for this process to wait for and load; None: compiled here.
_hand_over_function = None


def hand_over_functions_to(hand_over):
    """Hand the C functions asked for by :func:`compile_function_elsewhere` to ``hand_over``
    (None: compile them here when first called)."""
    global _hand_over_function
    _hand_over_function = hand_over


def compile_function_elsewhere(symbol):
    """Where a helper process compiles for this run: ask it for the C function ``symbol``
    (cpu/called_by_name.py) ahead of this process's first call, which then waits for it."""
    if _hand_over_function is not None:
        _hand_over_function(symbol)


def wait_for(name, poll_seconds=0.05):
    """If another process is compiling the kernel ``name``, wait until it is done (once);
    if it has not started, take the work back (see :func:`compiling_elsewhere`)."""
    done, on_wait, take_back = _PENDING.pop(name, (None, None, None))
    if done is None or done() or (take_back is not None and take_back()):
        return
    if on_wait is not None:
        on_wait()
    while not done():
        time.sleep(poll_seconds)


# Seconds after which a mark is taken for one left by a process that died (a C function
# compiles in seconds; a dead child that its parent has not reaped still looks alive).
MARK_SECONDS = 120


def _marked_by_another(mark):
    """Whether ``mark`` names a live process other than this one and is fresh (an empty mark,
    of a process that died before writing it or is writing it now, counts as none: at worst
    two processes compile the function)."""
    try:
        with open(mark) as f:
            pid = int(f.read() or 0)
        if pid <= 0 or pid == os.getpid() or time.time() - os.path.getmtime(mark) > MARK_SECONDS:
            return False
        os.kill(pid, 0)
    except (OSError, ValueError):  # gone, or its process has ended
        return False
    return True


@contextlib.contextmanager
def compiling_here(folder, name, poll_seconds=0.05):
    """Mark that this process compiles ``name`` into the cache ``folder`` while the block runs;
    where a live process has marked it, wait until its mark is gone first (the block then finds
    its work in the cache). Without a folder it can write to, the block just runs."""
    mark = os.path.join(folder, name + ".compiling")
    try:
        os.makedirs(folder, exist_ok=True)
        while True:
            try:
                descriptor = os.open(mark, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
                break
            except FileExistsError:
                if _marked_by_another(mark):
                    time.sleep(poll_seconds)
                else:
                    with contextlib.suppress(FileNotFoundError):
                        os.remove(mark)
        os.write(descriptor, str(os.getpid()).encode())
        os.close(descriptor)
    except OSError:
        mark = None
    try:
        yield
    finally:
        if mark is not None:
            with contextlib.suppress(FileNotFoundError):
                os.remove(mark)
