"""Graph encodings against networkx and scipy references: hop distances (as pair codes),
degrees, Laplacian eigenvectors (up to sign), random-walk return probabilities, edge-type codes,
edge-weight bins; and the corner cases: disconnected graphs, self loops, isolated nodes, empty
graphs."""
import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp

from seqattn import graphs
from seqattn.graphs import laplacian as laplacian_module


def awkward_digraph():
    """A directed graph with two weakly connected parts, a self loop, a sink and an isolated
    node (index 11), weighted."""
    g = nx.gnp_random_graph(9, 0.25, seed=3, directed=True)
    g.add_edges_from([(9, 10), (10, 9), (4, 4)])
    g.add_node(11)
    for i, (u, v) in enumerate(g.edges):
        g.edges[u, v]["weight"] = 1.0 + (i % 3)
    return g


def adjacency_of(g):
    return nx.to_scipy_sparse_array(g, nodelist=sorted(g.nodes), weight="weight")


def expected_codes(g, max_distance, hide_farther):
    n = g.number_of_nodes()
    far = graphs.HIDDEN if hide_farther else graphs.farther_code(max_distance)
    none = graphs.HIDDEN if hide_farther else graphs.unreachable_code(max_distance)
    codes = np.full((n, n), none)
    for source, lengths in nx.all_pairs_shortest_path_length(g):
        for target, d in lengths.items():
            codes[source, target] = d if d <= max_distance else far
    return codes


@pytest.mark.parametrize("max_distance", [1, 2, 5])
@pytest.mark.parametrize("hide_farther", [False, True])
def test_shortest_path_codes_match_networkx(max_distance, hide_farther):
    g = awkward_digraph()
    codes = graphs.shortest_path_codes(adjacency_of(g), max_distance, hide_farther=hide_farther)
    assert codes.dtype == np.int8
    np.testing.assert_array_equal(codes, expected_codes(g, max_distance, hide_farther))


def test_shortest_path_codes_of_a_larger_graph_match_scipy():
    # many sources over the parallel loop, distances past the clip, several components
    adjacency = sp.random_array((300, 300), density=0.006, random_state=0, format="csr")
    distances = sp.csgraph.shortest_path(adjacency, unweighted=True, directed=True)
    codes = graphs.shortest_path_codes(adjacency, 6)
    expected = np.where(np.isinf(distances), graphs.unreachable_code(6),
                        np.minimum(np.nan_to_num(distances, posinf=0), graphs.farther_code(6)))
    np.testing.assert_array_equal(codes, expected)


def test_many_codes_widen_the_dtype_and_empty_graphs_give_empty_codes():
    path = nx.to_scipy_sparse_array(nx.path_graph(4))
    assert graphs.shortest_path_codes(path, 200).dtype == np.int16
    assert graphs.shortest_path_codes(np.zeros((0, 0)), 3).shape == (0, 0)
    assert graphs.num_distance_codes(3) == 6 and graphs.num_distance_codes(1, True) == 2


def test_degrees_match_networkx_with_a_self_loop():
    g = awkward_digraph()
    in_degree, out_degree = graphs.in_out_degrees(adjacency_of(g))
    np.testing.assert_array_equal(in_degree, [g.in_degree(i) for i in sorted(g.nodes)])
    np.testing.assert_array_equal(out_degree, [g.out_degree(i) for i in sorted(g.nodes)])
    np.testing.assert_array_equal(graphs.clipped(out_degree, 2), np.minimum(out_degree, 2))


def assert_same_up_to_sign(actual, expected):
    for column in range(expected.shape[1]):
        sign = np.sign(actual[:, column] @ expected[:, column])
        np.testing.assert_allclose(actual[:, column] * sign, expected[:, column], atol=1e-8,
                                   err_msg=f"eigenvector {column}")


def reference_positions(g, k):
    """The k eigenvectors after the first of networkx's normalized Laplacian (connected g)."""
    laplacian = nx.normalized_laplacian_matrix(g, nodelist=sorted(g.nodes)).toarray()
    values, vectors = np.linalg.eigh(laplacian)
    assert np.min(np.diff(values[: k + 2])) > 1e-6, "the test graph needs distinct eigenvalues"
    return vectors[:, 1: k + 1]


@pytest.mark.parametrize("dense_up_to", [laplacian_module.DENSE_UP_TO, 4])  # eigh, eigsh
def test_laplacian_positions_match_networkx_up_to_sign(monkeypatch, dense_up_to):
    monkeypatch.setattr(laplacian_module, "DENSE_UP_TO", dense_up_to)
    g = nx.connected_watts_strogatz_graph(24, 4, 0.3, seed=2)
    g.add_edge(5, 5)
    positions = graphs.laplacian_positions(adjacency_of(g), 4)
    assert_same_up_to_sign(positions, reference_positions(g, 4))
    # canonical signs: each column's largest-magnitude entry is positive
    assert (positions[np.abs(positions).argmax(0), range(4)] > 0).all()


def test_laplacian_positions_are_per_component_and_zero_where_undefined():
    g = nx.union(nx.connected_watts_strogatz_graph(12, 4, 0.3, seed=1),
                 nx.path_graph(3), rename=("a", "b"))
    g = nx.convert_node_labels_to_integers(g)  # nodes 0-11 the first part, 12-14 the path
    g.add_node(15)  # isolated
    positions = graphs.laplacian_positions(adjacency_of(g), 3)
    assert_same_up_to_sign(positions[:12], reference_positions(g.subgraph(range(12)), 3))
    path = reference_positions(nx.path_graph(3), 1)  # 3 nodes: 2 non-trivial eigenvectors
    assert_same_up_to_sign(positions[12:15, :1], path)
    np.testing.assert_array_equal(positions[12:15, 2], 0.0)
    np.testing.assert_array_equal(positions[15], 0.0)
    assert graphs.laplacian_positions(np.zeros((0, 0)), 3).shape == (0, 3)


def test_laplacian_positions_refuse_a_directed_graph():
    with pytest.raises(ValueError, match="symmetrize"):
        graphs.laplacian_positions(adjacency_of(awkward_digraph()), 2)


def test_return_probabilities_match_matrix_powers():
    g = awkward_digraph()
    dense = nx.to_numpy_array(g, nodelist=sorted(g.nodes), weight="weight")
    out_weight = dense.sum(1, keepdims=True)
    transition = np.divide(dense, out_weight, out=np.zeros_like(dense), where=out_weight > 0)
    expected = np.stack([np.diag(np.linalg.matrix_power(transition, s)) for s in (1, 2, 3, 4)],
                        axis=1)
    np.testing.assert_allclose(graphs.return_probabilities(adjacency_of(g), 4), expected,
                               atol=1e-12)
    assert expected[4, 0] > 0 and (expected[11] == 0).all()  # the self loop; the isolated node
    assert graphs.return_probabilities(np.zeros((0, 0)), 2).shape == (0, 2)


def test_edge_types_override_distance_codes_off_the_diagonal():
    source, target, types = np.array([0, 1, 2, 2]), np.array([1, 2, 2, 0]), np.array([0, 1, 1, 2])
    adjacency = sp.csr_array((np.ones(4), (source, target)), shape=(4, 4))
    codes = graphs.shortest_path_codes(adjacency, 2)
    typed = graphs.with_edge_types(codes, graphs.type_matrix(source, target, types, 4), 10)
    expected = codes.copy()
    expected[0, 1], expected[1, 2], expected[2, 0] = 10, 11, 12  # (2, 2) keeps its code 0
    np.testing.assert_array_equal(typed, expected)
    with pytest.raises(ValueError, match="different types"):
        graphs.type_matrix([0, 0], [1, 1], [0, 1], 2)


@pytest.mark.parametrize("bad, message", [
    (np.ones((2, 3)), "square"), (np.array([[0, np.nan], [1, 0]]), "NaN"),
    (np.array([[0, -1.0], [1, 0]]), "negative"), (np.ones(3), "square")])
def test_bad_adjacency_is_refused_with_the_reason(bad, message):
    with pytest.raises(ValueError, match=message):
        graphs.shortest_path_codes(bad, 2)


def test_weight_thresholds_are_quantiles_with_ties_merged_and_no_empty_top_bin():
    weights = np.arange(1.0, 13.0)  # 1 .. 12: quartiles at 3.75, 6.5, 9.25
    np.testing.assert_allclose(graphs.fit_weight_thresholds(weights, 4), [3.75, 6.5, 9.25])
    counts = np.r_[np.ones(7), 2, 2, 5, 9, 30]  # synapse counts: mostly 1
    thresholds = graphs.fit_weight_thresholds(counts, 4)
    # the 1/4 and 1/2 quantiles are both 1; the 3/4 one lies a quarter of the way from 2 to 5
    np.testing.assert_allclose(thresholds, [1.0, 2.75])
    np.testing.assert_array_equal(graphs.weight_bins([1, 2, 2.75, 3, 30], thresholds),
                                  [0, 1, 1, 2, 2])  # thresholds[b - 1] < w <= thresholds[b]
    assert len(graphs.fit_weight_thresholds(np.full(5, 2.0), 4)) == 0  # one weight: one bin
    assert len(graphs.fit_weight_thresholds(np.zeros(0), 4)) == 0
    with pytest.raises(ValueError, match="bins = 0"):
        graphs.fit_weight_thresholds(weights, 0)


def test_split_one_hop_gives_edges_their_bin_and_moves_longer_distances_up():
    g = nx.path_graph(4)  # 0 - 1 - 2 - 3
    adjacency = nx.to_scipy_sparse_array(g, nodelist=range(4)) * np.array([[0, 1, 0, 0],
                                                                           [1, 0, 7, 0],
                                                                           [0, 7, 0, 4],
                                                                           [0, 0, 4, 0]])
    codes = graphs.shortest_path_codes(adjacency, 2)  # 0, 1, 2 hops, 3 farther
    split = graphs.split_one_hop(codes, adjacency, np.array([2.0, 5.0]))
    np.testing.assert_array_equal(split, [[0, 1, 4, 5], [1, 0, 3, 4], [4, 3, 0, 2],
                                          [5, 4, 2, 0]])
    np.testing.assert_array_equal(graphs.split_one_hop(codes, adjacency, np.zeros(0)), codes)
    lone = graphs.shortest_path_codes(sp.csr_array((1, 1)), 2)  # no pair one hop apart
    np.testing.assert_array_equal(graphs.split_one_hop(lone, sp.csr_array((1, 1)),
                                                       np.array([2.0])), [[0]])
    hidden = graphs.shortest_path_codes(adjacency, 1, hide_farther=True)
    assert (graphs.split_one_hop(hidden, adjacency, np.array([2.0]))[0, 2:] == graphs.HIDDEN).all()
