"""Optimizer updates, in place; ``grad_scale`` is the clipping factor. And the global squared
gradient norm that clipping reads."""
import weakref

import numpy as np

from ..backend import CPU, backend_of, empty_like_on, kernels_for
from .arrays import fill
from .checks import FLOAT_DTYPES, flat, shape_of


def _updatable_flat(device, name, x, like):
    # the callers' backend_of over all the arrays has put them on one device already
    if shape_of(x) != shape_of(like):
        raise ValueError(f"{name} has shape {shape_of(x)}; expected the parameter's "
                         f"{shape_of(like)} on its device")
    if device == CPU and not x.flags.c_contiguous:
        why = "the kernels read it as one flat array" if name == "grad" else "it is updated in place"
        raise ValueError(f"{name} must be C-contiguous: {why}")
    return flat(x)


def sgd_step(param, grad, velocity, *, lr, momentum=0.0, weight_decay=0.0, nesterov=False,
             grad_scale=1.0):
    """In place: one SGD step of ``param``, as torch.optim.SGD.

    Parameters
    ----------
    param : array
        The parameter, updated in place, on the CPU (NumPy) or the GPU (numba.cuda device array).
    grad : array
        Its gradient.
    velocity : array
        The momentum buffer, updated in place.
    lr : float
        The learning rate.
    momentum : float, default 0.0
        Factor of the running velocity.
    weight_decay : float, default 0.0
        L2 penalty added to the gradient.
    nesterov : bool, default False
        Nesterov momentum.
    grad_scale : float, default 1.0
        Multiplies the gradient first (gradient clipping's factor).
    """
    device = backend_of(param=param, grad=grad, velocity=velocity)
    arrays = [_updatable_flat(device, n, x, param)
              for n, x in (("param", param), ("velocity", velocity), ("grad", grad))]
    if param.size:
        kernels_for(device, "optimizers").sgd_update(*arrays, float(lr), float(momentum),
                                                     float(weight_decay), bool(nesterov),
                                                     float(grad_scale))


def adam_step(param, grad, exp_avg, exp_avg_sq, *, step, lr, betas=(0.9, 0.999), eps=1e-8,
              weight_decay=0.0, decoupled_weight_decay=False, grad_scale=1.0):
    """In place: Adam step number ``step`` of ``param``, as torch.optim.Adam, or AdamW with
    ``decoupled_weight_decay``.

    Parameters
    ----------
    param : array
        The parameter, updated in place, on the CPU (NumPy) or the GPU (numba.cuda device array).
    grad : array
        Its gradient.
    exp_avg, exp_avg_sq : arrays
        The running mean and mean square of the gradient, updated in place.
    step : int
        The step number, 1, 2, ... (for the bias correction).
    lr : float
        The learning rate.
    betas : tuple of float, default (0.9, 0.999)
        Decay rates of the running mean and mean square.
    eps : float, default 1e-8
        Added to the root mean square.
    weight_decay : float, default 0.0
        The decay rate: an L2 penalty, or decoupled with ``decoupled_weight_decay``.
    decoupled_weight_decay : bool, default False
        AdamW's decay: ``param *= 1 - lr * weight_decay`` before the step.
    grad_scale : float, default 1.0
        Multiplies the gradient first (gradient clipping's factor).
    """
    _check_step(step)
    device = backend_of(param=param, grad=grad, exp_avg=exp_avg, exp_avg_sq=exp_avg_sq)
    arrays = [_updatable_flat(device, n, x, param)
              for n, x in (("param", param), ("exp_avg", exp_avg), ("exp_avg_sq", exp_avg_sq),
                           ("grad", grad))]
    beta1, beta2 = (float(b) for b in betas)
    if param.size:
        kernels_for(device, "optimizers").adam_update(
            *arrays, float(lr), beta1, beta2, float(eps), float(weight_decay),
            bool(decoupled_weight_decay), 1.0 - beta1 ** step, 1.0 - beta2 ** step,
            float(grad_scale))


def _check_step(step):
    if not isinstance(step, (int, np.integer)) or step < 1:
        raise ValueError(f"step must be the step number 1, 2, ... (bias correction divides by "
                         f"1 - beta ** step), got {step!r}")


class AdamManyParameters:
    """Adam (or AdamW) steps of many parameters in one CPU launch, instead of one per parameter.

    Built once for a set of parameters and their state arrays (NumPy, one float dtype,
    C-contiguous), which it checks and whose addresses it keeps, with references to the arrays
    so that they stay alive; :meth:`holds` says whether it still serves a given set. Each
    :meth:`step` checks only the gradients, which may be new arrays every step. The results
    have the bits of :func:`adam_step` on each parameter.

    Parameters
    ----------
    params, exp_avgs, exp_avg_sqs : lists of arrays
        The parameters and their running mean and mean square, updated in place by each step.
    """

    def __init__(self, params, exp_avgs, exp_avg_sqs):
        kernels = kernels_for(CPU, "optimizers")
        self.arrays = tuple(list(a) for a in (params, exp_avgs, exp_avg_sqs))
        if not params:
            raise ValueError("AdamManyParameters got no parameters")
        self.dtype = np.dtype(params[0].dtype)
        for i, arrays in enumerate(zip(*self.arrays)):
            for name, x in zip(("params", "exp_avgs", "exp_avg_sqs"), arrays):
                self._check(f"{name}[{i}]", x, arrays[0])
        # empty parameters have nothing to update: no row of the table
        self.rows = [i for i, p in enumerate(params) if p.size]
        self.sizes = np.array([params[i].size for i in self.rows], np.int64)
        self.addresses = np.zeros((len(self.rows), 4), np.int64)
        for column, arrays in zip((kernels.PARAM, kernels.EXP_AVG, kernels.EXP_AVG_SQ),
                                  self.arrays):
            self.addresses[:, column] = [_address(arrays[i]) for i in self.rows]
        self.pieces = np.array([(t, start, min(start + kernels.PIECE, size))
                                for t, size in enumerate(self.sizes)
                                for start in range(0, int(size), kernels.PIECE)],
                               np.int64).reshape(-1, 3)
        self.elements = int(self.sizes.sum())
        self.grad_column = kernels.GRAD
        self.like = np.empty(1, self.dtype)  # types the kernel's pointers: one signature per dtype
        # The gradients whose addresses the table holds: a model's gradients are the same
        # arrays step after step, and reading an address costs more than a small update
        self._grads = ()

    def _check(self, name, x, param):
        if not isinstance(x, np.ndarray):
            raise TypeError(f"{name} is a {type(x).__name__}; expected a NumPy array (the one "
                            "launch runs on the CPU)")
        if np.dtype(x.dtype) != self.dtype:
            raise TypeError(f"{name} has dtype {x.dtype}; expected {self.dtype} like params[0]")
        if x.shape != param.shape:
            raise ValueError(f"{name} has shape {x.shape}; expected its parameter's "
                             f"{param.shape}")
        if not x.flags.c_contiguous:
            raise ValueError(f"{name} must be C-contiguous: the kernel reads it as one flat "
                             "array")

    def holds(self, params, exp_avgs, exp_avg_sqs):
        """Whether these are the very arrays it was built for (none replaced since)."""
        return all(len(mine) == len(theirs) and all(a is b for a, b in zip(mine, theirs))
                   for mine, theirs in zip(self.arrays, (params, exp_avgs, exp_avg_sqs)))

    def takes(self, grads):
        """Whether ``grads`` fit the one launch: NumPy arrays of the parameters' dtype and
        shapes, C-contiguous (others go through :func:`adam_step` one by one)."""
        if _same_arrays(grads, self._grads):  # taken at the last step already
            return True
        return len(grads) == len(self.arrays[0]) and all(
            isinstance(g, np.ndarray) and g.dtype == self.dtype and g.shape == p.shape
            and g.flags.c_contiguous for g, p in zip(grads, self.arrays[0]))

    def step(self, grads, *, step, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
             decoupled_weight_decay=False, grad_scale=1.0):
        """In place: Adam step number ``step`` of every parameter, given their ``grads`` (a
        list in the parameters' order); the options are those of :func:`adam_step`."""
        _check_step(step)
        params = self.arrays[0]
        if len(grads) != len(params):
            raise ValueError(f"got {len(grads)} gradients for {len(params)} parameters")
        if not _same_arrays(grads, self._grads):
            if not self.takes(grads):  # find the one to name
                for i, (g, p) in enumerate(zip(grads, params)):
                    self._check(f"grads[{i}]", g, p)
            self.addresses[:, self.grad_column] = [_address(grads[i]) for i in self.rows]
            self._grads = tuple(grads)
        beta1, beta2 = (float(b) for b in betas)
        if self.elements:
            kernels_for(CPU, "optimizers")._adam_update_many(
                self.pieces, self.addresses, self.sizes, self.like, self.elements,
                float(lr), beta1, beta2, float(eps), float(weight_decay),
                bool(decoupled_weight_decay), 1.0 - beta1 ** step, 1.0 - beta2 ** step,
                float(grad_scale))


def _same_arrays(these, those):
    return len(these) == len(those) and all(a is b for a, b in zip(these, those))


def _address(x):
    """The address of a NumPy array's first element."""
    return x.__array_interface__["data"][0]


def sum_of_squares(arrays):
    """The sum of squares of all elements of ``arrays``: the squared global norm that gradient
    clipping uses.

    Parameters
    ----------
    arrays : iterable of arrays
        Arrays on one device.

    Returns
    -------
    float
        The sum, accumulated in float64, as a host float.
    """
    arrays = list(arrays)
    if SumOfSquaresPlan.takes(arrays):
        return _plan_for(arrays).sum(arrays)
    device = backend_of(**{f"arrays[{i}]": x for i, x in enumerate(arrays)})
    total = empty_like_on(device, (1,), np.float64)
    fill(total, 0.0)
    kernels = kernels_for(device, "optimizers")
    for x in arrays:
        if x.size:
            kernels.add_sum_of_squares(total, flat(x))
    return float(total[0] if device == CPU else total.copy_to_host()[0])


class SumOfSquaresPlan:
    """:func:`sum_of_squares` of one list of NumPy arrays in one CPU launch: the address table
    and the pieces of the work, built once for the arrays (a model's gradients are the same
    arrays step after step). It holds weak references to them: a plan kept after training
    does not keep a model's gradients alive, and an array that is gone matches no new one.

    Each array's sum has the bits of its own launch on one thread as long as it fits one piece
    (``PIECE`` elements); a larger array is summed by pieces, the same on any thread count.
    """

    def __init__(self, arrays):
        kernels = kernels_for(CPU, "sums_of_squares")
        arrays = list(arrays)
        self._arrays = [weakref.ref(x) for x in arrays]
        rows = [i for i, x in enumerate(arrays) if x.size]
        self.sizes = np.array([arrays[i].size for i in rows], np.int64)
        self.addresses = np.array([[_address(arrays[i])] for i in rows],
                                  np.int64).reshape(-1, 1)
        self.pieces = np.array([(t, start, min(start + kernels.PIECE, size))
                                for t, size in enumerate(self.sizes)
                                for start in range(0, int(size), kernels.PIECE)],
                               np.int64).reshape(-1, 3)
        self.elements = int(self.sizes.sum())
        self.like = np.empty(1, arrays[0].dtype)  # types the kernel's pointers

    @staticmethod
    def takes(arrays):
        """Whether one launch serves ``arrays``: C-contiguous NumPy arrays of one float dtype
        (anything else goes array by array, on its device)."""
        return bool(arrays) and all(
            type(x) is np.ndarray and x.flags.c_contiguous and x.dtype is arrays[0].dtype
            for x in arrays) and arrays[0].dtype in FLOAT_DTYPES

    def holds(self, arrays):
        """Whether these are the very arrays it was built for."""
        return len(arrays) == len(self._arrays) and all(
            ref() is x for ref, x in zip(self._arrays, arrays))

    def sum(self, arrays):
        """The sum of squares of `arrays`, the very arrays the plan was built for (alive for
        the call: the kernel reads them at the addresses taken then)."""
        if not self.holds(arrays):
            raise ValueError("arrays are not the arrays this plan was built for")
        sums = np.empty(len(self.pieces), np.float64)
        if self.elements:
            kernels_for(CPU, "sums_of_squares").sums_of_squares(
                sums, self.pieces, self.addresses, self.sizes, self.like, self.elements)
        total = 0.0
        for piece_sum in sums.tolist():  # in the pieces' order, as one launch per array adds
            total += piece_sum
        return total


# The last plan built: clipping asks for the same gradients every step.
_last_plan = None


def _plan_for(arrays):
    global _last_plan
    plan = _last_plan
    if plan is None or not plan.holds(arrays):
        plan = _last_plan = SumOfSquaresPlan(arrays)
    return plan
