"""Saving and loading models as safetensors weights with a JSON config beside them (no pickle).

``save(model, "run/model")`` writes run/model.safetensors (the state dict, torch.nn names) and
run/model.json (the class and constructor arguments); ``load("run/model")`` rebuilds the model
from the JSON and loads the weights. Either file can be read by other tools.
"""
import json

import numpy as np

from .module import Module

FORMAT_VERSION = 1


def _registry():
    from . import positional
    from .. import nn

    modules = {**vars(nn), **vars(positional)}
    return {name: cls for name, cls in modules.items()
            if isinstance(cls, type) and issubclass(cls, Module)}


def _encode(value):
    if isinstance(value, Module):
        return {"module": type(value).__name__, "config": _encode(value._config)}
    if isinstance(value, dict):
        return {k: _encode(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_encode(v) for v in value]
    if isinstance(value, np.ndarray):
        return {"array": value.tolist(), "dtype": value.dtype.name}
    if isinstance(value, np.dtype) or (isinstance(value, type) and issubclass(value, np.generic)):
        return {"dtype": np.dtype(value).name}
    if isinstance(value, np.random.Generator):
        return None  # the weights file holds the initialised values; the seed is not needed
    if isinstance(value, np.generic):
        return value.item()
    return value


def _decode(value, registry):
    if isinstance(value, list):
        return [_decode(v, registry) for v in value]
    if not isinstance(value, dict):
        return value
    if "module" in value:
        config = _decode(value["config"], registry)
        return registry[value["module"]](**config)
    if "array" in value:
        return np.asarray(value["array"], dtype=value["dtype"])
    if set(value) == {"dtype"}:
        return np.dtype(value["dtype"]).type
    return {k: _decode(v, registry) for k, v in value.items()}


def save(model, path):
    """Write ``path``.safetensors and ``path``.json."""
    from safetensors.numpy import save_file

    config = {"format": FORMAT_VERSION, "model": _encode(model)}
    with open(f"{path}.json", "w") as f:
        json.dump(config, f, indent=2)
    save_file({k: np.ascontiguousarray(v) for k, v in model.state_dict().items()},
              f"{path}.safetensors")


def load(path, device="cpu"):
    """Rebuild the model saved at ``path`` (without extensions) on ``device``."""
    from safetensors.numpy import load_file

    with open(f"{path}.json") as f:
        config = json.load(f)
    if config.get("format") != FORMAT_VERSION:
        raise ValueError(f"{path}.json has format {config.get('format')!r}; this seqattn reads "
                         f"format {FORMAT_VERSION}")
    model = _decode(config["model"], _registry())
    model.load_state_dict(load_file(f"{path}.safetensors"))
    return model.to(device)
