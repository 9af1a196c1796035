"""Run small kernel launches on fewer threads: each CPU kernel compiled serial and parallel.

A Numba parallel region ends when its slowest thread does. On a machine where another process
holds a core, the thread that lands there waits for a time slice (milliseconds) while the work
of a small launch takes microseconds, so on a 2-core machine busy with other processes small
launches and whole small training steps ran many times slower in parallel than serial
(``benchmarks/small_launches.py``, ``benchmarks/train.py --hog``; BENCHMARKS.md, "Small launches
run serial"). Even on idle cores, starting a parallel region costs a few microseconds, more
than the work of a tiny launch.

So every CPU kernel is compiled twice from one Python function: with ``parallel=True`` and as
plain serial code on the calling thread (``prange`` is ``range`` there, and no thread pool
is involved). A launch plans ``work // grain`` threads, at most Numba's thread count; kernels
that split their work into one task per thread (and sum the tasks' partial results) split it
by that plan. It then runs on the planned threads less the cores that other processes keep
busy (:class:`CoresInUseElsewhere`, while :func:`follow_machine_load` is on, the default);
one thread means the serial version. The bits of a result depend on the plan only, never on
how many threads run it: the same call gives the same bits on a busy machine as on a quiet
one. The grain of each op family is the work that pays for one more thread, measured with
``benchmarks/small_launches.py`` (BENCHMARKS.md, "Small launches run serial").

A kernel whose ``prange`` loop runs one chunk of tasks per iteration keeps the chunk's body in
an @njit function of its own, called by symbol (``sized_kernel(chunk=...)``,
``called_by_name.called_natively``): the body then compiles once, and both versions are thin
loops around its call. Inlined, the body was compiled into each version, and the parallel one
took several times the serial one's compile time (BENCHMARKS.md, "Chunk functions called by
symbol").

On a first run, a launch whose version is not compiled yet may run the other version, when
that one is at hand or cheaper to compile (the serial one), and leave the missing version to
the helper process of seqattn.compile (:func:`compile_twins_elsewhere`): same plan, same bits,
and the run compiles none of the parallel versions, which take several times longer.
"""
import functools
import os
import sys
import time
import types

import numba
from numba.core.compiler_lock import global_compiler_lock

from ..compiled_elsewhere import wait_for
from .called_by_name import compile_natively
from .jit_options import njit

# Seconds over which the cores that other processes use are measured. The kernel counts CPU
# time in /proc/stat in ticks (10 ms): over 0.2 s on 2 cores that is 40 ticks, enough to tell
# a busy core from an idle one; reading the file costs 30-60 us, once per window.
LOAD_WINDOW = 0.2


class CoresInUseElsewhere:
    """How many cores other processes (and the hypervisor, as steal time) kept busy lately.

    Over the last window of at least LOAD_WINDOW seconds: the machine's busy CPU time from
    /proc/stat less this process's own (all its threads, Numba's waiting ones included), per
    second of wall time. Processes of lower priority than ours (nice above 0 while we run at
    0 or less) are left out where the scheduler weighs processes by their nice value: it gives
    our threads their cores (at nice 10 a process gets a tenth of a core shared with one at
    0), and /proc/stat counts their time apart ("nice"). Where Linux groups processes by
    session (``sched_autogroup_enabled``), it shares the cores between the groups whatever
    their nice values, and niced processes count like any other: measured on the 2-core
    machine, a nice-10 test run in another session held a core through a whole encoder step.
    Where /proc/stat cannot be read the answer is 0, as if the machine were ours.
    """

    def __init__(self, path="/proc/stat", window=LOAD_WINDOW,
                 autogroup="/proc/sys/kernel/sched_autogroup_enabled"):
        self.path = path
        self.window = window
        self.cores = 0.0
        try:
            with open(autogroup) as setting:
                self.niced_yield = setting.read().strip() == "0"
        except OSError:  # a kernel without session groups
            self.niced_yield = True
        self._start = self._sample()

    def _sample(self):
        """(wall seconds, the machine's busy CPU seconds at nice 0 or less, those of niced
        processes, CPU seconds of this process), or None where they cannot be had."""
        try:
            with open(self.path, "rb") as stat:
                # "cpu user nice system idle iowait irq softirq steal ...", in clock ticks.
                ticks = [int(field) for field in stat.readline().split()[1:9]]
        except (OSError, ValueError):
            return None
        user, nice, system, _idle, _iowait, irq, softirq, steal = ticks
        tick = os.sysconf("SC_CLK_TCK")
        return (time.monotonic(), (user + system + irq + softirq + steal) / tick, nice / tick,
                time.process_time())

    def __call__(self):
        """The cores in use elsewhere, re-measured when the window has passed."""
        if self._start is not None and time.monotonic() - self._start[0] >= self.window:
            now = self._sample()
            if now is None:
                self.cores = 0.0
            else:
                wall, busy, niced, own = (b - a for a, b in zip(self._start, now))
                # Niced ourselves, our time is in that column too, with our peers'.
                if not self.niced_yield or os.getpriority(os.PRIO_PROCESS, 0) > 0:
                    busy += niced
                self.cores = max(0.0, (busy - own) / wall)
            self._start = now
        return self.cores


cores_in_use_elsewhere = CoresInUseElsewhere()

# On unless the user turns it off (follow_machine_load): the load only decides how many threads
# run a launch, never how its work is split, so results keep their bits either way.
_following_load = True


def follow_machine_load(enabled=True):
    """Whether CPU launches leave the cores that other processes keep busy (default: yes).

    On a shared machine, every parallel region waits for a thread that shares its core with
    another process, for a time slice each; a small training step then runs many times slower
    (``benchmarks/train.py --hog``; BENCHMARKS.md, "Launches leave the cores other processes
    hold"). While on, each launch
    runs on its planned threads less the cores other processes used over the last 0.2 s. The
    work is split as planned from Numba's thread count either way, so results have the same
    bits on or off; turn it off to time kernels on every thread whatever else runs.
    Returns the previous setting.

    Parameters
    ----------
    enabled : bool, default True
        True: launches leave the cores other processes keep busy; False: every launch runs on
        all its planned threads.

    Returns
    -------
    bool
        The setting before this call.
    """
    global _following_load
    previous, _following_load = _following_load, bool(enabled)
    return previous


def free_threads(threads):
    """``threads``, less the cores that other processes keep busy (at least 1) while
    :func:`follow_machine_load` is on.

    A parallel region waits for its slowest thread; a thread that shares its core with a busy
    process waits milliseconds for each time slice, more than a small launch's whole work.
    """
    if not _following_load:
        return threads
    # From half a core's use on, a core is taken: a process that runs more often than not
    # holds up most regions that put a thread beside it.
    taken = int(cores_in_use_elsewhere() + 0.5)
    if taken:
        threads = max(1, min(threads, (os.cpu_count() or 1) - taken))
    return threads


# While a helper process compiles missing versions (seqattn.compile.start_helper): a callable
# that asks it for one, request(kernel, "serial" or "parallel", argument types, later=False)
# (later: for later runs, no launch waits for it), and returns False where no helper is there
# to take it.
_request_twin = None
# Seconds between looks into the disk cache for a version that the helper is compiling.
RECHECK_SECONDS = 1.0


def compile_twins_elsewhere(request):
    """Hand the versions that launches miss to ``request`` (None: compile them here again)."""
    global _request_twin
    _request_twin = request


# Called by a launch that misses its version while no helper takes requests (seqattn.first_run
# sets it to start the helper): so that even a run's first launch, often a parallel one whose
# compilation is several times the serial one's, hands that version over instead of compiling it.
_start_helper = None


def start_helper_at_first_miss(start):
    """Call ``start()`` where a launch misses its version and no helper is there (None: never)."""
    global _start_helper
    _start_helper = start


def _load_from_cache(dispatcher, argtypes, kernel=None):
    """Whether ``dispatcher`` has a version for ``argtypes`` now, loaded from Numba's disk cache
    if need be: what ``Dispatcher.compile`` does before it compiles (``kernel``: the
    SizedKernel of the version, whose chunk function must be loaded first)."""
    with global_compiler_lock:
        if argtypes in dispatcher.overloads:
            return True
        if kernel is not None and not kernel.chunk_loaded(argtypes):
            return False  # compiling the version compiles its chunk function as well
        cres = dispatcher._cache.load_overload(argtypes, dispatcher.targetctx)
        if cres is None:
            return False
        dispatcher.targetctx.insert_user_function(cres.entry_point, cres.fndesc,
                                                  [cres.library])
        dispatcher.add_overload(cres)
        return True


def _renamed(py_func, suffix):
    """A copy of ``py_func`` under another qualified name: Numba's disk cache keys compiled
    code by name and bytecode, not by the ``parallel`` flag, so the serial and the parallel
    versions of one function would overwrite each other's cache entries."""
    copy = types.FunctionType(py_func.__code__, py_func.__globals__, py_func.__name__ + suffix,
                              py_func.__defaults__, py_func.__closure__)
    copy.__qualname__ = py_func.__qualname__ + suffix
    copy.__doc__ = py_func.__doc__
    return copy


class SizedKernel:
    """A kernel launched on as many threads as its work pays for.

    ``kernel(*args)`` runs it with the threads that ``work(*args)`` (default: the size of the
    first argument, the output) pays for. Launchers whose kernel takes the thread count as an
    argument (to split work into that many tasks) call ``threads(work)`` and ``run``.
    """

    def __init__(self, py_func, grain, work, jit_options, chunk=None):
        self.grain = grain
        self.work = work
        # A first run hands the helper a backward when its forward's name first compiles
        # (seqattn.compile.HANDOVERS), which is the chunk function's where it has one.
        if chunk is not None and not chunk.py_func.__qualname__.startswith(py_func.__qualname__):
            raise ValueError(f"the chunk function {chunk.py_func.__qualname__} of "
                             f"{py_func.__qualname__} must be named after it (a prefix)")
        self.chunk = chunk
        self.parallel = njit(parallel=True, cache=True, **jit_options)(py_func)
        # Numba compiles the body of a parallel loop with NumPy's error model (a division by
        # zero gives inf, no check that blocks vectorisation); the serial version does too.
        serial_options = {"error_model": "numpy", **jit_options}
        self.serial = njit(cache=True, **serial_options)(_renamed(py_func, "_serial"))
        # Look like the function itself to introspection (name, module, signature, docstring).
        functools.update_wrapper(self, py_func)
        # Until the first launch: another process may be compiling this kernel for the cache.
        self._first_launch = True
        # Argument types of versions asked of the helper -> when the cache was last looked at.
        self._asked = {}
        for version in ("serial", "parallel"):
            dispatcher = getattr(self, version)
            dispatcher._compile_for_args = self._on_miss(version, dispatcher._compile_for_args)
            if chunk is not None:
                dispatcher.compile = self._chunk_first(dispatcher.compile)

    def _chunk_first(self, compile_version):
        """``compile_version`` (a dispatcher's compile, which loads from the cache or
        compiles), after the chunk function it calls by symbol is ready for the arguments."""
        def compile(argtypes):
            self.chunk_ready(argtypes)
            return compile_version(argtypes)
        return compile

    def _chunk_types(self, argtypes):
        """The chunk function's argument types for a launch with ``argtypes``."""
        return (numba.types.int64,) + tuple(argtypes)

    def chunk_ready(self, argtypes):
        """Compile or load the chunk function for a launch with ``argtypes`` and register its
        symbol: its code must be there before a version's code that calls it is loaded."""
        if self.chunk is not None:
            compile_natively(self.chunk, self._chunk_types(argtypes))

    def chunk_loaded(self, argtypes):
        """Whether the chunk function for ``argtypes`` is compiled or in the disk cache (then
        loaded and registered), compiling nothing; True for a kernel without one."""
        if self.chunk is None:
            return True
        if not _load_from_cache(self.chunk, self._chunk_types(argtypes)):
            return False
        self.chunk_ready(argtypes)
        return True

    def _on_miss(self, version, compile_here):
        """What a launch of ``version`` does where it has no compiled code for its arguments
        (Numba's dispatcher calls its ``_compile_for_args`` then, and calls what it returns)."""
        def on_miss(*args):
            # Only launches (run) take another version, a direct call gets the one it calls;
            # the caller's frame tells, at no cost to launches whose code is compiled.
            launched = sys._getframe(1).f_code is SizedKernel.run.__code__
            if not launched:
                return compile_here(*args)
            dispatcher = getattr(self, version)
            argtypes = tuple(dispatcher.typeof_pyval(a) for a in args)
            if _request_twin is None and _start_helper is not None \
                    and not _load_from_cache(dispatcher, argtypes, self):
                _start_helper()
            if _request_twin is None:
                compiled = compile_here(*args)
                # A run's first compilation starts the helper (seqattn.first_run): it is there
                # now to compile the parallel version for later runs.
                if version == "serial" and _request_twin is not None:
                    _request_twin(self, "parallel", argtypes, later=True)
                return compiled
            asked = self._asked.get((version, argtypes))
            if asked is not None and time.monotonic() - asked < RECHECK_SECONDS:
                return self._stand_in(version)
            if _load_from_cache(dispatcher, argtypes, self):
                self._asked.pop((version, argtypes), None)
                return dispatcher
            if version == "parallel":
                # the serial version compiles several times faster: it runs this launch
                if _request_twin(self, version, argtypes):
                    self._asked[(version, argtypes)] = time.monotonic()
                    if not _load_from_cache(self.serial, argtypes, self):
                        self.serial.compile(argtypes)
                    return self.serial
            elif _load_from_cache(self.parallel, argtypes, self) and \
                    _request_twin(self, version, argtypes):
                self._asked[(version, argtypes)] = time.monotonic()
                return self._parallel_on_one_thread
            compiled = compile_here(*args)
            if version == "serial":
                _request_twin(self, "parallel", argtypes, later=True)
            return compiled
        return on_miss

    def _stand_in(self, version):
        """The other version, for a launch of ``version`` that the helper compiles: the same
        plan (tasks) and so the same bits; the parallel one on the calling thread only."""
        if version == "parallel":
            return self.serial
        return self._parallel_on_one_thread

    def _parallel_on_one_thread(self, *args):
        available = numba.get_num_threads()
        numba.set_num_threads(1)
        try:
            return self.parallel(*args)
        finally:
            numba.set_num_threads(available)

    def threads(self, work):
        """The threads planned for ``work`` units: 1 below two grains, else work // grain, at
        most Numba's thread count. Kernels that split work per thread split it by this plan."""
        if work < 2 * self.grain:
            return 1
        return min(numba.get_num_threads(), int(work // self.grain))

    def run(self, threads, *args):
        """Run the work planned for ``threads`` threads on as many of them as other processes
        leave a core for (:func:`free_threads`): the serial version on the calling thread for 1.
        """
        if self._first_launch:
            self._first_launch = False
            wait_for(f"{self.__module__}.{self.__qualname__}")
        running = free_threads(threads) if threads > 1 else 1
        if running <= 1:
            return self.serial(*args)
        available = numba.get_num_threads()
        if running >= available:
            return self.parallel(*args)
        numba.set_num_threads(running)
        try:
            return self.parallel(*args)
        finally:
            numba.set_num_threads(available)

    def __call__(self, *args):
        return self.run(self.threads(self.work(*args)), *args)


def _size_of_first(*args):
    return args[0].size


def sized_kernel(grain, work=_size_of_first, chunk=None, **jit_options):
    """Decorator: compile a ``prange`` kernel serial and parallel (``cache=True``), launched by
    size; ``grain`` is in the units of ``work(*args)``. ``chunk``: the @njit function that the
    kernel calls by symbol (called_by_name.called_natively) with (chunk number, its arguments),
    the number as int64 (a prange index is unsigned), its name the kernel's and a suffix."""
    def compile_both(py_func):
        return SizedKernel(py_func, grain, work, jit_options, chunk)
    return compile_both
