"""Data-parallel training over MPI (mpi4py): ``fit(..., distributed=True)``.

The same script runs alone or under an MPI launcher (``mpiexec -n 4 python train.py``). Every
rank holds a replica of the model; rank 0's initial weights are broadcast so the replicas start
equal. One optimizer step takes ``size`` consecutive batches of the epoch, one per rank (the
epoch's order depends on (seed, epoch) only, so every rank knows it without communication).
Each rank runs forward and backward on its batch; the gradients are then combined by all-reduce,
each rank's weighted by its loss's ``weight_sum`` (the number of targets its batch's loss
averaged over, masked tokens and padding excluded), so the step is the one a single process
makes on the union of the ranks' batches. Gradients travel in buckets of at most
``bucket_bytes`` (fewer, larger messages). Clipping, the non-finite check and the optimizer step
then see the same gradients on every rank, so the replicas stay equal. Validation is sharded the
same way and its sums reduced; early stopping therefore decides identically everywhere. Rank 0
alone writes checkpoints and shows progress; every rank reads a checkpoint to resume, with any
number of ranks, since a checkpoint holds no per-rank state.

An epoch whose batches do not divide among the ranks ends with a step in which some ranks have
no batch: they contribute zero weight. Gradients of device (GPU) arrays are staged through host
memory, which works with any MPI; it runs under the CUDA simulator here and has not yet been
measured on GPUs.
"""
import numpy as np

from ..backend import CPU, device_of
from ..nn.placement import moved

BUCKET_BYTES = 25 * 2 ** 20


def _mpi():
    try:
        from mpi4py import MPI
    except ImportError as error:
        raise ImportError("distributed training needs mpi4py and an MPI library: "
                          "pip install mpi4py mpich (or use your cluster's MPI)") from error
    return MPI


class DataParallel:
    """Replicas on the ranks of `comm` (default: MPI.COMM_WORLD); see the module docstring.

    Parameters
    ----------
    comm : mpi4py.MPI.Comm or None, default None
        The ranks that train together; None: ``MPI.COMM_WORLD``.
    bucket_bytes : int, default 25 MiB
        Gradients are summed across the ranks in messages of at most this many bytes (a
        larger gradient travels alone).
    """

    def __init__(self, comm=None, bucket_bytes=BUCKET_BYTES):
        if not isinstance(bucket_bytes, (int, np.integer)) or bucket_bytes < 1:
            raise ValueError(f"bucket_bytes = {bucket_bytes!r}; expected a positive number of "
                             "bytes")
        self.comm = _mpi().COMM_WORLD if comm is None else comm
        self.rank = self.comm.Get_rank()
        self.size = self.comm.Get_size()
        self.bucket_bytes = int(bucket_bytes)

    @classmethod
    def from_argument(cls, distributed):
        """``fit``'s ``distributed`` argument as a DataParallel, or None for one process:
        None or False (one process), True (MPI.COMM_WORLD), an mpi4py communicator, or a
        DataParallel."""
        if distributed is None or distributed is False:
            return None
        if distributed is True:
            return cls()
        if isinstance(distributed, cls):
            return distributed
        if hasattr(distributed, "Get_rank") and hasattr(distributed, "Allreduce"):
            return cls(distributed)
        raise TypeError(f"distributed = {distributed!r}; expected True (MPI.COMM_WORLD), an "
                        "mpi4py communicator, a seqattn.train.DataParallel, or None")

    @property
    def is_root(self):
        return self.rank == 0

    def broadcast_parameters(self, model):
        """Give every rank rank 0's weights."""
        for _, parameter in model.named_parameters():
            host = np.ascontiguousarray(moved(parameter.data, CPU))
            self.comm.Bcast(host, root=0)
            _write(parameter, "data", host)

    def shard(self, items):
        """This rank's part of an epoch's batches `items`: see :func:`rank_share`."""
        return rank_share(items, self.rank, self.size)

    def sum(self, values):
        """The elementwise sum over ranks of a list of floats (float64)."""
        local = np.asarray(values, dtype=np.float64)
        total = np.empty_like(local)
        self.comm.Allreduce(local, total, op=_mpi().SUM)
        return total.tolist()

    def average_gradients(self, parameters, weight, total_weight):
        """Replace each gradient by the weight-averaged gradient over ranks: sum_r w_r g_r /
        sum_r w_r, with `weight` this rank's w (0 for a rank without a batch, whose gradients
        are then ignored) and `total_weight` the sum over ranks (from :meth:`sum`)."""
        if total_weight == 0:
            return
        scale = weight / total_weight
        for bucket in self._buckets(parameters):
            flat = np.concatenate([np.ravel(moved(p.grad, CPU)).astype(np.float64) * scale
                                   if weight else np.zeros(p.grad.size) for p in bucket])
            reduced = np.empty_like(flat)
            self.comm.Allreduce(flat, reduced, op=_mpi().SUM)
            offset = 0
            for p in bucket:
                part = reduced[offset:offset + p.grad.size].reshape(p.grad.shape)
                _write(p, "grad", part.astype(p.grad.dtype))
                offset += p.grad.size

    def _buckets(self, parameters):
        bucket, size = [], 0
        for p in parameters:
            nbytes = p.grad.size * 8  # they travel as float64
            if bucket and size + nbytes > self.bucket_bytes:
                yield bucket
                bucket, size = [], 0
            bucket.append(p)
            size += nbytes
        if bucket:
            yield bucket


def rank_share(items, rank, size):
    """Rank `rank` of `size`'s part of an epoch's batches `items`: per step, its batch, or None
    in a last step that the ranks before it used up. Step k takes items k * size ..
    k * size + size - 1. Every item is produced (read); batch producers that can collate one
    rank's batches alone do so through their own ``steps(epoch, rank, size)``."""
    chunk = []
    for item in items:
        chunk.append(item)
        if len(chunk) == size:
            yield chunk[rank]
            chunk = []
    if chunk:
        yield chunk[rank] if rank < len(chunk) else None


def _write(parameter, field, host):
    """Set ``parameter.<field>`` to `host`'s values, on the device the field lives on."""
    current = getattr(parameter, field)
    if device_of(current) == CPU:
        current[...] = host
    else:
        current.copy_to_device(np.ascontiguousarray(host, dtype=current.dtype))
