"""The graph rows of the conformance table: an energy per graph (N -> 1 values in eV, whole
graphs selected) and the role of each node, a text label (N -> N classes, nodes selected)."""
import numpy as np
import scipy.sparse as sp

from conformance import Row
from graph_helpers import ring
from seqattn.adapters import GraphAdapter
from seqattn.readers import graph_dataset
from seqattn.train import CrossEntropyLoss, MSELoss

SIZES = dict(d_model=16, nhead=2, num_layers=1, dim_feedforward=16)
GRAPH_SIZES = (4, 5, 6, 7, 5, 6, 7, 4, 6, 5)
N_TRAIN_GRAPHS = 6


def make_graphs():
    """Paths and cycles (alternating) with a node feature x, weighted edges and, per graph, an
    energy: -1 eV per bond plus 0.1 eV per unit of x. The graphs after the training ones have
    x shifted by 3, so statistics fitted on every graph differ from the training graphs'."""
    rng = np.random.default_rng(5)
    closed = np.arange(len(GRAPH_SIZES)) % 2 == 1
    matrices = []
    for n, c in zip(GRAPH_SIZES, closed):
        upper = sp.triu(ring(n, c), format="csr")
        upper.data = rng.integers(1, 6, upper.nnz).astype(np.float64)
        matrices.append(sp.csr_array(upper + upper.T))  # both directions, one weight
    graph_of_node = np.repeat(np.arange(len(GRAPH_SIZES)), GRAPH_SIZES)
    x = rng.normal(size=len(graph_of_node)) + 3.0 * (graph_of_node >= N_TRAIN_GRAPHS)
    bonds = np.array([m.nnz // 2 for m in matrices])
    energy = -1.0 * bonds + 0.1 * np.bincount(graph_of_node, weights=x)
    ds = graph_dataset(matrices, nodes={"x": x}, graphs={"energy": energy})
    ds["energy"].attrs.update(units="eV", long_name="energy")
    ds["role"] = ("node", _roles(matrices))
    return ds


def _roles(matrices):
    """"end" for a node of one neighbour, "inner" otherwise (text labels)."""
    degrees = np.concatenate([np.diff(m.indptr) for m in matrices])
    return np.where(degrees == 1, "end", "inner").astype(object)


N_NODES = sum(GRAPH_SIZES)
FIRST_NODES_4 = sum(GRAPH_SIZES[:4])  # the nodes of the first four graphs


def with_repeated_edge(ds):
    """``ds`` with its first edge listed a second time, its weight negated."""
    repeated = ds.isel(edge=np.r_[np.arange(ds.sizes["edge"]), 0])
    weight = repeated["weight"].values.copy()
    weight[-1] = -weight[-1]
    return repeated.assign(weight=("edge", weight))


def without_nodes(ds):
    return graph_dataset(np.zeros((0, 0)), nodes={"x": np.zeros(0)}, graphs={"energy": [0.0]})


def with_unseen_role(ds):
    role = ds["role"].values.copy()
    role[0] = "hub"
    return ds.assign(role=("node", role))


COMMON_BAD_INPUTS = [
    (lambda a, ds: a.batches(with_repeated_edge(ds)), ValueError, "both join node 0 -> node 1"),
    (lambda a, ds: GraphAdapter(["x"]).fit(without_nodes(ds)), ValueError, "has no nodes"),
    (lambda a, ds: GraphAdapter(["x"], validity_channels=True), TypeError,
     "validity_channel="),
    (lambda a, ds: a.model_config(ds, 2), TypeError, "no ds or out_features"),
    (lambda a, ds: a.model_config(task="node"), ValueError, "classification"),
    (lambda a, ds: a.batches(ds, where={"graph": [0], "node": [N_NODES - 1]}), ValueError,
     "where selects no node"),
    (lambda a, ds: a.encode(ds.assign(x=ds.x.where(ds.node != 3))), ValueError,
     "node 3 has NaN features.*validity_channel=True"),
]

ROWS = [
    Row(
        name="graph",
        make_dataset=make_graphs,
        make_adapter=lambda: GraphAdapter(["x"], edge_weight="weight", edge_weight_bins=3,
                                          max_distance=2, max_degree=3),
        targets="energy",
        train={"graph": slice(0, N_TRAIN_GRAPHS)},
        test={"graph": slice(N_TRAIN_GRAPHS, None)},
        task="regression",
        loss=lambda: MSELoss(skip_nan=True),
        prediction_dims=("graph",),
        model_options=SIZES,
        bad_inputs=COMMON_BAD_INPUTS + [
            (lambda a, ds: a.batches(ds, targets="role"), ValueError, "fit saw"),
        ],
    ),
    Row(
        name="graph-nodes",
        make_dataset=make_graphs,
        make_adapter=lambda: GraphAdapter(["x"], attention="edges", laplacian=2),
        targets="role",
        # every other node of the first four graphs: their graphs are the context of batches
        train={"node": (np.arange(N_NODES) % 2 == 0) & (np.arange(N_NODES) < FIRST_NODES_4)},
        test={"node": np.arange(1, N_NODES, 2)},
        task="classification",
        loss=CrossEntropyLoss,
        prediction_dims=("node",),
        model_options=SIZES,
        bad_inputs=COMMON_BAD_INPUTS + [
            (lambda a, ds: a.batches(with_unseen_role(ds)), ValueError,
             "label 'hub', which fit never saw"),
        ],
    ),
]
