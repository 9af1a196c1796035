"""One way to store every seqattn object: ``save(obj, path)`` writes a folder, ``load(path)``
rebuilds the object from it. Never pickle: the folder holds JSON and safetensors, which people
and other tools can read and which run no code when loaded.

A folder holds ``seqattn.json``: ``{"format": 1, "kind": ..., "class": name, "module": where
the class was defined, ...}``, by kind:

* ``"module"``: any :class:`seqattn.nn.Module` (layers, task models, a user's own subclass).
  ``"arguments"`` are the constructor arguments the module was built with (``Module._config``)
  and ``"dtype"`` its parameters' dtype; the weights are in ``weights.safetensors`` (the state
  dict, with torch.nn's names). Loading calls the constructor again with those arguments, casts
  to the dtype and loads the weights.
* ``"object"``: an object with ``to_dict()`` and a ``from_dict`` classmethod (the adapters with
  their normalizer, a :class:`~seqattn.data.Normalizer`, a
  :class:`~seqattn.adapters.ForecastWindows` set-up with its adapter); ``"state"`` is its
  ``to_dict()``. Each loads with ``load(path)`` alone: a ForecastWindows holds no Dataset, and
  is given one by the call that uses it (``windows.batches(ds, ...)``, ``predict``).

A training checkpoint (``fit(checkpoint=...)``) is a module folder holding the model ``fit``
returns, plus a ``training/`` folder for resuming (see :mod:`seqattn.train.checkpoints`).

Every folder is written in one step (:func:`write_folder`): whole and flushed to disk in a
hidden sibling (``.name.writing``), then renamed into place, the earlier folder kept beside it
(``.name.previous``) until then; a crash leaves the old folder or the new one, never a mix.
``"files"`` in ``seqattn.json`` holds the sha256 of every other file, and loading verifies them,
then the weights' dtype (the one ``"dtype"`` names) and that they are finite: a changed byte, a
cut-short file or weights from elsewhere are refused with an error naming the file. Since a
save replaces the whole folder, one holding files seqattn did not write is refused.

Arguments that JSON has no type for are tagged ``{"$type": ...}``: tuples, NumPy arrays, dtypes,
dataclasses (task model configs), modules (a TransformerEncoder's layer) and random generators,
stored as None (the weights file holds what they initialised). Other arguments (a function, an
open file) cannot be stored, and ``save`` says which one.

Classes are found by name among seqattn's own; a user's own classes (a Module subclass, its
config dataclass) are passed to ``load(path, classes=[MyModel, MyConfig])``.
"""
import dataclasses
import hashlib
import inspect
import json
import os
import shutil
import sys
import warnings
from pathlib import Path

import numpy as np

from .nn.module import Module

FORMAT_VERSION = 1
DESCRIPTION = "seqattn.json"
WEIGHTS = "weights.safetensors"
TAG = "$type"
STORABLE = ("None, bools, numbers, strings, lists, tuples, dicts with string keys, NumPy arrays "
            "and dtypes, dataclasses and modules")


class StorageError(TypeError):
    """An object, or one of its constructor arguments, that seqattn cannot store as JSON."""


# ---- files ----------------------------------------------------------------------------------


def _fsync_folder(path):
    """Make a folder's entries (renames, new files) durable, where the system allows it."""
    try:
        descriptor = os.open(path, os.O_RDONLY)
    except OSError:  # a system whose folders cannot be opened (Windows): renames are durable
        return
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def write_file(path, data):
    """Write ``data`` (bytes) to ``path`` and flush it to disk before returning."""
    with open(path, "wb") as file:
        file.write(data)
        file.flush()
        os.fsync(file.fileno())


def arrays_bytes(arrays):
    """name -> host array as the bytes of a safetensors file."""
    from safetensors.numpy import save

    return save({k: np.ascontiguousarray(v) for k, v in arrays.items()})


def json_bytes(content):
    return json.dumps(content, indent=1).encode()


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def staging_folder(path):
    """Where a folder is written whole before it takes ``path``'s place."""
    path = Path(os.path.abspath(path))  # "." and "run/.." have a name too
    return path.with_name(f".{path.name}.writing")


def previous_folder(path):
    """Where ``path``'s earlier contents wait while the new ones take their place."""
    path = Path(os.path.abspath(path))
    return path.with_name(f".{path.name}.previous")


def recover_folder(path):
    """Put back the earlier folder when a write stopped between its two renames; remove it when
    the write stopped after them (``path`` is then the new folder, whole)."""
    previous = previous_folder(path)
    if not previous.is_dir():
        return
    if path.exists():  # other processes resuming (ranks of a distributed fit) may remove it too
        shutil.rmtree(previous, ignore_errors=True)
        return
    try:
        os.rename(previous, path)
    except OSError:
        if not path.exists():  # else another process put it back first
            raise
    _fsync_folder(path.parent)


def write_folder(path, files, description):
    """Commit the folder ``path`` as one step: ``files`` (name relative to the folder -> bytes)
    and ``description`` (written as seqattn.json with each file's sha256 under ``"files"``)
    are written and flushed in a sibling folder, then renamed into place; the earlier folder
    is kept beside it until the rename is done, so a crash at any point leaves either the old
    folder or the new one, whole."""
    path = Path(os.path.abspath(_folder_for_writing(path)))
    recover_folder(path)
    staging, previous = staging_folder(path), previous_folder(path)
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    for name, data in files.items():
        (staging / name).parent.mkdir(parents=True, exist_ok=True)
        write_file(staging / name, data)
    for folder in {(staging / name).parent for name in files}:
        _fsync_folder(folder)
    description = {**description, "files": {name: sha256(data) for name, data in files.items()}}
    write_file(staging / DESCRIPTION, json_bytes(description))
    _fsync_folder(staging)
    shutil.rmtree(previous, ignore_errors=True)
    if path.exists():
        os.rename(path, previous)
    os.rename(staging, path)
    _fsync_folder(path.parent)
    shutil.rmtree(previous, ignore_errors=True)


def read_checked(folder, name, description):
    """The bytes of ``folder``/``name``, verified against the sha256 ``description`` records."""
    file = folder / name
    files = description.get("files")
    if files is None:  # a folder seqattn 0.1 wrote: still loadable, unverified
        warnings.warn(f"{folder / DESCRIPTION} was written by an earlier seqattn, without "
                      f"checksums, so {file} is loaded unverified; save it again to add them",
                      stacklevel=3)
        files = {name: None}
    if name not in files:
        raise ValueError(f"{folder / DESCRIPTION} records no checksum for {name}, so {file} "
                         "cannot be verified; it was not written whole by seqattn.save or fit")
    if not file.is_file():
        raise FileNotFoundError(f"{file} is missing; {folder / DESCRIPTION} lists it, so the "
                                "folder is incomplete")
    data = file.read_bytes()
    if files[name] is not None and sha256(data) != files[name]:
        raise ValueError(f"{file} is damaged: its sha256 differs from the one {DESCRIPTION} "
                         "records (a changed byte, or a file from another save); it is not "
                         "loaded")
    return data


def read_arrays(folder, name, description):
    """name -> array from the checked safetensors file ``folder``/``name``."""
    from safetensors import SafetensorError
    from safetensors.numpy import load

    data = read_checked(folder, name, description)
    try:
        return load(data)
    except SafetensorError as error:
        raise ValueError(f"{folder / name} is not a readable safetensors file ({error})") \
            from error


def read_json(file):
    """The JSON in ``file``; an error naming the file when it is cut short or not JSON."""
    try:
        return json.loads(Path(file).read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"{file} is not valid JSON ({error}); the file is damaged or was not "
                         "written by seqattn") from error


def check_weights(file, arrays, dtype):
    """Weights read from ``file`` are finite and of ``dtype`` (the one the description names)."""
    for name, array in arrays.items():
        if dtype is not None and array.dtype != np.dtype(dtype):
            raise ValueError(f"{file} holds {name} as {array.dtype}, but the description says "
                             f"the weights are {dtype}; the file does not belong to this model")
        if array.dtype.kind != "f" or not np.isfinite(array).all():
            raise ValueError(f"{file} holds {name} with values that are not finite floats "
                             f"({array.dtype}, {np.size(array) - np.isfinite(array).sum()} "
                             "non-finite); weights must be finite")


# ---- encoding constructor arguments --------------------------------------------------------


def _class_fields(cls):
    return {"class": cls.__qualname__, "module": cls.__module__}


def _encode(value, where):
    """``value`` as JSON-able data (tagged where JSON has no type); ``where`` names it in errors."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (np.bool_, np.integer, np.floating)):
        return value.item()
    if isinstance(value, Module):
        return {TAG: "module", **describe_module(value, where)}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {TAG: "dataclass", **_class_fields(type(value)),
                "fields": {f.name: _encode(getattr(value, f.name), f"{where}.{f.name}")
                           for f in dataclasses.fields(value) if f.init}}
    if isinstance(value, tuple):
        return {TAG: "tuple", "items": [_encode(v, f"{where}[{i}]") for i, v in enumerate(value)]}
    if isinstance(value, list):
        return [_encode(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value) or TAG in value:
            raise StorageError(f"cannot store {where}: a dict argument needs string keys other "
                               f"than {TAG!r}; got keys {list(value)}")
        return {k: _encode(v, f"{where}[{k!r}]") for k, v in value.items()}
    if isinstance(value, np.ndarray) and value.dtype.kind in "biuf":
        return {TAG: "array", "dtype": value.dtype.name, "shape": list(value.shape),
                "data": value.ravel().tolist()}
    if isinstance(value, np.dtype):
        return {TAG: "dtype", "name": value.name}
    if isinstance(value, type) and issubclass(value, np.generic):
        return {TAG: "scalar_type", "name": np.dtype(value).name}
    if isinstance(value, np.random.Generator):
        return {TAG: "generator"}
    raise StorageError(f"cannot store {where} = {value!r:.80}: seqattn.save keeps constructor "
                       f"arguments that are {STORABLE}; got a {type(value).__name__}. Give the "
                       "module JSON-able arguments (a name rather than a function, say)")


def _decode(value, classes, where):
    if isinstance(value, list):
        return [_decode(v, classes, where) for v in value]
    if not isinstance(value, dict):
        return value
    tag = value.get(TAG)
    if tag is None:
        return {k: _decode(v, classes, where) for k, v in value.items()}
    if tag == "module":
        return build_module(value, classes, where)
    if tag == "dataclass":
        cls = find_class(value, classes, where)
        if not dataclasses.is_dataclass(cls):
            raise ValueError(f"{where} names {cls.__qualname__} as a dataclass, which it is not")
        return cls(**{k: _decode(v, classes, where) for k, v in value["fields"].items()})
    if tag == "tuple":
        return tuple(_decode(v, classes, where) for v in value["items"])
    if tag == "array":
        return np.array(value["data"], dtype=value["dtype"]).reshape(value["shape"])
    if tag == "dtype":
        return np.dtype(value["name"])
    if tag == "scalar_type":
        return np.dtype(value["name"]).type
    if tag == "generator":
        return None
    raise ValueError(f"{where} holds a value tagged {TAG} = {tag!r}, which this seqattn does "
                     "not know; it was written by another version")


# ---- classes -------------------------------------------------------------------------------


def _storable_class(cls):
    return (issubclass(cls, Module) or dataclasses.is_dataclass(cls)
            or callable(getattr(cls, "from_dict", None)))


def seqattn_classes():
    """Name -> class for every storable class defined in seqattn (modules, configs, adapters)."""
    from . import adapters, models, nn  # noqa: F401  (importing them defines their classes)

    found = {}
    for name, module in list(sys.modules.items()):
        if name != "seqattn" and not name.startswith("seqattn."):
            continue
        for cls in vars(module).values():
            if isinstance(cls, type) and cls.__module__ == name and _storable_class(cls):
                found[cls.__qualname__] = cls
    return found


def _classes_by_name(classes):
    classes = list(classes)
    for cls in classes:
        if not isinstance(cls, type):
            raise TypeError(f"classes must be a list of classes (e.g. [MyModel, MyConfig]); got "
                            f"{cls!r}")
    return {**seqattn_classes(), **{cls.__qualname__: cls for cls in classes}}


def find_class(description, classes, where):
    """The class ``description["class"]`` names, from ``classes`` (name -> class)."""
    name = description.get("class")
    if name not in classes:
        raise ValueError(f"{where} names class {name!r} (defined in module "
                         f"{description.get('module')!r}), which is not one of seqattn's; pass "
                         f"it to load: seqattn.load(path, classes=[{name}])")
    return classes[name]


# ---- modules -------------------------------------------------------------------------------


def describe_module(module, where=None):
    """{"class", "module", "arguments", "dtype"} of ``module``: what rebuilds it."""
    name = type(module).__qualname__
    where = where or name
    arguments = {k: _encode(v, f"{where}.{k}") for k, v in module._config.items()}
    dtype = module.dtype
    return {**_class_fields(type(module)), "arguments": arguments,
            "dtype": None if dtype is None else np.dtype(dtype).name}


def _call(cls, arguments, where):
    """``cls(...)`` from arguments by parameter name, splatting ``*args`` and ``**kwargs``."""
    parameters = list(inspect.signature(cls.__init__).parameters.values())[1:]  # without self
    unknown = set(arguments) - {p.name for p in parameters}
    if unknown:
        raise ValueError(f"{where} gives {cls.__qualname__} arguments {sorted(unknown)}, which "
                         "its constructor does not take; it was saved from another version")
    args, kwargs = [], {}
    for p in parameters:
        if p.name not in arguments:
            continue
        value = arguments[p.name]
        if p.kind is p.VAR_POSITIONAL:
            args.extend(value)
        elif p.kind is p.VAR_KEYWORD:
            kwargs.update(value)
        elif p.kind is p.KEYWORD_ONLY:
            kwargs[p.name] = value
        else:
            args.append(value)
    return cls(*args, **kwargs)


def build_module(description, classes, where):
    """A module built from :func:`describe_module`'s output (weights as initialised)."""
    cls = find_class(description, classes, where)
    if not (isinstance(cls, type) and issubclass(cls, Module)):
        raise ValueError(f"{where} describes a module of class {cls.__qualname__}, which is not "
                         "a seqattn.nn.Module")
    arguments = {k: _decode(v, classes, where) for k, v in description["arguments"].items()}
    module = _call(cls, arguments, where)
    dtype = description.get("dtype")
    if dtype is not None and module.dtype is not None and np.dtype(module.dtype) != dtype:
        module.to(dtype=np.dtype(dtype).type)
    return module


def write_module(path, module, weights=None, require_arguments=True, files=None):
    """Write ``module``'s folder at ``path`` in one step (:func:`write_folder`): its description
    and ``weights`` (default: its own state dict), plus ``files`` (name -> bytes: a
    checkpoint's training state). With ``require_arguments=False`` a module whose constructor
    arguments cannot be stored still gets its weights written, and the description says why it
    cannot be rebuilt (a checkpoint of a user's model stays resumable with ``load_checkpoint``)."""
    try:
        description = {"format": FORMAT_VERSION, "kind": "module", **describe_module(module)}
    except StorageError as error:
        if require_arguments:
            raise
        description = {"format": FORMAT_VERSION, "kind": "module",
                       **_class_fields(type(module)), "unstorable": str(error)}
    weights = module.state_dict() if weights is None else weights
    for name, array in weights.items():  # load would refuse them: say so now, write nothing
        if not np.isfinite(array).all():
            raise ValueError(f"cannot save {type(module).__name__} to {path}: its {name} holds "
                             "inf or NaN, and seqattn.load refuses weights that are not finite")
    write_folder(path, {WEIGHTS: arrays_bytes(weights), **(files or {})}, description)


def _load_module(path, description, classes, device):
    if "unstorable" in description:
        raise StorageError(f"{path} holds the weights of a {description['class']} whose "
                           f"constructor arguments could not be stored ({description['unstorable']}"
                           "); build the model yourself and load the weights with "
                           "seqattn.train.load_checkpoint(path, model)")
    module = build_module(description, classes, str(path / DESCRIPTION))
    weights = path / WEIGHTS
    arrays = read_arrays(path, WEIGHTS, description)
    check_weights(weights, arrays, description.get("dtype"))
    try:
        module.load_state_dict(arrays)
    except (KeyError, ValueError) as error:
        raise ValueError(f"{weights} does not fit the {description['class']} rebuilt from "
                         f"{DESCRIPTION}: {error}") from error
    return module if device is None else module.to(device)


# ---- the protocol --------------------------------------------------------------------------


# What seqattn writes in a folder; a folder holding anything else is not replaced.
OWN_ENTRIES = (DESCRIPTION, WEIGHTS, "training")


def _folder_for_writing(path):
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise FileExistsError(f"{path} is a file; seqattn.save writes a folder (config and "
                              "weights): give a folder path")
    here, absolute = Path.cwd(), Path(os.path.abspath(path))
    if absolute == here or absolute in here.parents:
        raise ValueError(f"{path} is the working directory (or holds it); a save replaces its "
                         "folder whole, so give a folder of its own, e.g. 'model'")
    others = sorted(p.name for p in path.iterdir() if p.name not in OWN_ENTRIES) \
        if path.is_dir() else []
    if others:
        raise FileExistsError(f"{path} holds files seqattn did not write ({others[:5]}); a save "
                              "replaces the whole folder, so give a new or empty folder, or one "
                              "an earlier save wrote")
    absolute.parent.mkdir(parents=True, exist_ok=True)
    return path


def save(obj, path):
    """Store ``obj`` (a seqattn.nn.Module, a task model, an adapter, a Normalizer) in the folder
    ``path``, created if needed, in one step; the folder of an earlier save there is replaced
    whole (a folder holding other files is refused).

    Parameters
    ----------
    obj : seqattn.nn.Module or object with ``to_dict()`` and ``from_dict()``
        What to store: a module (its arguments and weights) or an adapter, normalizer or other
        object that describes itself by ``to_dict``.
    path : str or os.PathLike
        The folder to write.

    Raises
    ------
    StorageError
        For an object of another kind.
    """
    if isinstance(obj, Module):
        write_module(path, obj)
        return
    if not (callable(getattr(obj, "to_dict", None))
            and callable(getattr(type(obj), "from_dict", None))):
        raise StorageError(f"seqattn.save stores modules (seqattn.nn.Module), task models and "
                           f"objects with to_dict()/from_dict() (adapters, normalizers); got a "
                           f"{type(obj).__name__}")
    write_folder(path, {}, {"format": FORMAT_VERSION, "kind": "object",
                            **_class_fields(type(obj)), "state": obj.to_dict()})


def read_description(path):
    """The checked contents of ``path``/seqattn.json."""
    path = Path(path)
    if not path.exists():
        interrupted = previous_folder(path)
        if interrupted.is_dir():
            raise FileNotFoundError(f"{path} does not exist: a save there was interrupted, and "
                                    f"its earlier contents are in {interrupted} (the next save "
                                    "or resume puts them back)")
        raise FileNotFoundError(f"{path} does not exist")
    if not path.is_dir():
        raise ValueError(f"{path} is a file; seqattn.load reads the folder that seqattn.save or "
                         "fit(checkpoint=...) wrote")
    file = path / DESCRIPTION
    if not file.exists():
        raise FileNotFoundError(f"{path} holds no {DESCRIPTION}, so seqattn.save or "
                                "fit(checkpoint=...) did not write it")
    description = read_json(file)
    if not isinstance(description, dict) or "format" not in description:
        raise ValueError(f"{file} is not a seqattn description (it has no 'format')")
    if description["format"] != FORMAT_VERSION:
        raise ValueError(f"{file} has format {description['format']!r}; this seqattn reads "
                         f"format {FORMAT_VERSION}")
    if description.get("kind") not in ("module", "object"):
        raise ValueError(f"{file} describes a {description.get('kind')!r}; expected 'module' "
                         "or 'object'")
    return description


def _over_a_dataset(cls):
    """Whether ``cls.from_dict`` also takes the Dataset the object lives over (ForecastWindows)."""
    return len(inspect.signature(cls.from_dict).parameters) > 1


def load(path, classes=(), device=None, ds=None):
    """Rebuild what :func:`save` (or ``fit(checkpoint=path)``) stored in the folder ``path``.

    A module comes back in training mode, as a new one does: call ``.eval()`` to predict.

    Parameters
    ----------
    path : str or os.PathLike
        The folder that :func:`save` or ``fit(checkpoint=...)`` wrote.
    classes : sequence of type, default ()
        A user's own classes the folder names (a Module subclass, its config dataclass), e.g.
        ``load(path, classes=[MyModel])``; seqattn's own are found by name.
    device : str or None, default None
        Where a module's weights go ("cpu", "cuda"); None: the CPU.
    ds : xarray.Dataset or None, default None
        The Dataset for an object whose ``from_dict(state, ds)`` also takes one (none of
        seqattn's own: a ``ForecastWindows`` loads without it).

    Returns
    -------
    object
        The rebuilt module or object.
    """
    path = Path(path)
    description = read_description(path)
    known = _classes_by_name(classes)
    if description["kind"] == "module":
        return _load_module(path, description, known, device)
    cls = find_class(description, known, str(path / DESCRIPTION))
    if not callable(getattr(cls, "from_dict", None)):
        raise ValueError(f"{path / DESCRIPTION} describes a {cls.__qualname__}, which has no "
                         "from_dict to rebuild it")
    if not _over_a_dataset(cls):
        return cls.from_dict(description["state"])
    if ds is None:
        raise TypeError(f"{path} holds a {cls.__qualname__}, which is stored without its data; "
                        f"give the Dataset to rebuild it over: seqattn.load(path, ds=ds)")
    return cls.from_dict(description["state"], ds)
