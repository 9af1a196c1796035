"""Run by tests/train/test_distributed.py under ``mpiexec -n R``: trains the tiny task of
:func:`task` with ``fit(..., distributed=True)`` and rank 0 writes the final weights, the
history and the sharded validation's result to the .npz file named by the first argument.
Optional arguments: epochs, a checkpoint folder ("-" for none), "resume", a device ("cuda":
the replicas on the GPU, or the CUDA simulator)."""
import sys

import numpy as np

from seqattn.nn.placement import moved

from seqattn.train import SGD, MSELoss, fit, evaluate

from distributed_task import model_and_batches


def main(out, epochs=2, checkpoint=None, resume=False, device="cpu"):
    from mpi4py import MPI

    model, batches, validation = model_and_batches(seed=MPI.COMM_WORLD.Get_rank())
    model.to(device)
    history = fit(model, MSELoss(skip_nan=True), SGD(model.parameters(), lr=0.05), batches, epochs=epochs,
                  validation=validation, checkpoint=checkpoint, resume=resume, progress=False,
                  distributed=True)
    shared = evaluate(model, MSELoss(skip_nan=True), validation, distributed=True)
    if MPI.COMM_WORLD.Get_rank() == 0:
        np.savez(out, loss=history["loss"], val_loss=history["val_loss"],
                 evaluated=shared["loss"],
                 **{name: moved(p.data, "cpu") for name, p in model.named_parameters()})


if __name__ == "__main__":
    out, *rest = sys.argv[1:]
    options = dict(zip(["epochs", "checkpoint", "resume", "device"], rest))
    main(out, epochs=int(options.get("epochs", 2)),
         checkpoint=None if options.get("checkpoint", "-") == "-" else options["checkpoint"],
         resume=options.get("resume") == "resume", device=options.get("device", "cpu"))
