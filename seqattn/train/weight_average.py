"""Weight averaging: an exponential moving average (EMA) of the weights over training steps.

The average of the weights along the last stretch of training is usually a better model than
the last weights themselves: it smooths out the noise of single mini-batch steps, which with
few samples (tens of series, hundreds of molecules) decides which epoch early stopping keeps.
``fit(..., average=EMA(decay))`` keeps the average beside the weights; validation, early
stopping, checkpoints and the model ``fit`` returns all use the averaged weights, while the
steps themselves go on from the raw ones.
"""
import numbers
from contextlib import contextmanager

import numpy as np

from .. import ops
from ..backend import CPU, device_of
from ..nn.placement import moved


def _copy(x):
    """A copy of x on its own device."""
    return moved(np.array(moved(x, CPU)), device_of(x))


class EMA:
    """Exponential moving average of the trained parameters, updated after every step.

    After step t (1, 2, ...) the average moves toward the weights by ``1 - d_t``, where
    ``d_t = min(decay, (1 + t) / (10 + t))`` with ``warmup`` (so that the first steps, far from
    any good weights, are forgotten quickly) and ``d_t = decay`` without it. With decay d the
    average spans about 1 / (1 - d) steps: 0.99 about a hundred, 0.999 about a thousand.

    Parameters
    ----------
    decay : float, default 0.99
        The average's weight on its previous value, in (0, 1).
    warmup : bool, default True
        Ramp the decay up over the first steps, as above (2/11 at the first, 0.5 at the eighth).
    """

    def __init__(self, decay=0.99, warmup=True):
        if isinstance(decay, bool) or not isinstance(decay, numbers.Real) \
                or not 0.0 < decay < 1.0:
            raise ValueError(f"decay must be a number in (0, 1), the average's weight on its "
                             f"previous value; got {decay!r}")
        self.decay, self.warmup = float(decay), bool(warmup)
        self.steps = 0
        self._params = None
        self._averages = None

    def attach(self, params):
        """Start averaging ``params``, (name, Parameter) pairs (an optimizer's ``params``),
        from their current values; called by ``fit`` before the first step."""
        self._params = list(params)
        self._averages = {name: _copy(p.data) for name, p in self._params}
        self.steps = 0

    def _attached(self):
        if self._params is None:
            raise RuntimeError("the EMA is not attached to any parameters; fit(..., "
                               "average=EMA()) attaches it")
        return self._params

    def rate(self):
        """The decay of the next update, ``d_t`` above."""
        if not self.warmup:
            return self.decay
        return min(self.decay, (1.0 + self.steps + 1) / (10.0 + self.steps + 1))

    def update(self):
        """Move the average toward the current weights (after an optimizer step)."""
        weight = 1.0 - self.rate()
        for name, p in self._attached():
            ops.move_toward(self._averages[name], p.data, weight)
        self.steps += 1

    @contextmanager
    def applied(self):
        """Within the block the parameters hold the averaged weights; the raw ones are back
        after it (the arrays are swapped, nothing is copied)."""
        params = self._attached()
        self._swap(params)
        try:
            yield
        finally:
            self._swap(params)

    def _swap(self, params):
        for name, p in params:
            p.data, self._averages[name] = self._averages[name], p.data

    def state_dict(self):
        """{"settings": JSON-able dict, "arrays": {name: host array}} for checkpoints."""
        self._attached()
        return {"settings": {"decay": self.decay, "warmup": self.warmup, "steps": self.steps},
                "arrays": {name: np.array(moved(a, CPU)) for name, a in self._averages.items()}}

    def load_state_dict(self, state):
        """Restore :meth:`state_dict`'s output into an attached average (resuming)."""
        params = dict(self._attached())
        settings, arrays = state["settings"], state["arrays"]
        if set(arrays) != set(params):
            raise KeyError(f"the stored average does not match the parameters: missing "
                           f"{sorted(set(params) - set(arrays))}, unexpected "
                           f"{sorted(set(arrays) - set(params))}")
        for name, value in arrays.items():
            current = self._averages[name]
            if tuple(value.shape) != tuple(current.shape):
                raise ValueError(f"the stored average of {name} has shape {tuple(value.shape)}; "
                                 f"the parameter has {tuple(current.shape)}")
            self._averages[name] = moved(np.ascontiguousarray(value, dtype=current.dtype),
                                         device_of(current))
        self.steps = int(settings["steps"])
        return self

    def __repr__(self):
        return f"EMA(decay={self.decay!r}, warmup={self.warmup!r})"
