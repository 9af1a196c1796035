"""A short training run with a checkpoint per epoch, for test_checkpoint_crash.py, which runs it
in a subprocess: ``python checkpoint_crash_run.py FOLDER [KILL_AT]``.

Every point where a crash could leave a different state on disk is an event with a label: each
file write, rename and folder removal of a checkpoint save, and each optimizer step. Labels
name the optimizer's step count (so that a resumed run meets the same labels again), the kind
and the file (the folder called ``run``). The run prints each label as it passes it; given
``KILL_AT``, it dies there (``os._exit``, no clean-up), a file write after half its bytes."""
import os
import shutil
import sys
from collections import Counter

import numba
import numpy as np

from seqattn import storage
from seqattn.models import TokenModel, TokenModelConfig
from seqattn.train import AdamW, EarlyStopping, MSELoss, WarmupCosine, fit

KILLED = 77
EPOCHS = 2


def main(folder, kill_at=None):
    numba.set_num_threads(1)
    model = TokenModel(TokenModelConfig(in_features=1, out_features=1, d_model=8, nhead=2,
                                        num_layers=1, dim_feedforward=8, max_len=6,
                                        dropout=0.1, seed=0))
    optimizer = AdamW(model, lr=3e-3)
    seen = Counter()

    def event(kind, name):
        label = f"{optimizer.steps}:{kind}:{name.replace(os.path.basename(folder), 'run')}"
        seen[label] += 1
        label = f"{label}#{seen[label]}"
        print(label, flush=True)
        return label == kill_at

    def write_file(path, data):
        if event("write", os.path.relpath(path, path.parent.parent)):
            with open(path, "wb") as file:
                file.write(data[:len(data) // 2])
            os._exit(KILLED)
        real_write_file(path, data)

    def rename(source, target):
        if event("rename", f"{os.path.basename(source)}->{os.path.basename(target)}"):
            os._exit(KILLED)
        real_rename(source, target)

    def rmtree(path, **options):
        if event("rmtree", os.path.basename(path)):
            os._exit(KILLED)
        real_rmtree(path, **options)

    def step(*args, **kwargs):
        if event("step", "optimizer"):
            os._exit(KILLED)
        real_step(*args, **kwargs)

    real_write_file, real_rename, real_rmtree = storage.write_file, os.rename, shutil.rmtree
    real_step = optimizer.step
    storage.write_file, os.rename, shutil.rmtree = write_file, rename, rmtree
    optimizer.step = step

    x = np.random.default_rng(0).normal(size=(16, 6, 1)).astype(np.float32)
    y = np.roll(x, 1, axis=1)
    fit(model, MSELoss(), optimizer, (x, y), epochs=EPOCHS, batch_size=16, seed=5,
        validation=(x[:8], y[:8]), schedule=WarmupCosine(3e-3, 2, 4),
        early_stopping=EarlyStopping(patience=5, mode="max"), checkpoint=folder, resume=True,
        progress=False)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None)
