"""What an adapter learns about its targets at ``fit``: values or classes, and for classes
their names, so that batches carry class indices and predictions come back as labels with
probabilities.

A target is **classes** when its dtype is integer, bool or text (strings, objects), or when its
attrs declare them (``classes``, or CF's ``flag_values`` with ``flag_meanings``); otherwise it
is **values** (a float regression target). Class names are the declared ones, else the sorted
distinct labels of the samples ``fit`` saw. In batches a class is its index into the names
(int64), a missing label (NaN, None, "") is :data:`MISSING_CLASS`, which
:class:`seqattn.train.CrossEntropyLoss` ignores; a label ``fit`` never saw is an error that names
it. Predicted classes go back as ``<target>`` (the label) and ``<target>_probability`` on
(..., ``class``), the class names being the ``class`` coordinate.
"""
from dataclasses import asdict, dataclass

import numpy as np
import xarray as xr

MISSING_CLASS = -100  # CrossEntropyLoss's default ignore_index
CLASS_DIM = "class"


@dataclass(frozen=True)
class TargetSpec:
    """A target variable as ``fit`` saw it: ``name``, ``kind`` ("values" or "classes"),
    ``classes`` (the class names, JSON-able; None for values), ``attrs`` (the variable's own,
    given back with predictions of values)."""

    name: str
    kind: str
    classes: tuple = None
    attrs: dict = None

    @property
    def n_classes(self):
        return len(self.classes)

    def to_dict(self):
        d = asdict(self)
        d["classes"] = None if self.classes is None else list(self.classes)
        return d

    @classmethod
    def from_dict(cls, d):
        classes = d.get("classes")
        return cls(d["name"], d["kind"], None if classes is None else tuple(classes),
                   d.get("attrs") or {})


def _is_missing(values):
    if values.dtype.kind == "f":
        return np.isnan(values)
    if values.dtype.kind in "OUS":
        return np.array([v is None or v == "" or (isinstance(v, float) and np.isnan(v))
                         for v in values.ravel()], dtype=bool).reshape(values.shape)
    return np.zeros(values.shape, dtype=bool)


def _plain(value):
    """A label as JSON keeps it (numpy scalars to Python ones)."""
    return value.item() if isinstance(value, np.generic) else value


def _json_attrs(attrs):
    out = {}
    for key, value in attrs.items():
        if isinstance(value, np.ndarray):
            value = value.tolist()
        elif isinstance(value, np.generic):
            value = value.item()
        if isinstance(value, (str, int, float, bool, list)) or value is None:
            out[str(key)] = value
    return out


def declared_classes(da):
    """The class names `da`'s attrs declare, or None."""
    attrs = da.attrs
    if "classes" in attrs:
        return tuple(_plain(c) for c in np.atleast_1d(attrs["classes"]))
    if "flag_values" in attrs and "flag_meanings" in attrs:
        return tuple(_plain(v) for v in np.atleast_1d(attrs["flag_values"]))
    return None


def is_classes(da):
    return da.dtype.kind in "biuOUS" or declared_classes(da) is not None


def describe_targets(da, name):
    """The TargetSpec of target variable `da` (the samples ``fit`` selected)."""
    if not is_classes(da):
        if da.dtype.kind not in "f":
            raise TypeError(f"target {name!r} has dtype {da.dtype}; expected float values or "
                            "class labels (integers, bools or strings)")
        if da.size and not np.isfinite(np.asarray(da.values)).any():
            raise ValueError(f"target {name!r} has no finite value in the samples fit saw, so "
                             "a model would learn from nothing; fit on samples with targets")
        return TargetSpec(name, "values", None, _json_attrs(da.attrs))
    classes = declared_classes(da)
    if classes is None:
        values = np.asarray(da.values).ravel()
        values = values[~_is_missing(values)]
        if values.size == 0:
            raise ValueError(f"target {name!r} has no labelled sample in the selection fit saw")
        classes = tuple(_plain(v) for v in np.unique(values.astype(str) if values.dtype.kind == "O"
                                                     else values))
    if len(classes) < 2:
        raise ValueError(f"target {name!r} has a single class {list(classes)} in the samples fit "
                         "saw; a classifier needs at least two")
    return TargetSpec(name, "classes", classes, _json_attrs(da.attrs))


def class_indices(spec, values):
    """Class indices (int64) of the labels `values`; MISSING_CLASS where a label is missing."""
    values = np.asarray(values)
    missing = _is_missing(values)
    labels = values.astype(str) if values.dtype.kind == "O" else values
    lookup = {c: i for i, c in enumerate(spec.classes)}
    out = np.full(values.shape, MISSING_CLASS, dtype=np.int64)
    for position in zip(*np.nonzero(~missing)):
        label = _plain(labels[position])
        if label not in lookup:
            raise ValueError(f"target {spec.name!r} has label {label!r}, which fit never saw (its "
                             f"classes: {list(spec.classes)}); fit on samples that hold every "
                             "class, or declare them in the variable's attrs['classes']")
        out[position] = lookup[label]
    return out


def softmax(logits):
    logits = np.asarray(logits, dtype=np.float64)
    shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)


def class_predictions(spec, logits, dims, coords=None, valid=None):
    """``{name: labels, name_probability: probabilities}`` DataArrays from `logits` (..., C) on
    `dims` (the dims of the leading axes); rows where `valid` is False get no label."""
    logits = np.asarray(logits)
    if logits.shape[-1] != spec.n_classes:
        raise ValueError(f"the model returned {logits.shape[-1]} outputs per sample for target "
                         f"{spec.name!r}, which has {spec.n_classes} classes {list(spec.classes)}")
    probability = softmax(logits).astype(np.float32)
    names = np.asarray(spec.classes, dtype=object if any(isinstance(c, str) for c in spec.classes)
                       else None)
    labels = names[np.argmax(logits, axis=-1)]
    if valid is not None:
        probability = np.where(np.asarray(valid)[..., None], probability, np.nan)
        if labels.dtype.kind == "f":
            labels = np.where(valid, labels, np.nan)
        else:
            labels = np.where(valid, labels, None).astype(object)
    coords = dict(coords or {})
    return {spec.name: xr.DataArray(labels, dims=dims, coords=coords),
            f"{spec.name}_probability": xr.DataArray(
                probability, dims=(*dims, CLASS_DIM),
                coords={**coords, CLASS_DIM: list(spec.classes)})}
