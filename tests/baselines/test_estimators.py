"""Ridge and logistic regression with the penalty chosen on validation rows: the fit at a
penalty is scikit-learn's on the standardized features, the choice is the validation argmin."""
import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression, Ridge

from seqattn.baselines.estimators import (RIDGE_PENALTIES, fit_logistic, fit_ridge,
                                          standardizer)

RNG = np.random.default_rng(0)


def regression(rows, noise):
    X = RNG.normal(size=(rows, 12)) * np.arange(1, 13)
    Y = X[:, :2] @ np.array([[1.0, -2.0], [0.5, 0.3]]) + noise * RNG.normal(size=(rows, 2))
    return X, Y, np.ones_like(Y, bool)


def test_ridge_at_the_chosen_penalty_is_sklearn_ridge_on_standardized_features():
    X, Y, known = regression(30, 3.0)
    fit, chosen = fit_ridge(X, Y, known, *regression(200, 3.0))
    mean, scale = standardizer(X)
    reference = Ridge(alpha=chosen["penalty"]).fit((X - mean) / scale, Y)
    X_new = RNG.normal(size=(5, 12))
    np.testing.assert_allclose(fit.predict(X_new), reference.predict((X_new - mean) / scale),
                               rtol=1e-8, atol=1e-10)
    weight, bias = fit.raw()
    np.testing.assert_allclose(X_new @ weight.T + bias, fit.predict(X_new), rtol=1e-10)


def test_ridge_chooses_the_penalty_that_scores_best_on_validation_not_on_training():
    X, Y, known = regression(20, 5.0)  # few noisy rows: training prefers the least penalty
    X_valid, Y_valid, known_valid = regression(500, 0.0)
    _, chosen = fit_ridge(X, Y, known, X_valid, Y_valid, known_valid)
    scores = chosen["validation_mse"]
    assert chosen["penalty"] == min(scores, key=scores.get)
    assert chosen["penalty"] > RIDGE_PENALTIES[0]
    on_training = fit_ridge(X, Y, known, X, Y, known)[1]
    assert on_training["penalty"] == RIDGE_PENALTIES[0]


def test_ridge_leaves_out_rows_with_a_missing_target():
    X, Y, known = regression(40, 0.1)
    Y_broken, known_broken = Y.copy(), known.copy()
    Y_broken[:5] = 1e6
    known_broken[:5, 0] = False
    fit, _ = fit_ridge(X, Y_broken, known_broken, *regression(50, 0.1))
    clean, _ = fit_ridge(X[5:], Y[5:], known[5:], *regression(50, 0.1))
    np.testing.assert_allclose(fit.coef, clean.coef, rtol=1e-6, atol=1e-9)


def test_logistic_at_the_chosen_penalty_is_sklearn_and_its_raw_map_gives_its_logits():
    X = RNG.normal(size=(120, 3)) * [1.0, 10.0, 0.1]
    y = (X[:, 0] + X[:, 2] * 10 + 0.5 * RNG.normal(size=120) > 0).astype(int)
    fit, chosen = fit_logistic(X[:80], y[:80], X[80:], y[80:], n_classes=3)
    mean, scale = standardizer(X[:80])
    reference = LogisticRegression(C=chosen["C"], max_iter=2000).fit((X[:80] - mean) / scale,
                                                                     y[:80])
    logits = fit.predict(X[80:])
    np.testing.assert_allclose(np.exp(logits[:, :2]),
                               reference.predict_proba((X[80:] - mean) / scale), rtol=1e-6)
    assert (np.exp(logits[:, 2]) < 1e-6).all(), "a class absent from training gets the floor"
    weight, bias = fit.raw()
    raw = X[80:] @ weight.T + bias
    softmax = np.exp(raw - raw.max(1, keepdims=True))
    np.testing.assert_allclose(softmax / softmax.sum(1, keepdims=True), np.exp(logits),
                               rtol=1e-5, atol=1e-7)


def test_logistic_refuses_one_class():
    with pytest.raises(ValueError, match="one class only"):
        fit_logistic(np.ones((4, 2)), np.zeros(4, int), np.ones((2, 2)), np.zeros(2, int), 2)
