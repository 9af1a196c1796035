"""Graph encodings for attention over nodes: each node is a token, and what the graph says
about it (its degrees, its place in the graph, the walks through it) becomes features, while
what it says about a pair of nodes (hops between them, the type of edge joining them) becomes
a pair code for ``seqattn.ops.PairBias``.

* :mod:`.adjacency` the checked sparse form every encoding reads;
* :mod:`.shortest_paths` hop distances by breadth-first search (Numba, parallel over sources)
  as int8 pair codes;
* :mod:`.degrees` in- and out-degrees; :mod:`.laplacian` Laplacian eigenvector positions;
  :mod:`.random_walks` random-walk return probabilities; :mod:`.edge_types` edge types as codes;
  :mod:`.weight_bins` edge weights in quantile bins, as codes of the pairs an edge joins.

The readers that build a graph Dataset (``graph_dataset``, ``from_networkx``) are in
:mod:`seqattn.readers.graphs` since 0.2.
"""
from .adjacency import as_adjacency, symmetrized, unweighted
from .degrees import clipped, in_out_degrees
from .edge_types import type_matrix, with_edge_types
from .laplacian import laplacian_positions, normalized_laplacian, random_sign_flips
from .random_walks import return_probabilities, transition_matrix
from .shortest_paths import (HIDDEN, code_dtype, farther_code, num_distance_codes,
                             shortest_path_codes, unreachable_code)

from .weight_bins import fit_weight_thresholds, split_one_hop, weight_bins

__all__ = ["HIDDEN", "as_adjacency", "clipped", "code_dtype", "farther_code",
           "fit_weight_thresholds", "in_out_degrees",
           "laplacian_positions", "normalized_laplacian", "num_distance_codes",
           "random_sign_flips", "return_probabilities", "shortest_path_codes", "split_one_hop",
           "symmetrized", "transition_matrix", "type_matrix", "unreachable_code", "unweighted",
           "weight_bins", "with_edge_types"]

MOVED_NAMES = ("from_networkx", "graph_dataset")


def __getattr__(name):
    if name in MOVED_NAMES:
        raise ImportError(f"seqattn.graphs.{name} moved to seqattn.readers.{name} in seqattn 0.2 "
                          "(see CHANGELOG.md); import it from there")
    raise AttributeError(f"module 'seqattn.graphs' has no attribute {name!r}")
