"""The forward scope: modules called inside a forward get Tensors; outside, arrays again, even
after a forward that raised."""
import numpy as np
import pytest

import seqattn.nn as nn
from seqattn.autodiff import Tensor
from seqattn.autodiff.recording import forward_scope, inside_forward


class Failing(nn.Module):
    def forward(self, x):
        raise RuntimeError("planted")


def test_scopes_nest_and_unwind():
    assert not inside_forward()
    with forward_scope():
        with forward_scope():
            assert inside_forward()
        assert inside_forward()
    assert not inside_forward()


def test_a_forward_that_raises_leaves_no_scope_behind():
    with pytest.raises(RuntimeError, match="planted"):
        Failing()(np.zeros((2, 3)))
    assert not inside_forward()
    out = nn.Linear(3, 2, dtype=np.float64, seed=0)(np.ones((4, 3)))
    assert isinstance(out, np.ndarray) and not isinstance(out, Tensor)
