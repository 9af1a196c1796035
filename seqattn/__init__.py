"""seqattn: attention and Transformer models for scientific signals, in Numba, on xarray data.

Importing seqattn compiles nothing: kernels compile lazily, once per signature, on first use.
"""
from .ops import attention, attention_backward, attention_weights
from .storage import load, save
from .kernels.cpu.threads import follow_machine_load
from .kernels.cpu.workspace import release_scratch
from .moved import install as _install_moved_modules
from .first_run import watch_compilation as _watch_compilation
from .cache_lock import install as _lock_cache_saves

_install_moved_modules()
_watch_compilation()
_lock_cache_saves()

__version__ = "0.1.0"

# The data-side calls load xarray, dask and the adapters, so they are imported on first use and
# `import seqattn` stays quick.
_LAZY = {"predict": ("seqattn.adapters.predict", "predict"),
         "evaluate": ("seqattn.evaluation", "evaluate"),
         "confusion_figure": ("seqattn.confusion", "confusion_figure")}


def __getattr__(name):
    if name in _LAZY:
        import importlib

        module, attribute = _LAZY[name]
        value = getattr(importlib.import_module(module), attribute)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'seqattn' has no attribute {name!r}")


__all__ = ["attention", "attention_backward", "attention_weights", "confusion_figure", "evaluate",
           "follow_machine_load", "load", "predict", "release_scratch", "save", "__version__"]
