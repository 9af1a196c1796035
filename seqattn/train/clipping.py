"""Gradient clipping by global norm (as ``torch.nn.utils.clip_grad_norm_``), applied as a factor
that the optimizer's update kernels multiply in, so the gradients are never rewritten."""
import math

from .. import ops


def global_grad_norm(parameters):
    """The L2 norm of all gradients together (float64, a host float; inf or NaN if any is)."""
    return math.sqrt(ops.sum_of_squares(p.grad for p in parameters))


def clip_factor(norm, max_norm):
    """The factor that scales gradients of global ``norm`` to at most ``max_norm``: torch's
    max_norm / (norm + 1e-6), capped at 1."""
    return min(1.0, max_norm / (norm + 1e-6))
