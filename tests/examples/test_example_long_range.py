"""The long-range example: its NumPy baselines' backward passes against float64 finite
differences, the task's labels, and the quick run, where attention reaches further than a local
convolution and a GRU of the same size."""
import sys
from pathlib import Path

import numpy as np
import pytest

from gradcheck import assert_gradient, numerical_gradient

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))

import long_range  # noqa: E402


@pytest.mark.parametrize("build", [lambda rng: long_range.ConvNet(3, rng),
                                   lambda rng: long_range.GRUNet(3, rng)], ids=["conv", "gru"])
def test_numpy_baseline_gradients_match_finite_differences(build):
    rng = np.random.default_rng(0)
    net = build(rng)
    net.params = {k: v.astype(np.float64) for k, v in net.params.items()}
    x = rng.normal(size=(2, 7, long_range.FEATURES))
    dout = rng.normal(size=(2, 2))
    net.forward(x)
    analytic = net.backward(dout)
    assert set(analytic) == set(net.params)
    for name, value in net.params.items():
        numeric = numerical_gradient(lambda: float(np.sum(net.forward(x) * dout)), value)
        assert_gradient(name, analytic[name], numeric, rtol=1e-5)


def test_cross_entropy_gradient_matches_finite_differences():
    rng = np.random.default_rng(1)
    logits, labels = rng.normal(size=(4, 2)), np.array([0, 1, 1, 0])
    _, analytic = long_range.softmax_cross_entropy(logits, labels)
    numeric = numerical_gradient(lambda: long_range.softmax_cross_entropy(logits, labels)[0],
                                 logits)
    assert_gradient("logits", analytic, numeric, rtol=1e-5)


def test_labels_say_whether_the_two_marked_signs_agree():
    tokens, labels = long_range.sequences(50, 9, np.random.default_rng(2))
    assert tokens.shape == (50, 18, long_range.FEATURES)
    for x, label in zip(tokens, labels):
        marked = np.flatnonzero(x[:, 0])
        assert marked[1] - marked[0] == 9
        assert label == (x[marked[0], 1] == x[marked[1], 1])
        assert np.all(x[np.flatnonzero(x[:, 0] == 0), 1] == 0)


def test_quick_run_attention_reaches_further_than_convolution_and_gru():
    results = long_range.main(["--quick"])
    far = max(results["seqattn attention"])
    assert results["seqattn attention"][far] > results["local convolution"][far]
    assert results["seqattn attention"][far] > results["GRU"][far]
