"""What a first run shows: that seqattn's kernels are being compiled for this machine.

Numba compiles a kernel the first time a process calls it, unless its disk cache holds it:
on a fresh machine the first model's training starts after a minute or more of compilation,
which would otherwise look like a hang. Numba announces each compilation it makes (its
``numba:compile`` event fires on cache misses only); at the first one of a seqattn kernel, this
says once, on stderr, what is happening, and then counts the kernels compiled (a tqdm bar that
names the one being compiled, on a terminal). A run whose kernels all come from the cache shows
nothing.
The first compilation (or a launch that misses its kernel before it) also starts the helper
process of :func:`seqattn.compile.start_helper`, which compiles first the register products
that attention kernels call by name, then the versions of sized kernels that launches miss;
the first compilation of a float32 forward kernel (the linear map's, the attention's, the
layer norm's, GELU's) hands it the backward, which the run needs later, and an attention call
with structured biases hands it the backward of the call itself
(:func:`hand_over_structured_backward`); fit hands it the kernels that end each training step
(:func:`hand_over_step_end`), and a linear forward whose dW is large enough, the register
driver (kernels/compiled_elsewhere.py).
"""
import atexit
import os
import pickle
import sys
import time

import numpy as np
from numba.core import event

WAITING = "waiting for the kernels that the helper process compiles"
NOTICE = ("seqattn: compiling kernels for this machine (first run only: later runs load them "
          "from Numba's cache; `python -m seqattn.compile` does it ahead, on every core)")


def _kernel_name(dispatcher):
    func = dispatcher.py_func
    return f"{func.__module__}.{func.__qualname__}"


def _of_float32(args):
    """Whether a forward kernel's arguments (their types) are those of a float32 call, as the
    helper's backward jobs are: its first array's dtype (the output, or the attention's
    workspace)."""
    from numba import types

    first = next((a for a in args if isinstance(a, types.Array)), None)
    return first is not None and first.dtype == types.float32


def _without_structured_biases(args):
    """Whether the argument types of an attention kernel (its score modifications among them,
    attention._mods: last in the tiled kernel's, before the batch geometry in the short one's)
    are those of a call without structured biases: None in their flags."""
    from numba import types

    from .kernels.cpu.attention import PAIR_AT, STRUCTURED_AT

    mods = next((a for a in args if isinstance(a, types.BaseTuple) and len(a) > PAIR_AT), None)
    return (mods is not None and isinstance(mods[STRUCTURED_AT], types.NoneType)
            and isinstance(mods[PAIR_AT], types.NoneType))


def _job_for_layouts(job, args):
    """The variant of the HANDOVERS ``job`` for a forward kernel's argument types: for one that
    reads the heads of a packed projection in place (ops.packed_attention: strided views, Numba's
    layout "A"), the job that compiles such a backward (compile.PACKED_JOBS; with one head, the
    output, its first array, is a contiguous view)."""
    from numba import types

    from .compile import PACKED_JOBS

    arrays = [a for a in args if isinstance(a, types.Array)]
    if job not in PACKED_JOBS or all(a.layout != "A" for a in arrays):
        return job
    heads, one_head = PACKED_JOBS[job]
    return heads if arrays[0].layout == "A" else one_head


class CompileNotice(event.Listener):
    """Counts compilations of seqattn functions; says so at the first, then shows progress: a
    tqdm bar on a terminal, elsewhere (a log, a pipe, where a bar's redraws would run into
    the program's own lines) a line every LINE_SECONDS and one at exit."""

    LINE_SECONDS = 15

    def __init__(self, stream=None, start_helper=True):
        self.stream = stream
        self.start_helper = start_helper
        self.compiled = 0
        self.started = self.last_line = None
        self._helper_started = False
        self._handed = set()  # the jobs handed to the helper (compile.HANDOVERS)
        # The kind of training step whose end the helper compiles once it is there (fit's)
        self._step_end = None
        self._helper_lock = None  # the helper's lock file, once started (compile.start_helper)
        # Seconds spent compiling: outermost compilations only (a kernel compiles its callees).
        self.seconds = 0.0
        self._depth = 0
        self._outer_start = None
        self.bar = None

    def _print(self, line):
        print(line, file=self.stream or sys.stderr, flush=True)

    def _begin(self):
        stream = self.stream or sys.stderr
        self.started = self.last_line = time.perf_counter()
        self._print(NOTICE)
        if getattr(stream, "isatty", lambda: False)():
            from tqdm import tqdm

            self.bar = tqdm(desc="compiling", file=stream, leave=True, dynamic_ncols=True,
                            bar_format="{desc}: {n_fmt} kernels [{elapsed}{postfix}]")
        atexit.register(self.close)

    def _use_helper(self, name, args):
        """Start the helper at the first compilation, once; hand it a backward job at its
        forward's compilation (compile.HANDOVERS), once each: an attention one only for a call
        without structured biases, whose signature the helper's job has (a structured bias's
        kernels have their own, kernels/cpu/attention_bias.py), in the variant of its arrays'
        layouts (:func:`_job_for_layouts`)."""
        from .compile import ATTENTION_FORWARDS, HANDOVERS, hand_over

        if not self.start_helper:
            return
        try:
            self.start_helper_once()
            for forward, job, launches, priority in HANDOVERS:
                if (self._helper_lock is None or not name.startswith(forward)
                        or not _of_float32(args) or (forward in ATTENTION_FORWARDS
                                                     and not _without_structured_biases(args))):
                    continue
                job = _job_for_layouts(job, args)
                if job not in self._handed:
                    self._handed.add(job)
                    hand_over(self._helper_lock, job, launches,
                              on_wait=lambda: self._show(WAITING), priority=priority)
        except OSError:  # a cache folder it cannot write to: compile here, as without it
            pass

    def hand_over_backward_of(self, call):
        """On a first run with a helper: hand it the short attention backward of ``call``, a
        call with structured biases or dense score modifications, once per signature of its
        score modifications (which the biases it has decide) and of its heads (views of a
        packed projection or not); the run's first backward launch waits for it."""
        if self._helper_lock is None:
            return
        from .compile import PACKED_STRUCTURED_JOB, STRUCTURED_JOB, hand_over

        key = _signature_key(call)
        if key in self._handed:
            return
        self._handed.add(key)
        # a call of ops.packed_attention: its heads are strided views (which pickle contiguous)
        job = STRUCTURED_JOB if call.q.flags.c_contiguous else PACKED_STRUCTURED_JOB
        try:
            hand_over(self._helper_lock, job,
                      ("seqattn.kernels.cpu.attention_small._backward_tasks",),
                      on_wait=lambda: self._show(WAITING), call=call)
        except (OSError, pickle.PicklingError):  # compiled here, as without a helper
            pass

    def hand_over_step_end(self, kind):
        """For fit, before its first step: the helper compiles the kernels that end a training
        step with an optimizer of ``kind`` (compile.STEP_END_JOBS) once it is there (now or at
        its start, on a first run), after every backward job; the run's first launch of each
        waits for it."""
        self._step_end = kind
        if self._helper_lock is not None:
            self._hand_over_step_end()

    def _hand_over_step_end(self):
        from .compile import STEP_END_JOBS, STEP_END_PRIORITY, hand_over

        job, launches = STEP_END_JOBS[self._step_end]
        if job in self._handed:
            return
        self._handed.add(job)
        try:
            hand_over(self._helper_lock, job, launches, on_wait=lambda: self._show(WAITING),
                      priority=STEP_END_PRIORITY)
        except OSError:  # compiled here, as without a helper
            pass

    def _hand_over_function(self, symbol):
        """A C function that a launch asks the helper for (kernels/compiled_elsewhere.py):
        once, where the cache lacks it (compile.FUNCTION_JOBS)."""
        from .compile import FUNCTION_JOBS, hand_over
        from .kernels.cpu.called_by_name import available

        if symbol in self._handed:
            return
        self._handed.add(symbol)
        try:
            if not available(symbol):
                hand_over(self._helper_lock, FUNCTION_JOBS[symbol], (symbol,),
                          on_wait=lambda: self._show(WAITING))
        except OSError:  # compiled here, as without a helper
            pass

    def start_helper_once(self):
        """Start the helper, at most once a process (a launch that misses its kernel may do it
        before any compilation: kernels/cpu/threads.py), and hand it the register products and
        the end of fit's training step if fit has started; from then on, launches may ask it
        for C functions."""
        from .compile import hand_over_products, start_helper
        from .kernels.compiled_elsewhere import hand_over_functions_to

        if self.start_helper and not self._helper_started:
            self._helper_started = True
            self._helper_lock = start_helper()
            if self._helper_lock is not None:
                hand_over_products(self._helper_lock)
                hand_over_functions_to(self._hand_over_function)
                if self._step_end is not None:
                    self._hand_over_step_end()

    def _show(self, what):
        if self.bar is not None:
            self.bar.set_postfix_str(what)
        elif what == WAITING:
            self._print(f"seqattn: {what}")

    def on_start(self, ev):
        dispatcher = ev.data["dispatcher"]
        name = _kernel_name(dispatcher)
        if not name.startswith("seqattn."):
            return
        if self.started is None:
            self._begin()
        self._use_helper(name, ev.data.get("args", ()))
        if self._depth == 0:
            self._outer_start = time.perf_counter()
        self._depth += 1
        self._show(name.rsplit(".", 1)[-1])

    def on_end(self, ev):
        if self.started is None or not _kernel_name(ev.data["dispatcher"]).startswith("seqattn."):
            return
        self.compiled += 1
        now = time.perf_counter()
        self._depth -= 1
        if self._depth == 0:
            self.seconds += now - self._outer_start
        if self.bar is not None:
            self.bar.update(1)
        elif now - self.last_line >= self.LINE_SECONDS:
            self.last_line = now
            self._print(f"seqattn: {self.compiled} kernels compiled so far "
                        f"({now - self.started:.0f} s since the first)")

    def close(self):
        """At exit: the bar ends with the count and the time taken, or a line says them."""
        if self.bar is not None:
            self.bar.close()
        elif self.compiled and self.started is not None:
            self._print(f"seqattn: {self.compiled} kernels compiled in {self.seconds:.0f} s, "
                        "cached for later runs")
        self.started = None  # said once


def _signature_key(call):
    """What decides the kernels' signature for a prepared attention call: each field's dtype,
    dimensions and layout (contiguous or a strided view), or its type (numba.typeof of the
    kernels' argument tuple took 0.1 ms, a cost every attention call of a first run would
    pay)."""
    fields = [f for f in call if f is not call.distance and f is not call.pair]
    return tuple((f.dtype, f.ndim, f.flags.c_contiguous) if isinstance(f, np.ndarray)
                 else type(f) for f in (*fields, *call.distance, *call.pair))


_NOTICE = CompileNotice()


def hand_over_structured_backward(call):
    """See :meth:`CompileNotice.hand_over_backward_of` (nothing without a helper: warm runs)."""
    _NOTICE.hand_over_backward_of(call)


def hand_over_step_end(optimizer):
    """For fit: on a first run, the helper compiles the end of ``optimizer``'s training step
    (:meth:`CompileNotice.hand_over_step_end`), where its parameters are float32 NumPy arrays
    (the signature of the helper's jobs)."""
    from .train.optimizers import Adam

    # a compile hint only: whatever fit is given, its own checks and errors come first
    params = getattr(optimizer, "params", None)
    if params and all(type(getattr(p, "data", None)) is np.ndarray
                      and p.data.dtype == np.float32 for _, p in params):
        _NOTICE.hand_over_step_end("adam" if isinstance(optimizer, Adam) else "other")


def _start_helper_quietly():
    """The helper, for a launch that misses its kernel: the notice waits for a compilation."""
    try:
        _NOTICE.start_helper_once()
    except OSError:  # a cache folder it cannot write to: compile here, as without it
        pass


_WATCHED = set()


def watch_compilation(event_module=event):
    """Listen to ``event_module``'s compilations (Numba's CPU events by default; numba-cuda
    has its own module), once per module. Nothing is shown where ``SEQATTN_COMPILE_NOTICE=0``."""
    if os.environ.get("SEQATTN_COMPILE_NOTICE", "1") == "0" or event_module in _WATCHED:
        return
    _WATCHED.add(event_module)
    listener = _NOTICE
    if not isinstance(listener, event_module.Listener):  # numba-cuda's own Listener class
        relay = type("RelayedCompileNotice", (event_module.Listener,),
                     {"on_start": lambda self, ev: _NOTICE.on_start(ev),
                      "on_end": lambda self, ev: _NOTICE.on_end(ev)})
        listener = relay()
    # numba-cuda's events carry their own prefix ("numba-cuda:compile"), Numba's "numba:"
    prefix = "numba-cuda" if "numba-cuda:compile" in getattr(event_module, "_builtin_kinds", ()) \
        else "numba"
    event_module.register(f"{prefix}:compile", listener)
    if prefix == "numba":
        from .kernels.cpu.threads import start_helper_at_first_miss

        start_helper_at_first_miss(_start_helper_quietly)
