"""Training checkpoints: everything a run needs to continue exactly where it stopped.

A checkpoint is a folder: ``model.safetensors`` (the state dict, torch.nn names),
``optimizer.safetensors`` (its state arrays), ``best.safetensors`` (early stopping's best
weights, when there are any) and ``state.json`` (epoch, optimizer settings and step count,
which is the schedule position, the model's config, history, early-stopping progress and the
dropout generators' states). Files are written under temporary names and renamed, so an
interrupted save never leaves a half-written checkpoint behind.
"""
import dataclasses
import json
import os
from pathlib import Path

import numpy as np

from ..nn.dropout import Dropout

FORMAT_VERSION = 1


def model_config(model):
    """{"type": class name, "config": fields} for a model with a config dataclass, else None."""
    config = getattr(model, "config", None)
    if not dataclasses.is_dataclass(config):
        return None
    return {"type": type(model).__name__, "config_type": type(config).__name__,
            "config": dataclasses.asdict(config)}


def _dropouts(model):
    return [(name, m) for name, m in model.named_modules() if isinstance(m, Dropout)]


def _save_arrays(arrays, path):
    from safetensors.numpy import save_file

    tmp = f"{path}.tmp"
    save_file({k: np.ascontiguousarray(v) for k, v in arrays.items()}, tmp)
    os.replace(tmp, path)


def _load_arrays(path):
    from safetensors.numpy import load_file

    return load_file(str(path))


def save_checkpoint(path, model, optimizer, epoch, history=None, early_stopping=None,
                    extra=None):
    """Write the checkpoint folder ``path`` after ``epoch`` completed epochs."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    optimizer_state = optimizer.state_dict()
    _save_arrays(model.state_dict(), path / "model.safetensors")
    _save_arrays(optimizer_state["arrays"], path / "optimizer.safetensors")
    if early_stopping is not None and early_stopping.best_weights is not None:
        _save_arrays(early_stopping.best_weights, path / "best.safetensors")
    state = {
        "format": FORMAT_VERSION,
        "epoch": epoch,
        "optimizer": optimizer_state["settings"],
        "model": model_config(model),
        "history": history or {},
        "early_stopping": None if early_stopping is None else early_stopping.state(),
        "dropout_generators": {name: m._rng.bit_generator.state for name, m in _dropouts(model)},
        "extra": extra or {},
    }
    tmp = path / "state.json.tmp"
    tmp.write_text(json.dumps(state, indent=2))
    os.replace(tmp, path / "state.json")


def load_checkpoint(path, model, optimizer=None, early_stopping=None):
    """Load a checkpoint into ``model`` (and ``optimizer``, ``early_stopping``); returns the
    state.json contents (``epoch``, ``history``, ...)."""
    path = Path(path)
    if not (path / "state.json").exists():
        raise FileNotFoundError(f"{path} holds no checkpoint (no state.json)")
    state = json.loads((path / "state.json").read_text())
    if state.get("format") != FORMAT_VERSION:
        raise ValueError(f"{path}/state.json has format {state.get('format')!r}; this seqattn "
                         f"reads format {FORMAT_VERSION}")
    model.load_state_dict(_load_arrays(path / "model.safetensors"))
    generators = state["dropout_generators"]
    for name, m in _dropouts(model):
        if name in generators:
            m._rng.bit_generator.state = generators[name]
    if optimizer is not None:
        optimizer.load_state_dict({"settings": state["optimizer"],
                                   "arrays": _load_arrays(path / "optimizer.safetensors")})
    if early_stopping is not None and state["early_stopping"] is not None:
        best = path / "best.safetensors"
        early_stopping.load_state(state["early_stopping"],
                                  _load_arrays(best) if best.exists() else None)
    return state


def load_model(path, device="cpu"):
    """Rebuild a ``seqattn.models`` model from a checkpoint's config and load its weights."""
    from .. import models

    state = json.loads((Path(path) / "state.json").read_text())
    saved = state.get("model")
    if saved is None:
        raise ValueError(f"{path} was saved from a model without a config dataclass; build the "
                         "model yourself and use load_checkpoint(path, model)")
    config = getattr(models, saved["config_type"])(**saved["config"])
    model = getattr(models, saved["type"])(config)
    model.load_state_dict(_load_arrays(Path(path) / "model.safetensors"))
    return model.to(device)
