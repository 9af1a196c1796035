"""Small graphs for the graph tests: paths and cycles of a few sizes (whose class a model can
only tell from the structure), and networkx's karate club."""
import networkx as nx
import numpy as np
import scipy.sparse as sp

from seqattn.readers import from_networkx, graph_dataset

SIZES = dict(d_model=16, nhead=2, num_layers=1, dim_feedforward=32, seed=0)


def ring(n, closed):
    """The undirected path (closed=False) or cycle (closed=True) of n nodes."""
    source = np.arange(n if closed else n - 1)
    target = (source + 1) % n
    a = sp.coo_array((np.ones(len(source)), (source, target)), shape=(n, n))
    return sp.csr_array(a + a.T)


def rings_dataset(sizes=(4, 5, 6, 7, 5, 6, 7, 4), held_out=2):
    """Alternating paths (class 0) and cycles (class 1) with one noisy node feature; the last
    ``held_out`` graphs are False in the graph variable ``train``."""
    closed = np.arange(len(sizes)) % 2 == 1
    rng = np.random.default_rng(0)
    train = np.arange(len(sizes)) < len(sizes) - held_out
    return graph_dataset([ring(n, c) for n, c in zip(sizes, closed)],
                         nodes={"x": rng.normal(size=sum(sizes))},
                         graphs={"cycle": closed.astype(np.int64), "train": train})


def karate_dataset(train_fraction=0.5, seed=0):
    """The karate club: a float feature, the club (0/1) and a train mask over the nodes."""
    g = nx.karate_club_graph()
    ds = from_networkx(g)
    club = np.array([g.nodes[n]["club"] == "Officer" for n in g.nodes])
    rng = np.random.default_rng(seed)
    ds["club"] = ("node", club.astype(np.int64))
    ds["degree"] = ("node", np.array([g.degree(n) for n in g.nodes], np.float64))
    ds["train"] = ("node", rng.random(len(club)) < train_fraction)
    return ds
