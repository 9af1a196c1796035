"""seqattn's operators: one function per op, dispatching to the CPU or CUDA kernels by array type.

NumPy arrays run on the CPU kernels (``seqattn.kernels.cpu``); numba.cuda device arrays run on the
GPU kernels (``seqattn.kernels.cuda``) and the results stay on the device. Each kernel module
exposes the same launchers with the same semantics; the op modules here validate arguments once
(with the checks in :mod:`seqattn.ops.checks`) and allocate outputs, so the launchers only check
what is specific to their device. One module per concept:

* :mod:`~seqattn.ops.attention`: the fused attention operator; its structured biases
  (distances, pair codes) in :mod:`~seqattn.ops.structured_bias`; self-attention of a packed
  projection's heads without splitting them in :mod:`~seqattn.ops.packed_attention`.
* :mod:`~seqattn.ops.layers`: linear, norms, activations, dropout, embedding, heads, RoPE.
* :mod:`~seqattn.ops.arrays`: broadcast adds and their reductions, in-place sums, fills.
* :mod:`~seqattn.ops.losses`, :mod:`~seqattn.ops.optimizers`, :mod:`~seqattn.ops.pooling`.
"""
from .arithmetic import (affine, concat, concat_backward, mean_along, mean_along_backward,
                         multiply, reciprocal)
from .arrays import add, add_into, fill, move_toward, sum_leading
from .attention import AttentionGradients, attention, attention_backward, attention_weights
from .layers import (additive_scores, additive_scores_backward, dropout, dropout_backward,
                     embedding, embedding_backward, gelu, gelu_backward, layer_norm,
                     layer_norm_backward, linear, linear_backward, merge_heads, relu,
                     relu_backward, rms_norm, rms_norm_backward, rope, rope_backward, silu,
                     silu_backward, split_heads, swiglu, swiglu_backward)
from .losses import (POINTWISE_LOSSES, cross_entropy, cross_entropy_backward, pointwise_loss,
                     pointwise_loss_backward)
from .packed_attention import (PackedAttentionGradients, packed_attention,
                               packed_attention_backward)
from .optimizers import adam_step, sgd_step, sum_of_squares
from .pooling import (first_token, first_token_backward, masked_mean, masked_mean_backward,
                      prepend_token, prepend_token_backward, write_positions)
from .structured_bias import DistanceBias, DistanceBiasGradients, PairBias, PairBiasGradients

__all__ = ["AttentionGradients", "DistanceBias", "DistanceBiasGradients",
    "PackedAttentionGradients", "PairBias", "PairBiasGradients", "POINTWISE_LOSSES", "adam_step", "add", "add_into", "additive_scores",
    "additive_scores_backward", "affine", "attention", "attention_backward", "attention_weights",
    "concat", "concat_backward", "cross_entropy", "cross_entropy_backward", "dropout",
    "dropout_backward", "embedding", "embedding_backward", "fill", "first_token",
    "first_token_backward", "gelu", "gelu_backward",
    "layer_norm", "layer_norm_backward", "linear", "linear_backward", "mean_along",
    "mean_along_backward", "masked_mean", "masked_mean_backward", "merge_heads", "move_toward", "multiply", "packed_attention", "packed_attention_backward", "pointwise_loss", "pointwise_loss_backward",
    "prepend_token", "prepend_token_backward", "reciprocal", "relu", "relu_backward", "rms_norm", "rms_norm_backward", "rope",
    "rope_backward", "sgd_step", "silu", "silu_backward", "split_heads", "sum_leading",
    "sum_of_squares", "swiglu", "swiglu_backward", "write_positions"]
