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
  the weights above (early stopping keeps best weights).

Every file is written under a temporary name and renamed, ``state.json`` last, so an interrupted
save never leaves a half-written file behind.
"""
import json
from pathlib import Path

from ..nn.dropout import Dropout
from ..storage import WEIGHTS, read_arrays, write_arrays, write_json, write_module

FORMAT_VERSION = 2
TRAINING = "training"
STATE = "state.json"
OPTIMIZER = "optimizer.safetensors"
LAST = "last.safetensors"


def _dropouts(model):
    return [(name, m) for name, m in model.named_modules() if isinstance(m, Dropout)]


def has_checkpoint(path):
    """Whether ``path`` holds a checkpoint that training can resume from."""
    return (Path(path) / TRAINING / STATE).exists()


def save_checkpoint(path, model, optimizer, epoch, history=None, early_stopping=None,
                    extra=None):
    """Write the checkpoint folder ``path`` after ``epoch`` completed epochs."""
    path = Path(path)
    training = path / TRAINING
    training.mkdir(parents=True, exist_ok=True)
    best = None if early_stopping is None else early_stopping.best_weights
    optimizer_state = optimizer.state_dict()
    write_arrays(training / OPTIMIZER, optimizer_state["arrays"])
    if best is None:
        (training / LAST).unlink(missing_ok=True)
    else:
        write_arrays(training / LAST, model.state_dict())
    write_module(path, model, weights=best, require_arguments=False)
    write_json(training / STATE, {
        "format": FORMAT_VERSION,
        "epoch": epoch,
        "optimizer": optimizer_state["settings"],
        "history": history or {},
        "early_stopping": None if early_stopping is None else early_stopping.state(),
        "dropout_generators": {name: m._rng.bit_generator.state for name, m in _dropouts(model)},
        "extra": extra or {},
    })


def load_checkpoint(path, model, optimizer=None, early_stopping=None):
    """Load a checkpoint into ``model`` to continue training: the last epoch's weights (not the
    best ones: ``seqattn.load(path)`` gives those), and ``optimizer`` and ``early_stopping``
    states; returns the state.json contents (``epoch``, ``history``, ...)."""
    path = Path(path)
    training = path / TRAINING
    if not has_checkpoint(path):
        raise FileNotFoundError(f"{path} holds no training checkpoint (no {TRAINING}/{STATE})")
    state = json.loads((training / STATE).read_text())
    if state.get("format") != FORMAT_VERSION:
        raise ValueError(f"{training / STATE} has format {state.get('format')!r}; this seqattn "
                         f"reads format {FORMAT_VERSION}")
    kept_best = (training / LAST).exists()
    model.load_state_dict(read_arrays(training / LAST if kept_best else path / WEIGHTS))
    generators = state["dropout_generators"]
    for name, m in _dropouts(model):
        if name in generators:
            m._rng.bit_generator.state = generators[name]
    if optimizer is not None:
        optimizer.load_state_dict({"settings": state["optimizer"],
                                   "arrays": read_arrays(training / OPTIMIZER)})
    if early_stopping is not None and state["early_stopping"] is not None:
        early_stopping.load_state(state["early_stopping"],
                                  read_arrays(path / WEIGHTS) if kept_best else None)
    return state
