"""A learnable array and the gradient accumulated for it (see seqattn.autodiff.Parameter)."""
from ..autodiff.parameter import Parameter

__all__ = ["Parameter"]
