"""Moving arrays between the host and the GPU, and the errors for arrays in the wrong place."""
import numpy as np

from ..backend import CPU, CUDA, device_of

DEVICE_NAMES = {CPU: "the CPU", CUDA: "the GPU"}


def moved(x, device):
    """x on ``device`` ("cpu" or "cuda"); the same object when it is already there."""
    if device not in (CPU, CUDA):
        raise ValueError(f"device must be 'cpu' or 'cuda', got {device!r}")
    if device_of(x) == device:
        return x
    if device == CUDA:
        from numba import cuda

        return cuda.to_device(np.ascontiguousarray(x))
    return x.copy_to_host()


def cast(x, dtype):
    """x converted to ``dtype`` on its own device."""
    if np.dtype(x.dtype) == np.dtype(dtype):
        return x
    device = device_of(x)
    return moved(moved(x, CPU).astype(dtype), device)


def check_same_device(owner, device, **arrays):
    """Raise a ValueError naming each input that is not on the module's ``device``."""
    for name, x in arrays.items():
        if x is not None and device_of(x) != device:
            raise ValueError(
                f"{name} is on {DEVICE_NAMES[device_of(x)]} but {owner}'s parameters are on "
                f"{DEVICE_NAMES[device]}; move the input (numba.cuda.to_device(x) or "
                f"x.copy_to_host()) or the module (.to('{device_of(x)}')) so they match")


def check_tokens(name, x, width, what="d_model"):
    """Raise unless x is batch-first tokens (B, N, width)."""
    if x.ndim != 3 or int(x.shape[2]) != width:
        raise ValueError(f"{name} has shape {tuple(int(s) for s in x.shape)}; expected (B, N, "
                         f"{what}) with {what} = {width} (batch-first tokens)")
