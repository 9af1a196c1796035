"""An adapter described as JSON-able data (its configuration and normalization statistics) and
rebuilt from it: what ``seqattn.save`` / ``seqattn.load`` store for adapters. Never pickle:
loading a pickle runs arbitrary code, and JSON can be read and checked by people and tools."""
from .normalize import Normalizer


class Persistable:
    """Mixin for adapters: they provide ``config()`` (constructor keyword arguments, JSON-able)
    and a ``normalizer`` attribute (a Normalizer or None). ``Persistable.from_dict(d)`` rebuilds
    whichever adapter class `d` names; a subclass's own ``from_dict`` refuses a description of
    another class."""

    def to_dict(self):
        return {"adapter": type(self).__name__, "config": self.config(),
                "normalizer": None if self.normalizer is None else self.normalizer.to_dict()}

    @classmethod
    def from_dict(cls, d):
        normalizer = None if d["normalizer"] is None else Normalizer.from_dict(d["normalizer"])
        return cls._build(d, normalizer)

    @classmethod
    def _build(cls, header, normalizer):
        name = header.get("adapter")
        if cls is Persistable:
            classes = {c.__name__: c for c in _subclasses(Persistable)}
            if name not in classes:
                raise ValueError(f"this file describes a {name!r}, which is not an adapter "
                                 f"class ({sorted(classes)})")
            cls = classes[name]
        elif name != cls.__name__:
            raise ValueError(f"this file describes a {name!r}, not a "
                             f"{cls.__name__}; load it with that class")
        return cls(**header["config"], normalizer=normalizer)


def _subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)
