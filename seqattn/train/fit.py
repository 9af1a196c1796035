"""The training loop: ``fit(model, loss, optimizer, data, ...)`` for all three task shapes.

One step: forward in training mode, the loss, ``model.backward(loss.backward())``, the global
gradient norm (for clipping, and to refuse non-finite gradients), the learning rate from the
schedule, the optimizer step. Each epoch ends with validation, early stopping, the checkpoint
and the callbacks. Models that condition on their targets (an encoder-decoder trained with
teacher forcing, ``teacher_forced = True``) are called ``model(inputs, targets, ...)``, every
other model ``model(inputs, ...)``; ``key_padding_mask=`` is passed when a batch has one, and
``coords=`` (the batch's per-token coordinates, name -> (B, N) float64 host arrays) when it has
some and the model's ``forward`` takes a ``coords`` parameter, so user models without one work,
and ``structure=`` (the tokens' pairwise structure, on the model's device and in its dtype) when
the batch has one; a model without that parameter is then an error. A loss that needs more
than one forward and backward (a loss on forces, which are themselves a gradient:
:class:`~seqattn.train.force_matching.EnergyForceLoss`) runs a step itself: its
``training_step(model, batch)`` fills the gradients and its ``batch_loss(model, batch)``
serves evaluation.
"""
import math
from contextlib import nullcontext

import numpy as np

from ..backend import CPU
from ..first_run import hand_over_step_end
from ..kernels.cpu.gemm.blas_library import single_threaded_blas
from ..nn.call_arguments import takes_keyword
from ..nn.placement import moved
from ..nn.structured_bias import structure_argument
from .batches import as_batches
from .checkpoints import has_checkpoint, load_average, load_checkpoint, save_checkpoint
from .clipping import clip_factor, global_grad_norm
from .distributed import DataParallel
from .optimizers import Optimizer
from .progress import EpochProgress
from .weight_average import EMA


class NonFiniteLossError(FloatingPointError):
    """The loss or the gradients became inf or NaN; the weights are those of the last finite
    step and no checkpoint was written with them."""


class FitState:
    """What callbacks see after each epoch; setting ``stop_training`` ends the run.

    ``fit`` builds it; ``epoch`` holds the epochs completed and ``stop_training`` starts False.

    Parameters
    ----------
    model : seqattn.nn.Module
        The model being trained.
    optimizer : optimizer
        Its optimizer.
    history : dict of str to list of float
        The losses and metrics per epoch so far.
    """

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
            raise ValueError(f"targets contain NaN ({where}: missing values, or False in an "
                             f"adapter batch's target_valid) but {type(loss).__name__} does not "
                             "skip them; use its NaN-aware form (skip_nan=True), so that missing "
                             "targets count for nothing")
        targets = targets.astype(dtype, copy=False)
    mask = batch.key_padding_mask
    if mask is not None:
        mask = np.asarray(mask)
        if mask.dtype != np.bool_ or mask.shape != inputs.shape[:2]:
            raise ValueError(f"key_padding_mask must be bool (B, N) = {inputs.shape[:2]} "
                             f"({where}); got {mask.dtype} {mask.shape}")
    return inputs, targets, mask


def takes_coords(model):
    """Whether ``model.forward`` accepts ``coords`` (asked once per fit or evaluate)."""
    return takes_keyword(model, "coords")


def takes_structure(model):
    """Whether ``model.forward`` accepts ``structure``."""
    return takes_keyword(model, "structure")


def _batch_loss(model, loss, batch, where, pass_coords):
    """Forward ``batch`` through ``model`` and the loss: (loss value, prediction, host targets)."""
    if hasattr(loss, "batch_loss"):  # a loss that runs the model itself (forces: -dE/dx)
        return loss.batch_loss(model, batch)
    inputs, targets, mask = _host_batch(batch, loss, model.dtype, where)
    device = model.device
    inputs = moved(np.ascontiguousarray(inputs), device)
    targets_on_device = moved(np.ascontiguousarray(targets), device)
    kwargs = {} if mask is None else {"key_padding_mask": moved(mask, device)}
    if pass_coords and batch.coords:
        kwargs["coords"] = batch.coords
    kwargs.update(structure_argument(model, batch.structure, takes_structure(model)))
    if getattr(model, "teacher_forced", False):
        pred = model(inputs, targets_on_device, **kwargs)
    else:
        pred = model(inputs, **kwargs)
    return loss(pred, targets_on_device, batch.coords), pred, targets


def evaluate(model, loss, data, metrics=None, batch_size=32, distributed=None):
    """Mean loss (weighted exactly as one big batch would be) and metrics over ``data`` (as
    ``fit``'s ``validation``), in evaluation mode. An iterable with ``epoch(e)`` is read as
    ``epoch(0)``, so every evaluation sees the same order.

    Parameters
    ----------
    model : seqattn.nn.Module
        The model to evaluate (put in evaluation mode for the call, on this thread only).
    loss : loss module
        The loss, e.g. :class:`MSELoss`.
    data : tuple of arrays, or iterable of batches, or callable returning one
        A tuple (inputs, targets[, key_padding_mask]) cut into batches in order, or batches in
        any form :func:`fit` takes.
    metrics : dict of str to callable, default None
        name -> f(pred, target) on host arrays, averaged over samples; None: the loss only.
    batch_size : int, default 32
        Samples per batch when ``data`` is a tuple of arrays.
    distributed : None, bool, mpi4py communicator or DataParallel, default None
        As in :func:`fit`: each rank evaluates its share of the batches and every rank returns
        the totals over all of them.

    Returns
    -------
    dict of str to float
        ``"loss"`` and each metric's mean.
    """
    batches = as_batches(data, batch_size=batch_size, shuffle=False, name="validation")
    parallel = DataParallel.from_argument(distributed)
    pass_coords = takes_coords(model)
    metrics = metrics or {}
    total = weight = samples = 0.0
    sums = {name: 0.0 for name in metrics}
    with model.mode(False):  # this thread only: another may be predicting meanwhile
        batches_here = batches.epoch(0) if parallel is None \
            else batches.shard(0, parallel.rank, parallel.size)
        for i, batch in enumerate(batches_here):
            if batch is None:  # the other ranks hold the last batches
                continue
            value, pred, targets = _batch_loss(model, loss, batch, f"validation batch {i}",
                                               pass_coords)
            total += value * loss.weight_sum
            weight += loss.weight_sum
            samples += len(batch)
            if metrics:
                pred_host = pred if isinstance(pred, dict) else moved(pred, CPU)
                for name, metric in metrics.items():
                    sums[name] += metric(pred_host, targets) * len(targets)
    if parallel is not None:
        names = list(sums)
        reduced = parallel.sum([total, weight, samples, *(sums[n] for n in names)])
        total, weight, samples = reduced[:3]
        sums = dict(zip(names, reduced[3:]))
    if samples == 0:
        raise ValueError("the validation data is empty")
    logs = {"loss": total / weight if weight else 0.0}
    logs.update({name: s / samples for name, s in sums.items()})
    return logs


def _batch_number(step, parallel):
    """The epoch's index of the batch this rank trains on at `step`."""
    return step if parallel is None else step * parallel.size + parallel.rank


def _gradients(model, loss, optimizer, batch, where, pass_coords):
    """Fill the gradients from `batch`: (loss value, the loss's weight_sum). A rank without a
    batch in a distributed step (the epoch ran out) contributes zero gradients and weight."""
    optimizer.zero_grad()
    if batch is None:
        return 0.0, 0.0
    if hasattr(loss, "training_step"):  # its own passes: seqattn.train.force_matching
        value = loss.training_step(model, batch)
    else:
        value, _, _ = _batch_loss(model, loss, batch, where, pass_coords)
        model.backward(loss.backward())
    return value, loss.weight_sum


def _train_epoch(model, loss, optimizer, epoch_batches, epoch, schedule, clip_grad_norm,
                 pass_coords, display, parallel, average):
    """One epoch of steps; returns its mean loss (weighted as one big batch would be)."""
    parameters = [p for _, p in optimizer.params]
    total = weight = 0.0
    steps = 0
    for i, batch in enumerate(epoch_batches):
        where = f"epoch {epoch + 1}, batch {_batch_number(i, parallel)}"
        value, local_weight = _gradients(model, loss, optimizer, batch, where, pass_coords)
        batch_weight = local_weight
        if parallel is not None:  # the step on the union of the ranks' batches
            batch_weight, summed = parallel.sum([local_weight, value * local_weight])
            value = summed / batch_weight if batch_weight else 0.0
            parallel.average_gradients(parameters, local_weight, batch_weight)
        norm = global_grad_norm(parameters)
        if not (math.isfinite(value) and math.isfinite(norm)):
            raise NonFiniteLossError(
                f"the {'loss' if not math.isfinite(value) else 'gradient norm'} became "
                f"{value if not math.isfinite(value) else norm} at {where} (lr "
                f"{optimizer.lr:.3g}); training stopped before applying that step, and "
                "no checkpoint was written with it. Lower the learning rate, add a warmup "
                "schedule or clip_grad_norm.")
        if schedule is not None:
            optimizer.lr = schedule(optimizer.steps)
        optimizer.step(1.0 if clip_grad_norm is None else clip_factor(norm, clip_grad_norm))
        if average is not None:
            average.update()
        total += value * batch_weight
        weight += batch_weight
        steps += 1
        display.step(total / weight if weight else 0.0)
    if steps == 0:
        raise ValueError(f"the training data is empty (no batch in epoch {epoch + 1})")
    return total / weight if weight else 0.0


def fit(model, loss, optimizer, data, *, epochs=1, batch_size=32, shuffle=True, seed=0,
        validation=None, metrics=None, schedule=None, clip_grad_norm=None, early_stopping=None,
        callbacks=(), checkpoint=None, resume=False, progress=True, distributed=None,
        average=None):
    """Train ``model`` and return the history: per-epoch lists of ``loss`` (training),
    ``lr`` (at the epoch's last step), and with ``validation`` ``val_loss`` and ``val_<metric>``.

    Parameters
    ----------
    model : seqattn.nn.Module
        The model to train, in place.
    loss : loss module
        The loss, e.g. :class:`MSELoss` or :class:`CrossEntropyLoss`.
    optimizer : optimizer
        Its optimizer over ``model.parameters()``, e.g. :class:`AdamW`.
    data, validation : tuple of arrays, or iterable of batches, or callable returning one
        A tuple of arrays (inputs, targets[, key_padding_mask]) cut into mini-batches of
        ``batch_size`` (shuffled per epoch from ``seed`` when ``shuffle``), or batches from
        elsewhere (see ``seqattn.train.batches`` for every form): a list, an adapter iterator
        (``ForecastWindows``; a ``BatchIterator``'s batches paired with targets), anything with
        ``epoch(e)`` (read for epoch e, so a resumed run sees the batches an uninterrupted one
        sees), a callable returning a fresh iterable each epoch, or a generator, which serves
        one epoch only (epoch 2 is an error that says so). ``validation`` defaults to None (no
        validation) and is read in order.
    epochs : int, default 1
        Epochs to train (in all, counting those a resumed checkpoint holds).
    batch_size : int, default 32
        Samples per batch when ``data`` (or ``validation``) is a tuple of arrays.
    shuffle : bool, default True
        Draw a new order of the samples of a tuple of arrays each epoch.
    seed : int, default 0
        Seed of those orders.
    metrics : dict of str to callable, default None
        name -> f(pred, target) on host arrays, computed on the validation data.
    schedule : callable, default None
        step -> learning rate (``WarmupCosine``, ``StepDecay``), evaluated at the optimizer's
        step count before every step; None keeps the optimizer's own.
    clip_grad_norm : float, default None
        Scale gradients whose global L2 norm exceeds this value; None: no clipping.
    early_stopping : EarlyStopping, default None
        Stops the run when the value it monitors (``val_loss`` by default) stops improving;
        its best weights are restored at the end. With its ``include_start`` the model as
        given is scored on ``validation`` first (epoch -1 to the stopper; not in the history)
        and kept if no epoch beats it.
    callbacks : sequence of callable, default ()
        ``f(state)`` run after each epoch with a :class:`FitState`.
    checkpoint : str or os.PathLike, default None
        A folder written after every epoch. ``seqattn.load(checkpoint)`` gives the model as fit
        would return it at that point (with early stopping's best weights when it keeps some).
    resume : bool, default False
        With ``checkpoint``, load an existing checkpoint there first and continue from its
        last epoch, ending exactly where an uninterrupted run ends.
    progress : bool, default True
        On a terminal a bar per epoch, elsewhere one line per epoch; False: silent.
    distributed : None, bool, mpi4py communicator or DataParallel, default None
        None (one process), True (data-parallel over MPI.COMM_WORLD when run as
        ``mpiexec -n 4 python script.py``), an mpi4py communicator, or a
        :class:`~seqattn.train.DataParallel`; see :mod:`seqattn.train.distributed`. Each step
        is then the one a single process makes on the union of the ranks' batches; rank 0
        alone writes checkpoints and shows progress.
    average : EMA, default None
        Keep a moving average of the weights (:class:`~seqattn.train.EMA`), updated after every
        step. Validation (so the history's ``val_*``), early stopping and checkpoints then see
        the averaged weights, and the model ends with them (or with early stopping's best
        averaged weights); the steps go on from the raw weights.

    Returns
    -------
    dict of str to list of float
        The history: ``loss``, ``lr``, and with ``validation`` ``val_loss`` and
        ``val_<metric>``, one entry per epoch.

    Raises
    ------
    TypeError
        When ``optimizer`` is not an optimizer of seqattn.train.
    ValueError
        When ``optimizer`` updates none of ``model``'s parameters (built over another model).
    NonFiniteLossError
        When the loss or the gradients stop being finite; the step that made them is not
        applied and no checkpoint is written.
    """
    _check_optimizer(optimizer, model)
    # on a first run, the helper compiles the kernels that end each step from the start (a
    # validation pass before training, early_stopping's include_start, may come first)
    hand_over_step_end(optimizer)
    batches = as_batches(data, batch_size=batch_size, shuffle=shuffle, seed=seed)
    if validation is not None:
        validation = as_batches(validation, batch_size=batch_size, shuffle=False,
                                name="validation")
    parallel = DataParallel.from_argument(distributed)
    root = parallel is None or parallel.is_root
    pass_coords = takes_coords(model)
    history = {"loss": [], "lr": []}
    start_epoch = 0
    resuming = checkpoint is not None and resume and has_checkpoint(checkpoint)
    if resuming:
        state = load_checkpoint(checkpoint, model, optimizer, early_stopping)
        start_epoch, history = state["epoch"], state["history"]
    if parallel is not None:
        parallel.broadcast_parameters(model)
    if average is not None:
        if not isinstance(average, EMA):
            raise TypeError(f"average must be a seqattn.train.EMA (the weights' moving "
                            f"average) or None, got {type(average).__name__}")
        average.attach(optimizer.params)
    if resuming:
        load_average(checkpoint, average)
    fit_state = FitState(model, optimizer, history)
    if early_stopping is not None and early_stopping.include_start and start_epoch == 0:
        if validation is None:
            raise ValueError("early_stopping has include_start, which scores the model on the "
                             "validation data before training; pass validation=...")
        before = evaluate(model, loss, validation, metrics, batch_size, parallel)
        early_stopping.update(-1, {f"val_{k}": v for k, v in before.items()}, model)
    model.train()
    for epoch in range(start_epoch, epochs):
        epoch_batches = batches.epoch(epoch) if parallel is None \
            else batches.shard(epoch, parallel.rank, parallel.size)
        display = EpochProgress(progress and root, epoch, epochs, epoch_batches.total)
        try:
            # BLAS on the calling thread for the whole epoch: each kernel launch would
            # otherwise set and restore its thread count, several times a step
            with single_threaded_blas():
                logs = {"loss": _train_epoch(model, loss, optimizer, epoch_batches, epoch,
                                             schedule, clip_grad_norm, pass_coords, display,
                                             parallel, average),
                        "lr": optimizer.lr}
                if validation is not None:
                    with _averaged(average):
                        val = evaluate(model, loss, validation, metrics, batch_size, parallel)
                    logs.update({f"val_{k}": v for k, v in val.items()})
        except BaseException:
            display.close()
            raise
        for key, value in logs.items():
            history.setdefault(key, []).append(value)
        display.close(logs)
        with _averaged(average):
            stop = early_stopping is not None and early_stopping.update(epoch, logs, model)
        if checkpoint is not None and root:
            save_checkpoint(checkpoint, model, optimizer, epoch + 1, history, early_stopping,
                            average=average)
        fit_state.epoch = epoch + 1
        for callback in callbacks:
            callback(fit_state)
        if stop or fit_state.stop_training:
            break
    if early_stopping is not None and early_stopping.best_weights is not None:
        model.load_state_dict(early_stopping.best_weights)
    elif average is not None:
        with average.applied():
            weights = model.state_dict()
        model.load_state_dict(weights)
    return history


def _check_optimizer(optimizer, model):
    """An optimizer of seqattn.train over some of ``model``'s parameters: one built over
    another model (or over an earlier instance of this one) would step parameters that the
    loss never reaches, and the model would silently stay as it was."""
    if not isinstance(optimizer, Optimizer):
        raise TypeError(f"optimizer must be an optimizer of seqattn.train over the model's "
                        f"parameters, e.g. AdamW(model, lr=1e-3); got "
                        f"{type(optimizer).__name__}")
    parameters = getattr(model, "parameters", None)
    if parameters is None:
        return
    owned = {id(p) for p in parameters()}
    if not any(id(p) in owned for _, p in optimizer.params):
        raise ValueError("optimizer updates none of the model's parameters: it was built over "
                         "another model, or over an earlier instance of this one; build it "
                         "over the model that fit trains, e.g. AdamW(model, lr=1e-3)")


def _averaged(average):
    """The averaged weights in the model for a block, when fit keeps an average."""
    return nullcontext() if average is None else average.applied()
