"""The training loop: ``fit(model, loss, optimizer, data, ...)`` for all three task shapes.

One step: forward in training mode, the loss, ``model.backward(loss.backward())``, the global
gradient norm (for clipping, and to refuse non-finite gradients), the learning rate from the
schedule, the optimizer step. Each epoch ends with validation, early stopping, the checkpoint
and the callbacks. Models that condition on their targets (an encoder-decoder trained with
teacher forcing, ``teacher_forced = True``) are called ``model(inputs, targets, ...)``, every
other model ``model(inputs, ...)``; ``key_padding_mask=`` is passed when a batch has one.
"""
import math
from pathlib import Path

import numpy as np

from ..backend import CPU
from ..nn.placement import moved
from .batches import as_batches
from .checkpoints import load_checkpoint, save_checkpoint
from .clipping import clip_factor, global_grad_norm


class NonFiniteLossError(FloatingPointError):
    """The loss or the gradients became inf or NaN; the weights are those of the last finite
    step and no checkpoint was written with them."""


class FitState:
    """What callbacks see after each epoch; setting ``stop_training`` ends the run."""

    def __init__(self, model, optimizer, history):
        self.model, self.optimizer, self.history = model, optimizer, history
        self.epoch = 0
        self.stop_training = False


def _host_batch(batch, loss, dtype, where):
    """Checks on the host copy of a batch: NaN inputs are an error, NaN targets need a
    NaN-aware loss; float targets take the model's dtype."""
    inputs, targets = np.asarray(batch.inputs), np.asarray(batch.targets)
    if np.issubdtype(inputs.dtype, np.floating):
        if np.isnan(inputs).any():
            raise ValueError(f"inputs contain NaN ({where}); seqattn does not guess values: mark "
                             "missing tokens in key_padding_mask and fill them (the adapters "
                             "do), or drop those samples")
        inputs = inputs.astype(dtype, copy=False)
    if np.issubdtype(targets.dtype, np.floating):
        if not loss.skips_nan and np.isnan(targets).any():
            raise ValueError(f"targets contain NaN ({where}) but {type(loss).__name__} does not "
                             "skip them; use its NaN-aware form (skip_nan=True) to ignore "
                             "missing targets")
        targets = targets.astype(dtype, copy=False)
    mask = batch.key_padding_mask
    if mask is not None:
        mask = np.asarray(mask)
        if mask.dtype != np.bool_ or mask.shape != inputs.shape[:2]:
            raise ValueError(f"key_padding_mask must be bool (B, N) = {inputs.shape[:2]} "
                             f"({where}); got {mask.dtype} {mask.shape}")
    return inputs, targets, mask


def _forward(model, inputs, targets, mask, device):
    inputs = moved(np.ascontiguousarray(inputs), device)
    targets = moved(np.ascontiguousarray(targets), device)
    kwargs = {} if mask is None else {"key_padding_mask": moved(mask, device)}
    if getattr(model, "teacher_forced", False):
        return model(inputs, targets, **kwargs), targets
    return model(inputs, **kwargs), targets


def evaluate(model, loss, data, metrics=None, batch_size=32):
    """Mean loss (weighted exactly as one big batch would be) and metrics over ``data``, in
    evaluation mode. ``metrics``: name -> f(pred, target) on host arrays, averaged over samples."""
    batches = as_batches(data, batch_size=batch_size, shuffle=False)
    metrics = metrics or {}
    was_training = model.training
    model.eval()
    total = weight = samples = 0.0
    sums = {name: 0.0 for name in metrics}
    try:
        for i, batch in enumerate(batches.epoch(0)):
            inputs, targets, mask = _host_batch(batch, loss, model.dtype, f"validation batch {i}")
            pred, targets_on_device = _forward(model, inputs, targets, mask, model.device)
            value = loss(pred, targets_on_device, batch.coords)
            total += value * loss.weight_sum
            weight += loss.weight_sum
            samples += len(inputs)
            if metrics:
                pred_host = moved(pred, CPU)
                for name, metric in metrics.items():
                    sums[name] += metric(pred_host, targets) * len(inputs)
    finally:
        model.train(was_training)
    if samples == 0:
        raise ValueError("the validation data is empty")
    logs = {"loss": total / weight if weight else 0.0}
    logs.update({name: s / samples for name, s in sums.items()})
    return logs


def _progress(total, desc, enabled):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, disable=not enabled, leave=False)


def fit(model, loss, optimizer, data, *, epochs=1, batch_size=32, shuffle=True, seed=0,
        validation=None, metrics=None, schedule=None, clip_grad_norm=None, early_stopping=None,
        callbacks=(), checkpoint=None, resume=False, progress=True):
    """Train ``model`` and return the history: per-epoch lists of ``loss`` (training),
    ``lr`` (at the epoch's last step), and with ``validation`` ``val_loss`` and ``val_<metric>``.

    Parameters
    ----------
    data, validation : a tuple of arrays (inputs, targets[, key_padding_mask]) cut into
        mini-batches of ``batch_size`` (shuffled per epoch from ``seed`` when ``shuffle``), or
        any re-iterable of batches (see ``seqattn.train.batches``).
    metrics : name -> f(pred, target) on host arrays, computed on the validation data.
    schedule : step -> learning rate (``WarmupCosine``, ``StepDecay``), evaluated at the
        optimizer's step count before every step.
    clip_grad_norm : scale gradients whose global L2 norm exceeds this value.
    early_stopping : an :class:`EarlyStopping`; its best weights are restored at the end.
    callbacks : callables ``f(state)`` run after each epoch with a :class:`FitState`.
    checkpoint : a folder written after every epoch; with ``resume`` an existing checkpoint
        there is loaded first and training continues from its epoch, ending exactly where an
        uninterrupted run ends.

    Raises :class:`NonFiniteLossError` when the loss or the gradients stop being finite; the
    step that made them is not applied and no checkpoint is written.
    """
    batches = as_batches(data, batch_size=batch_size, shuffle=shuffle, seed=seed)
    history = {"loss": [], "lr": []}
    start_epoch = 0
    if checkpoint is not None and resume and (Path(checkpoint) / "state.json").exists():
        state = load_checkpoint(checkpoint, model, optimizer, early_stopping)
        start_epoch, history = state["epoch"], state["history"]
    fit_state = FitState(model, optimizer, history)
    parameters = [p for _, p in optimizer.params]
    model.train()
    for epoch in range(start_epoch, epochs):
        bar = _progress(len(batches) if hasattr(batches, "__len__") else None,
                        f"epoch {epoch + 1}/{epochs}", progress)
        total = weight = 0.0
        steps_in_epoch = 0
        for i, batch in enumerate(batches.epoch(epoch)):
            where = f"epoch {epoch + 1}, batch {i}"
            inputs, targets, mask = _host_batch(batch, loss, model.dtype, where)
            pred, targets_on_device = _forward(model, inputs, targets, mask, model.device)
            value = loss(pred, targets_on_device, batch.coords)
            optimizer.zero_grad()
            model.backward(loss.backward())
            norm = global_grad_norm(parameters)
            if not (math.isfinite(value) and math.isfinite(norm)):
                bar.close()
                raise NonFiniteLossError(
                    f"the {'loss' if not math.isfinite(value) else 'gradient norm'} became "
                    f"{value if not math.isfinite(value) else norm} at {where} (lr "
                    f"{optimizer.lr:.3g}); training stopped before applying that step, and "
                    "no checkpoint was written with it. Lower the learning rate, add a warmup "
                    "schedule or clip_grad_norm.")
            if schedule is not None:
                optimizer.lr = schedule(optimizer.steps)
            optimizer.step(1.0 if clip_grad_norm is None else clip_factor(norm, clip_grad_norm))
            total += value * loss.weight_sum
            weight += loss.weight_sum
            steps_in_epoch += 1
            bar.update(1)
            bar.set_postfix(loss=f"{total / weight if weight else 0.0:.4g}")
        bar.close()
        if steps_in_epoch == 0:
            raise ValueError(f"the training data is empty (no batch in epoch {epoch + 1})")
        logs = {"loss": total / weight if weight else 0.0, "lr": optimizer.lr}
        if validation is not None:
            val = evaluate(model, loss, validation, metrics, batch_size)
            logs.update({f"val_{k}": v for k, v in val.items()})
        for key, value in logs.items():
            history.setdefault(key, []).append(value)
        if progress:
            print(f"epoch {epoch + 1}/{epochs}: " +
                  ", ".join(f"{k} {v:.4g}" for k, v in logs.items()))
        stop = early_stopping is not None and early_stopping.update(epoch, logs, model)
        if checkpoint is not None:
            save_checkpoint(checkpoint, model, optimizer, epoch + 1, history, early_stopping)
        fit_state.epoch = epoch + 1
        for callback in callbacks:
            callback(fit_state)
        if stop or fit_state.stop_training:
            break
    if early_stopping is not None and early_stopping.best_weights is not None:
        model.load_state_dict(early_stopping.best_weights)
    return history
