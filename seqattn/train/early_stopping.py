"""Early stopping: stop when a monitored value has not improved for ``patience`` epochs and
keep (a host copy of) the best weights, which the fit loop restores at the end."""
import math


class EarlyStopping:
    """Stops ``fit`` when a monitored quantity has not improved for ``patience`` epochs, and
    keeps the weights of the best epoch (which ``fit`` restores at the end).

    Parameters
    ----------
    patience : int, default 5
        Epochs without improvement before training stops.
    monitor : str, default 'val_loss'
        The epoch log to watch (``"loss"`` for the training loss, when there is no
        validation data).
    mode : str, default 'min'
        ``"min"`` when lower is better, ``"max"`` when higher is.
    min_delta : float, default 0.0
        The least change that counts as an improvement.
    include_start : bool, default False
        Score the model as ``fit`` receives it on the validation data before the first epoch
        (as epoch -1), so that a model started at a fitted baseline
        (:func:`seqattn.baselines.warm_start`) is kept when no epoch beats it. Needs a
        validation value to monitor.
    """

    def __init__(self, patience=5, monitor="val_loss", mode="min", min_delta=0.0,
                 include_start=False):
        if mode not in ("min", "max"):
            raise ValueError(f"mode must be 'min' or 'max', got {mode!r}")
        if isinstance(patience, bool) or not isinstance(patience, int) or patience < 1:
            raise ValueError(f"patience must be a whole number of epochs >= 1, got {patience!r}")
        if not min_delta >= 0:
            raise ValueError(f"min_delta must be >= 0 (the improvement that counts), got "
                             f"{min_delta!r}")
        if include_start and not monitor.startswith("val_"):
            raise ValueError(f"include_start scores the model on the validation data before "
                             f"training, but monitor={monitor!r} is not a validation value "
                             "('val_loss', 'val_<metric>')")
        self.patience, self.monitor, self.mode, self.min_delta = patience, monitor, mode, min_delta
        self.include_start = bool(include_start)
        self.best = math.inf if mode == "min" else -math.inf
        self.best_epoch = None
        self.wait = 0
        self.best_weights = None

    def _improved(self, value):
        if self.mode == "min":
            return value < self.best - self.min_delta
        return value > self.best + self.min_delta

    def update(self, epoch, logs, model):
        """Record epoch ``epoch``'s logs; returns True when training should stop."""
        if self.monitor not in logs:
            raise KeyError(f"early stopping monitors {self.monitor!r}, which the epoch logs "
                           f"lack (they have {sorted(logs)}); pass validation data or monitor "
                           "'loss'")
        value = logs[self.monitor]
        if self._improved(value):
            self.best, self.best_epoch, self.wait = value, epoch, 0
            self.best_weights = model.state_dict()
            return False
        self.wait += 1
        return self.wait >= self.patience

    def state(self):
        """JSON-able progress (the best weights are saved beside it as arrays)."""
        return {"best": self.best, "best_epoch": self.best_epoch, "wait": self.wait}

    def load_state(self, state, best_weights):
        self.best, self.best_epoch, self.wait = state["best"], state["best_epoch"], state["wait"]
        self.best_weights = best_weights
