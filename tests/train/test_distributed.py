"""Data-parallel fit over MPI (seqattn.train.distributed): run under mpiexec with MPICH from the
package index, and compared with one process stepping on the union of the ranks' batches."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from seqattn.train import SGD, DataParallel, MSELoss, evaluate, fit

from distributed_task import N_BATCHES, model_and_batches, union

HELPERS = Path(__file__).resolve().parents[1] / "helpers"


def _mpiexec():
    launcher = shutil.which("mpiexec", path=os.pathsep.join(
        [str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    assert launcher, "mpiexec is missing: pip install mpich (the test extras install it)"
    return launcher


def _run(ranks, out, *arguments, env=None):
    env = {**os.environ, **(env or {}), "PYTHONPATH": os.pathsep.join(
        [str(HELPERS), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([_mpiexec(), "-n", str(ranks), sys.executable,
                           str(HELPERS / "distributed_fit.py"), str(out), *map(str, arguments)],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return np.load(out)


def _steps(ranks):
    """The batches one process steps on to match an epoch on `ranks` ranks."""
    _, batches, _ = model_and_batches()
    return [union(batches[i:i + ranks]) for i in range(0, N_BATCHES, ranks)]


def _one_process(epochs_of_steps):
    model, _, validation = model_and_batches(seed=0)
    history = {"loss": [], "val_loss": []}
    optimizer = SGD(model.parameters(), lr=0.05)
    for steps in epochs_of_steps:
        h = fit(model, MSELoss(skip_nan=True), optimizer, steps, validation=validation,
                progress=False)
        history["loss"] += h["loss"]
        history["val_loss"] += h["val_loss"]
    return model, history, validation


def test_two_ranks_step_as_one_process_does_on_their_batches_together(tmp_path):
    got = _run(2, tmp_path / "out.npz", 2)
    model, history, validation = _one_process([_steps(2), _steps(2)])
    for name, parameter in model.named_parameters():
        np.testing.assert_allclose(got[name], parameter.data, rtol=2e-5, atol=1e-6,
                                   err_msg=name)
    np.testing.assert_allclose(got["loss"], history["loss"], rtol=1e-5)
    np.testing.assert_allclose(got["val_loss"], history["val_loss"], rtol=1e-5)
    alone = evaluate(model, MSELoss(skip_nan=True), validation)["loss"]
    np.testing.assert_allclose(got["evaluated"], alone, rtol=1e-5)


def test_replicas_on_the_gpu_reduce_through_the_host(tmp_path):
    env_cuda = {"NUMBA_ENABLE_CUDASIM": os.environ.get("NUMBA_ENABLE_CUDASIM", "1")}
    got = _run(2, tmp_path / "out.npz", 1, "-", "-", "cuda", env=env_cuda)
    model, history, _ = _one_process([_steps(2)])
    for name, parameter in model.named_parameters():
        np.testing.assert_allclose(got[name], parameter.data, rtol=2e-5, atol=1e-6,
                                   err_msg=name)


@pytest.mark.parametrize("ranks", [1, 2, 3])
def test_a_checkpoint_of_two_ranks_resumes_on_any_number(tmp_path, ranks):
    checkpoint = tmp_path / "checkpoint"
    _run(2, tmp_path / "first.npz", 1, checkpoint)
    got = _run(ranks, tmp_path / "resumed.npz", 2, checkpoint, "resume")
    model, history, _ = _one_process([_steps(2), _steps(ranks)])
    assert len(got["loss"]) == 2
    for name, parameter in model.named_parameters():
        np.testing.assert_allclose(got[name], parameter.data, rtol=2e-5, atol=1e-6,
                                   err_msg=name)
    np.testing.assert_allclose(got["loss"], history["loss"], rtol=1e-5)


class _Ranks:
    """A stand-in communicator: just a rank among `size`."""

    def __init__(self, rank, size):
        self.rank, self.size = rank, size

    def Get_rank(self):
        return self.rank

    def Get_size(self):
        return self.size

    def Allreduce(self, *arguments, **options):
        raise AssertionError("sharding needs no communication")


@pytest.mark.parametrize("n_batches", [1, 4, 5, 7])
def test_shards_cover_every_batch_exactly_once_with_equal_step_counts(n_batches):
    shards = [list(DataParallel(_Ranks(r, 3)).shard(range(n_batches))) for r in range(3)]
    assert len({len(s) for s in shards}) == 1  # every rank takes part in every step
    taken = sorted(b for s in shards for b in s if b is not None)
    assert taken == list(range(n_batches))


def test_distributed_is_refused_when_it_names_no_communicator():
    with pytest.raises(TypeError, match="distributed"):
        DataParallel.from_argument("yes")
    with pytest.raises(ValueError, match="bucket_bytes"):
        DataParallel(bucket_bytes=0)
