"""Which records an adapter's selections read, in order: how the transfer tests check that the
test samples are read once, by evaluate's scoring call."""
import contextlib

import pytest


@contextlib.contextmanager
def recorded_selections(adapter_class):
    """Within the block, every ``adapter_class.select`` call appends the set of the records it
    chose to the list this yields."""
    read = []
    select = adapter_class.select

    def spy(self, ds, where, name="where"):
        chosen = select(self, ds, where, name)
        read.append(set(chosen["record"].values.tolist()))
        return chosen

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(adapter_class, "select", spy)
        yield read
