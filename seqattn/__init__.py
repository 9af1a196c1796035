"""seqattn: attention and Transformer models for scientific signals, in Numba, on xarray data.

Importing seqattn compiles nothing: kernels compile lazily, once per signature, on first use.
"""
from .ops import attention, attention_backward, attention_weights
from .storage import load, save
from .kernels.cpu.threads import follow_machine_load
from .kernels.cpu.workspace import release_scratch

__version__ = "0.1.0"

__all__ = ["attention", "attention_backward", "attention_weights", "follow_machine_load", "load",
           "release_scratch", "save", "__version__"]
