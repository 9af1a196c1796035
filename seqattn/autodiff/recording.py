"""Whether differentiable ops are being recorded, and whether a module's forward is running.

Both are context-local (``contextvars``), so threads and notebooks' async cells do not leak the
state into one another. Recording is on by default; ``no_grad()`` and modules in ``eval()`` mode
switch it off, and then ops record nothing and keep nothing for a backward pass.
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


@contextlib.contextmanager
def forward_scope():
    token = _forward_depth.set(_forward_depth.get() + 1)
    try:
        yield
    finally:
        _forward_depth.reset(token)
