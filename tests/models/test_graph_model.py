"""GraphModel's gradients (node features, every parameter, the pair-bias tables included)
against float64 finite differences, per node and per graph."""
import numpy as np
import pytest

from gradcheck import check_module_gradients
from graph_helpers import SIZES, rings_dataset
from seqattn.adapters import GraphAdapter
from seqattn.models import build


@pytest.mark.parametrize("task", ["node", "graph"])
def test_graph_model_gradients_match_finite_differences(task):
    # no Laplacian positions: their random signs in training would change between the calls
    ds = rings_dataset(sizes=(4, 5), held_out=0)
    ds["end"] = ("node", np.isin(np.arange(9), [0, 3]))  # the path's ends
    adapter = GraphAdapter(["x"], max_distance=2, max_degree=2, random_walk=2).fit(
        ds, targets="end" if task == "node" else "cycle")
    batch = adapter.encode(ds)
    model = build(adapter.model_config(dtype="float64",
                                       **dict(SIZES, d_model=8, dim_feedforward=8)))
    assert model.config.task == task

    def call(inputs):
        return model(inputs, batch.key_padding_mask, coords=batch.coords,
                     structure=batch.structure)

    check_module_gradients(model, call, lambda dout: {"inputs": model.backward(dout)},
                           {"inputs": batch.tokens.astype(np.float64)}, samples=4)
