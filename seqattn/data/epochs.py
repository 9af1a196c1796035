"""The epoch number every batch producer replays its order by."""
import numpy as np


def check_epoch(epoch):
    """`epoch` as an int >= 0 (0 the first), or a ValueError naming it."""
    if not isinstance(epoch, (int, np.integer)) or isinstance(epoch, bool) or epoch < 0:
        raise ValueError(f"epoch = {epoch!r}; expected a whole number >= 0 (0 is the first)")
    return int(epoch)
