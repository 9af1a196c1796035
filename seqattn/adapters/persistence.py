"""Saving and loading an adapter (its configuration and normalization statistics) as JSON or
netCDF. Never pickle: loading a pickle runs arbitrary code, and a JSON or netCDF file can be read
and checked by people and other tools."""
import json

import xarray as xr

from .normalize import Normalizer

CONFIG_ATTR = "seqattn_adapter"


class Persistable:
    """Mixin for adapters: they provide ``config()`` (constructor keyword arguments, JSON-able)
    and a ``normalizer`` attribute (a Normalizer or None). ``Persistable.from_dict(d)`` (and
    ``from_json``/``from_netcdf``) rebuild whichever adapter class `d` names; a subclass's own
    ``from_dict`` refuses a file of another class."""

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

    def to_json(self, path):
        with open(path, "w") as f:
            json.dump(self.to_dict(), f, indent=1)

    @classmethod
    def from_json(cls, path):
        with open(path) as f:
            return cls.from_dict(json.load(f))

    def to_netcdf(self, path):
        """The statistics as netCDF variables, the configuration as a JSON global attribute."""
        stats = xr.Dataset() if self.normalizer is None else self.normalizer.stats.copy()
        stats.attrs[CONFIG_ATTR] = json.dumps(
            {"adapter": type(self).__name__, "config": self.config(),
             "normalized": self.normalizer is not None})
        stats.to_netcdf(path)

    @classmethod
    def from_netcdf(cls, path):
        with xr.open_dataset(path) as ds:
            stats = ds.load()
        header = json.loads(stats.attrs.pop(CONFIG_ATTR))
        normalizer = Normalizer(stats) if header["normalized"] else None
        return cls._build(header, normalizer)


def _subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)
