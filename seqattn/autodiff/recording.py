"""Whether differentiable ops are being recorded, whether a module's forward is running, and
which modules run in a mode of their own here.

All three are context-local (``contextvars``), so threads and notebooks' async cells do not
leak the state into one another. Recording is on by default; ``no_grad()`` and modules in
``eval()`` mode switch it off, and then ops record nothing and keep nothing for a backward pass.
``modes(modules, training)`` sets the mode of some modules for this thread (or task) only:
predict runs a model in evaluation mode that way while ``fit`` trains it in another thread.
"""
import contextlib
import contextvars

_recording = contextvars.ContextVar("seqattn_recording", default=True)
_forward_depth = contextvars.ContextVar("seqattn_forward_depth", default=0)


def is_recording():
    """True when differentiable ops record what their backward needs."""
    return _recording.get()


@contextlib.contextmanager
def no_grad():
    """Run ops without recording them: nothing is saved, nothing can be differentiated."""
    token = _recording.set(False)
    try:
        yield
    finally:
        _recording.reset(token)


@contextlib.contextmanager
def recording(enabled):
    """Record (``enabled``) or not for the duration of the block."""
    token = _recording.set(bool(enabled))
    try:
        yield
    finally:
        _recording.reset(token)


def inside_forward():
    """True while some module's forward is running: modules called there return Tensors."""
    return _forward_depth.get() > 0


class forward_scope:
    """``with forward_scope():`` marks a module's forward as running. A class rather than a
    generator-based context manager: every module call of a step enters one, and this costs
    a fraction of a generator's set-up (benchmarks/profile_train_step.py)."""

    __slots__ = ("_token",)

    def __enter__(self):
        self._token = _forward_depth.set(_forward_depth.get() + 1)

    def __exit__(self, *exception):
        _forward_depth.reset(self._token)


_modes = contextvars.ContextVar("seqattn_modes", default={})


def mode_here(module):
    """The mode ``modes`` set for ``module`` in this context (True: training), or None."""
    return _modes.get().get(id(module))


@contextlib.contextmanager
def modes(modules, training):
    """Run ``modules`` in training mode (``training``) or evaluation mode, in this context
    only, for the duration of the block; other threads keep the modes they see."""
    token = _modes.set({**_modes.get(), **{id(m): bool(training) for m in modules}})
    try:
        yield
    finally:
        _modes.reset(token)
