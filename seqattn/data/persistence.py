"""An adapter described as JSON-able data (its configuration and fitted state) and rebuilt from
it: what ``seqattn.save`` / ``seqattn.load`` store for adapters. Never pickle: loading a pickle
runs arbitrary code, and JSON can be read and checked by people and tools.

The description is ``{"adapter": class name, "config": the keyword arguments of __init__,
"state": what fit learned}``. ``config()`` reads ``__init__``'s signature and the attributes of
the same names, so an adapter keeps each hyperparameter under its argument's name; ``state`` is
``get_state()`` (the normalizer and the targets' description here; an adapter adds its own
fitted fields by extending ``get_state`` and ``set_state``).
"""
import inspect

import numpy as np

from .normalize import Normalizer
from .targets import TargetSpec


def as_json(value):
    """`value` in a form JSON keeps: tuples as lists, dtypes by name, numpy scalars as numbers."""
    if isinstance(value, dict):
        return {str(k): as_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [as_json(v) for v in value]
    if isinstance(value, np.dtype):
        return value.name
    if isinstance(value, type) and issubclass(value, np.generic):
        return np.dtype(value).name
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return value


class Persistable:
    """Mixin for adapters: ``to_dict()`` / ``from_dict(d)``, see the module docstring.
    ``Persistable.from_dict(d)`` rebuilds whichever adapter class `d` names; a subclass's own
    ``from_dict`` refuses a description of another class."""

    normalizer = None
    target_specs = ()  # TargetSpec per target, set by fit

    def config(self):
        """The keyword arguments of ``__init__`` as this adapter holds them, JSON-able."""
        parameters = inspect.signature(type(self).__init__).parameters
        return {name: as_json(getattr(self, name)) for name in parameters
                if name != "self" and parameters[name].kind not in (
                    inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)}

    def get_state(self):
        """What ``fit`` learned, JSON-able."""
        return {"normalizer": None if self.normalizer is None else self.normalizer.to_dict(),
                "targets": [spec.to_dict() for spec in self.target_specs]}

    def set_state(self, state):
        """Restore what :meth:`get_state` described."""
        normalizer = state.get("normalizer")
        self.normalizer = None if normalizer is None else Normalizer.from_dict(normalizer)
        self.target_specs = tuple(TargetSpec.from_dict(t) for t in state.get("targets", ()))

    def to_dict(self):
        return {"adapter": type(self).__name__, "config": self.config(),
                "state": self.get_state()}

    @classmethod
    def from_dict(cls, d):
        name = d.get("adapter")
        if cls is Persistable:
            classes = {c.__name__: c for c in _subclasses(Persistable)}
            if name not in classes:
                raise ValueError(f"this file describes a {name!r}, which is not an adapter "
                                 f"class ({sorted(classes)})")
            cls = classes[name]
        elif name != cls.__name__:
            raise ValueError(f"this file describes a {name!r}, not a "
                             f"{cls.__name__}; load it with that class")
        adapter = cls(**d["config"])
        # files written before the state had its own entry kept only the normalizer
        adapter.set_state(d.get("state", {"normalizer": d.get("normalizer")}))
        return adapter


def _subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)
