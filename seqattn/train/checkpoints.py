"""Training checkpoints: the model ``fit`` returns, and everything a run needs to continue
exactly where it stopped.

A checkpoint is a folder that ``seqattn.load`` reads like any saved module (``seqattn.json`` and
``weights.safetensors``, see :mod:`seqattn.storage`): it gives the model ``fit`` would return if
training stopped there, which holds early stopping's best weights when it keeps some, else the
last epoch's. Beside them, ``training/`` holds what resuming needs:

* ``state.json``: epoch, optimizer settings and step count (which is the schedule's position),
  history, early-stopping progress and the dropout generators' states;
* ``optimizer.safetensors``: the optimizer's state arrays;
* ``last.safetensors``: the last epoch's weights, where training continues, when they are not
  the weights above (early stopping keeps best weights, or fit averages the weights);
* ``average.safetensors``: the moving average of the weights, when fit keeps one
  (:class:`~seqattn.train.EMA`; its settings and step count are in ``state.json``).

The whole folder is one commit (:func:`seqattn.storage.write_folder`): written and flushed
beside the old one, then renamed into place, with the sha256 of every file in ``seqattn.json``.
A crash at any point leaves the previous checkpoint or the new one, whole; loading verifies
every file and refuses a damaged one by name, and resuming after a crash between the two
renames continues from the previous checkpoint, kept until the new one is in place.
"""
import json
from pathlib import Path

from ..nn.dropout import Dropout
from ..storage import (WEIGHTS, arrays_bytes, check_weights, json_bytes, previous_folder,
                       read_arrays, read_checked, read_description, recover_folder, write_module)

FORMAT_VERSION = 3  # 3: one commit, checksums in seqattn.json
TRAINING = "training"
STATE = f"{TRAINING}/state.json"
OPTIMIZER = f"{TRAINING}/optimizer.safetensors"
LAST = f"{TRAINING}/last.safetensors"
AVERAGE = f"{TRAINING}/average.safetensors"


def _dropouts(model):
    return [(name, m) for name, m in model.named_modules() if isinstance(m, Dropout)]


def has_checkpoint(path):
    """Whether ``path`` holds a checkpoint that training can resume from (or held one before a
    save there was interrupted).

    Parameters
    ----------
    path : str or os.PathLike
        The checkpoint folder.

    Returns
    -------
    bool
    """
    path = Path(path)
    return any((folder / STATE).exists() for folder in (path, previous_folder(path)))


def save_checkpoint(path, model, optimizer, epoch, history=None, early_stopping=None,
                    extra=None, average=None):
    """Write the checkpoint folder ``path`` after ``epoch`` completed epochs, in one commit.

    Parameters
    ----------
    path : str or os.PathLike
        The checkpoint folder; an earlier checkpoint there is replaced whole.
    model : seqattn.nn.Module
        The model being trained. Its weights are the folder's ``seqattn.load`` weights unless
        ``early_stopping`` holds best weights or ``average`` averages them, which then take
        their place (the last weights are kept beside them for resuming).
    optimizer : optimizer
        Its settings and arrays (``state_dict()``) are stored.
    epoch : int
        Completed epochs.
    history : dict or None, default None
        The losses per epoch so far, stored as JSON.
    early_stopping : EarlyStopping or None, default None
        Its state and best weights are stored.
    extra : dict or None, default None
        Further JSON-serialisable state to store (read back from ``load_checkpoint``'s result).
    average : EMA or None, default None
        The moving average of the weights ``fit`` keeps: stored, and without early stopping's
        best weights its averaged weights are the folder's ``seqattn.load`` weights.
    """
    best = None if early_stopping is None else early_stopping.best_weights
    average_state = None if average is None else average.state_dict()
    if best is None and average is not None:
        with average.applied():
            best = model.state_dict()
    optimizer_state = optimizer.state_dict()
    files = {OPTIMIZER: arrays_bytes(optimizer_state["arrays"]),
             STATE: json_bytes({
                 "format": FORMAT_VERSION,
                 "epoch": epoch,
                 "optimizer": optimizer_state["settings"],
                 "history": history or {},
                 "early_stopping": None if early_stopping is None else early_stopping.state(),
                 "dropout_generators": {name: m._rng.bit_generator.state
                                        for name, m in _dropouts(model)},
                 "extra": extra or {},
                 "average": None if average is None else average_state["settings"],
             })}
    if average is not None:
        files[AVERAGE] = arrays_bytes(average_state["arrays"])
    if best is not None:
        files[LAST] = arrays_bytes(model.state_dict())
    write_module(path, model, weights=best, require_arguments=False, files=files)


def _state(path, description):
    """state.json's checked contents."""
    file = path / STATE
    try:
        state = json.loads(read_checked(path, STATE, description))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"{file} is not valid JSON ({error}); the checkpoint is damaged") \
            from error
    if not isinstance(state, dict) or state.get("format") != FORMAT_VERSION:
        found = state.get("format") if isinstance(state, dict) else state
        raise ValueError(f"{file} has format {found!r}; this seqattn resumes from format "
                         f"{FORMAT_VERSION} (a checkpoint of an earlier seqattn cannot be resumed; "
                         "seqattn.load still gives its model)")
    return state


def _weights(path, name, description):
    arrays = read_arrays(path, name, description)
    check_weights(path / name, arrays, description.get("dtype"))
    return arrays


def load_average(path, average):
    """Load the moving average of the weights stored in the checkpoint ``path`` into
    ``average`` (an :class:`~seqattn.train.EMA` attached to the model's parameters), as
    ``fit(..., resume=True)`` does. The checkpoint and the run must agree on whether the weights
    are averaged: resuming with another choice would not end where the interrupted run would.

    Parameters
    ----------
    path : str or os.PathLike
        The checkpoint folder that :func:`save_checkpoint` wrote.
    average : EMA or None
        The run's average; None when the run keeps none.
    """
    path = Path(path)
    description = read_description(path)
    stored = _state(path, description).get("average")
    if (stored is None) != (average is None):
        raise ValueError(
            f"{path} was written by a run that {'averaged' if stored else 'did not average'} "
            f"the weights, but this one {'does not' if average is None else 'does'} "
            f"(average={average!r}); resume with the same average as the interrupted run")
    if average is not None:
        arrays = _weights(path, AVERAGE, description)
        average.load_state_dict({"settings": stored, "arrays": arrays})


def load_checkpoint(path, model, optimizer=None, early_stopping=None):
    """Load a checkpoint into ``model`` to continue training: the last epoch's weights (not the
    best ones: ``seqattn.load(path)`` gives those), and ``optimizer`` and ``early_stopping``
    states; returns the state.json contents (``epoch``, ``history``, ...). Every file is
    verified against its checksum before anything is loaded.

    Parameters
    ----------
    path : str or os.PathLike
        The checkpoint folder that :func:`save_checkpoint` wrote.
    model : seqattn.nn.Module
        Receives the last epoch's weights (and its dropout layers' random states).
    optimizer : optimizer or None, default None
        Receives the stored optimizer state; None leaves it out.
    early_stopping : EarlyStopping or None, default None
        Receives the stored early-stopping state and best weights; None leaves them out.

    Returns
    -------
    dict
        The stored state: ``epoch``, ``history``, ``extra`` and the rest of state.json.
    """
    path = Path(path)
    if not has_checkpoint(path):
        raise FileNotFoundError(f"{path} holds no training checkpoint (no {STATE})")
    recover_folder(path)
    description = read_description(path)
    state = _state(path, description)
    kept_best = LAST in description.get("files", {})
    last = _weights(path, LAST if kept_best else WEIGHTS, description)
    best = _weights(path, WEIGHTS, description) if kept_best else None
    optimizer_arrays = _weights(path, OPTIMIZER, {**description, "dtype": None}) \
        if optimizer else None
    model.load_state_dict(last)
    generators = state["dropout_generators"]
    for name, m in _dropouts(model):
        if name in generators:
            m._rng.bit_generator.state = generators[name]
    if optimizer is not None:
        optimizer.load_state_dict({"settings": state["optimizer"], "arrays": optimizer_arrays})
    if early_stopping is not None and state["early_stopping"] is not None:
        early_stopping.load_state(state["early_stopping"], best)
    return state
