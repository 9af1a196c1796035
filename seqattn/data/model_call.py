"""Calling a model on a batch the way predict does: the one place that knows the model protocol.

The protocol (no dependency on seqattn's model classes, so any NumPy code fits)::

    model(tokens, key_padding_mask, coords=coords) -> predictions

with ``tokens`` (B, N, F), ``key_padding_mask`` (B, N) bool (True = padded), ``coords`` a dict of
(B, N) float64 per-token coordinates (names in :mod:`seqattn.data.batch`) passed by keyword,
and ``predictions`` a NumPy array (B, N, F_out) (N -> N) or (B, F_out) (N -> 1). A callable that
takes no ``coords`` argument is called as ``model(tokens, key_padding_mask)``. A batch with a
``structure`` (atoms, graphs) is passed it as ``structure=`` too, on the model's device and in
its dtype when the model has them; a model without that parameter is an error, since it would
predict without the structure. An object with a
``predict`` method of that signature works too, and is preferred over ``__call__``.

A model with training and evaluation modes (``.training``, ``.eval()``, ``.train(mode)``: every
seqattn model) runs in evaluation mode and gets its own mode back afterwards. A seqattn module
is switched for the predicting thread only (``module.mode(False)``), so predicting never changes
the mode that ``fit`` trains it in on another thread; other models' switch is guarded by one
lock per process, so chunks predicted on several threads never run one shared model in the
other's mode; models without modes run concurrently.
"""
import threading
from contextlib import contextmanager

import numpy as np

from ..nn.call_arguments import takes_keyword
from ..nn.module import Module
from ..nn.structured_bias import structure_argument

_MODE_LOCK = threading.RLock()


def as_model_function(model):
    """The callable behind `model` (its ``predict`` method if it has one)."""
    run = getattr(model, "predict", None)
    if callable(run):
        return run
    if callable(model):
        return model
    raise TypeError(f"model must be callable as model(tokens, key_padding_mask, coords=...) or "
                    f"have such a predict method; got {type(model).__name__}")


def takes_coords(function):
    """Whether `function` accepts a ``coords`` keyword argument."""
    return takes_keyword(function, "coords")


def has_modes(model):
    return all(hasattr(model, name) for name in ("training", "eval", "train"))


@contextmanager
def evaluation_mode(model):
    """Run the block with `model` in evaluation mode, then give it back its own mode."""
    if not has_modes(model):
        yield
        return
    if isinstance(model, Module):  # its mode for this thread only: fit may train it meanwhile
        with model.mode(False):
            yield
        return
    with _MODE_LOCK:
        was_training = bool(model.training)
        model.eval()
        try:
            yield
        finally:
            model.train(was_training)


class ModelCall:
    """`model` behind predict's protocol: ``ModelCall(model)(batch)`` -> a NumPy array, or
    a dict of them where the model returns named outputs (a molecule model's ``predict``:
    ``{"structure": ..., "forces": ...}``). Picklable when the model is, so it can be
    shipped to dask workers."""

    def __init__(self, model):
        as_model_function(model)  # refuse a non-callable now, not on a worker later
        self.model = model

    def __call__(self, batch):
        function = as_model_function(self.model)
        kwargs = structure_argument(self.model, getattr(batch, "structure", None),
                                    takes_keyword(function, "structure"))
        if takes_coords(function):
            kwargs["coords"] = batch.coords
        with evaluation_mode(self.model):
            out = function(batch.tokens, batch.key_padding_mask, **kwargs)
        if isinstance(out, dict):  # named output groups (a molecule model's predict)
            return {key: None if value is None else _on_host(value)
                    for key, value in out.items()}
        return _on_host(out)


def _on_host(out):
    """`out` as a NumPy array (a device array's predictions go back to the host)."""
    if hasattr(out, "copy_to_host"):
        out = out.copy_to_host()
    return np.asarray(out)
