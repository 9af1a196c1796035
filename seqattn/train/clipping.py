"""Gradient clipping by global norm (as ``torch.nn.utils.clip_grad_norm_``), applied as a factor
that the optimizer's update kernels multiply in, so the gradients are never rewritten."""
import math

from .. import ops


def global_grad_norm(parameters):
    """The L2 norm of all gradients together, as one vector.

    Parameters
    ----------
    parameters : iterable of Parameter
        Parameters whose ``.grad`` is filled (on the CPU or the GPU).

    Returns
    -------
    float
        The norm, summed in float64 on the host; inf or NaN if any gradient is.
    """
    return math.sqrt(ops.sum_of_squares(p.grad for p in parameters))


def clip_factor(norm, max_norm):
    """The factor that scales gradients of global ``norm`` to at most ``max_norm``.

    Parameters
    ----------
    norm : float
        The gradients' global norm (:func:`global_grad_norm`).
    max_norm : float
        The largest norm allowed.

    Returns
    -------
    float
        torch's ``max_norm / (norm + 1e-6)``, capped at 1.
    """
    return min(1.0, max_norm / (norm + 1e-6))
