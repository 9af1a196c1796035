"""seqattn.evaluate end to end through the GraphAdapter (on the protocol), nodes of the same
graphs split into training, validation and test: node features read the degree that decides a
node's role, the model's accuracy is the one seqattn.predict's labels give, and label
propagation is seeded by training labels only."""
import numpy as np

import seqattn
from conformance_graph import N_NODES, make_graphs
from seqattn.adapters import GraphAdapter
from seqattn.models import build

NODE = np.arange(N_NODES)
TRAIN, VALID, TEST = ({"node": NODE % 3 == r} for r in range(3))


def test_node_scores_match_predict_and_degree_decides_the_role():
    ds = make_graphs()
    adapter = GraphAdapter(["x"], attention="edges").fit(ds, targets="role", where=TRAIN)
    model = build(adapter.model_config(task="classification", d_model=16, nhead=2,
                                       num_layers=1, dim_feedforward=16))
    scores = seqattn.evaluate(model, ds, adapter, where=TEST, train=TRAIN, validation=VALID)
    assert list(scores.predictor.values) == ["model", "node logistic", "label propagation"]
    assert int(scores.n) == int(TEST["node"].sum())
    predicted = seqattn.predict(model, ds, adapter).role.values[TEST["node"]]
    assert float(scores.accuracy.sel(predictor="model")) == np.mean(
        predicted == ds.role.values[TEST["node"]])
    assert float(scores.accuracy.sel(predictor="node logistic")) == 1.0
