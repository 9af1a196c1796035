"""Graph encodings for attention over nodes: each node is a token, and what the graph says
about it (its degrees, its place in the graph, the walks through it) becomes features, while
what it says about a pair of nodes (hops between them, the type of edge joining them) becomes
a pair code for ``seqattn.ops.PairBias``.

* :mod:`.adjacency` the checked sparse form every encoding reads;
* :mod:`.shortest_paths` hop distances by breadth-first search (Numba, parallel over sources)
  as int8 pair codes;
* :mod:`.degrees` in- and out-degrees; :mod:`.laplacian` Laplacian eigenvector positions;
  :mod:`.random_walks` random-walk return probabilities; :mod:`.edge_types` edge types as codes;
* :mod:`.datasets` graphs (scipy.sparse matrices, networkx graphs) as the xarray Datasets that
  :class:`seqattn.adapters.GraphAdapter` reads.
"""
from .adjacency import as_adjacency, symmetrized, unweighted
from .datasets import from_networkx, graph_dataset
from .degrees import clipped, in_out_degrees
from .edge_types import type_matrix, with_edge_types
from .laplacian import laplacian_positions, normalized_laplacian, random_sign_flips
from .random_walks import return_probabilities, transition_matrix
from .shortest_paths import (HIDDEN, code_dtype, farther_code, num_distance_codes,
                             shortest_path_codes, unreachable_code)

__all__ = ["HIDDEN", "as_adjacency", "clipped", "code_dtype", "farther_code", "from_networkx",
           "graph_dataset", "in_out_degrees",
           "laplacian_positions", "normalized_laplacian", "num_distance_codes",
           "random_sign_flips", "return_probabilities", "shortest_path_codes", "symmetrized",
           "transition_matrix", "type_matrix", "unreachable_code", "unweighted",
           "with_edge_types"]
