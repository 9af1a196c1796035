"""Reverse-mode differentiation over seqattn's ops.

Leaf ops keep their explicit forward/backward kernels (``seqattn.ops``); this package records
which of them ran in a forward pass, on :class:`Tensor` values, and runs their backward kernels
in reverse order, so that composite modules and user models define ``forward`` only. A module
called several times gets the sum of its gradients; arithmetic between layers (``+``, ``*``,
slicing, ``reshape``, ``mean``, :func:`concat`) is recorded too, and NumPy functions that
cannot be recorded are refused rather than silently left out of the gradient.

Recording is off in :func:`no_grad` blocks and for modules in ``eval()`` mode: then nothing is
kept for a backward pass.
"""
from .array_functions import (add, concat, divide, multiply, reduce_mean, reduce_sum, reshape,
                              stack, subtract, take)
from .attention_function import attention
from .backward import backward
from .layer_functions import (additive_scores, dropout, embedding, gelu, layer_norm, linear,
                              merge_heads, relu, rms_norm, rope, silu, split_heads, swiglu)
from .packed_attention_function import packed_attention
from .parameter import Parameter
from .pooling_functions import first_token, masked_mean, prepend_token
from .recording import is_recording, no_grad
from .tensor import Tensor, as_tensor, unwrap

__all__ = [
    "Parameter", "Tensor", "add", "additive_scores", "as_tensor", "attention", "backward",
    "concat", "divide", "dropout", "embedding", "first_token", "gelu", "is_recording",
    "layer_norm", "linear", "masked_mean", "merge_heads", "multiply", "no_grad",
    "packed_attention", "prepend_token", "reduce_mean", "reduce_sum", "relu", "reshape",
    "rms_norm", "rope", "silu", "split_heads", "stack", "subtract", "swiglu", "take", "unwrap",
]
