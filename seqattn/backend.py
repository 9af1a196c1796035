"""Which device an array lives on, and the one place where ops pick CPU or CUDA kernels.

A NumPy array runs on the CPU; a numba.cuda device array (or anything with
``__cuda_array_interface__``) runs on the GPU. Layers never branch on the device themselves:
they call ``seqattn.ops``, which asks :func:`backend_of` for the kernel module.
"""
import importlib


from .host_memory import HOST_POOL

CPU = "cpu"
CUDA = "cuda"


def is_device_array(x):
    """True for GPU arrays (numba.cuda device arrays, the CUDA simulator's, cupy, torch.cuda)."""
    # The simulator's FakeCUDAArray has no __cuda_array_interface__, only the __cuda_ndarray__ flag.
    return hasattr(x, "__cuda_array_interface__") or getattr(x, "__cuda_ndarray__", False)


def device_of(x):
    """"cuda" for a GPU array, "cpu" for anything NumPy can hold."""
    return CUDA if is_device_array(x) else CPU


def backend_of(**arrays):
    """The device shared by all named arrays (None values are skipped).

    Raises a ValueError naming the arrays when host and device arrays are mixed, because a silent
    copy would hide a slow path from the user.
    """
    devices = {name: device_of(a) for name, a in arrays.items() if a is not None}
    found = set(devices.values())
    if len(found) > 1:
        on_gpu = sorted(n for n, d in devices.items() if d == CUDA)
        on_cpu = sorted(n for n, d in devices.items() if d == CPU)
        raise ValueError(
            f"arrays are on different devices: {', '.join(on_gpu)} on the GPU but "
            f"{', '.join(on_cpu)} on the CPU; move them together first "
            "(numba.cuda.to_device(x) or x.copy_to_host())"
        )
    return found.pop() if found else CPU


def kernels_for(device, family):
    """The kernel module ``seqattn.kernels.<device>.<family>``, imported on first use.

    Importing lazily keeps ``import seqattn`` free of CUDA initialisation on machines without a GPU.
    """
    return importlib.import_module(f"seqattn.kernels.{device}.{family}")


def empty_like_on(device, shape, dtype):
    """An uninitialised array on ``device``."""
    if device == CUDA:
        from numba import cuda

        return cuda.device_array(shape, dtype=dtype)
    return HOST_POOL.empty(shape, dtype)
