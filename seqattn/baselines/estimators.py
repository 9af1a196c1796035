"""Ridge and logistic regression with the penalty chosen on validation rows.

Features are standardized with the training rows' mean and standard deviation (a constant column
keeps scale 1, so it adds nothing). Ridge is solved for every penalty from one eigendecomposition
of the training rows' Gram matrix; logistic regression is scikit-learn's. Each returns the fitted
model and the validation score of every candidate penalty, the one chosen being the lowest
(mean squared error, or mean log loss, on the validation rows' known targets).
"""
from dataclasses import dataclass

import numpy as np
from scipy import sparse

from ..kernels.cpu.gemm.blas_library import single_threaded_blas

RIDGE_PENALTIES = tuple(10.0 ** np.arange(-3, 6))
LOGISTIC_INVERSE_PENALTIES = tuple(10.0 ** np.arange(-3, 3))
ROUNDING = 1e-9  # relative spread below which a training column counts as constant
PROBABILITY_FLOOR = 1e-7  # keeps the log of a probability finite for a class never predicted


def standardizer(X):
    """Column means and scales of X; a sparse X is scaled only (its zeros stay zeros). A column
    constant up to rounding (a spread of at most ROUNDING times its size) keeps scale 1:
    dividing its rounding noise by a spread of 1e-16 would make it a feature of size 1, and a
    linear map's weights on it of 1e13."""
    if sparse.issparse(X):
        mean = np.asarray(X.mean(axis=0)).ravel()
        scale = np.sqrt(np.maximum(np.asarray(X.multiply(X).mean(axis=0)).ravel() - mean ** 2, 0))
        return np.zeros_like(mean), np.where(scale > 0, scale, 1.0)
    mean = X.mean(axis=0)
    scale = X.std(axis=0)
    return mean, np.where(scale > ROUNDING * np.maximum(np.abs(mean), 1.0), scale, 1.0)


def standardized(X, mean, scale):
    if sparse.issparse(X):
        return sparse.csr_matrix(X.multiply(1.0 / scale))
    return (X - mean) / scale


@dataclass
class LinearFit:
    """outputs = ((X - mean) / scale) @ coef + intercept."""

    mean: np.ndarray
    scale: np.ndarray
    coef: np.ndarray       # (D, Ft)
    intercept: np.ndarray  # (Ft,)

    def predict(self, X):
        if sparse.issparse(X):
            X = X.toarray()
        return ((X - self.mean) / self.scale) @ self.coef + self.intercept

    def raw(self):
        """(weight (Ft, D), bias (Ft,)) acting on the unstandardized features."""
        weight = (self.coef / self.scale[:, None]).T
        return weight, self.intercept - weight @ self.mean


def masked_mse(prediction, Y, known):
    return float(np.sum(np.where(known, prediction - Y, 0.0) ** 2) / max(known.sum(), 1))


def fit_ridge(X, Y, known, X_valid, Y_valid, known_valid, penalties=RIDGE_PENALTIES):
    """The ridge fit (X (R, D) -> Y (R, Ft)) whose penalty scores best on the validation rows,
    and {penalty: validation mse}. Training rows with a missing target in any output that is
    ever known are left out (one solve serves every output)."""
    rows = known[:, known.any(axis=0)].all(axis=1)
    if not rows.any():
        raise ValueError("no training row has every target known; ridge needs at least one")
    X, Y = np.asarray(X[rows], np.float64), np.asarray(Y[rows], np.float64)
    mean, scale = standardizer(X)
    Z = (X - mean) / scale
    intercept = Y.mean(axis=0)
    eigenvalues, V = np.linalg.eigh(Z.T @ Z)
    projected = V.T @ (Z.T @ (Y - intercept))
    scores, fits = {}, {}
    for penalty in penalties:
        coef = V @ (projected / (eigenvalues + penalty)[:, None])
        fits[penalty] = LinearFit(mean, scale, coef, intercept)
        scores[penalty] = masked_mse(fits[penalty].predict(X_valid), Y_valid, known_valid)
    best = min(scores, key=scores.get)
    return fits[best], {"penalty": best, "validation_mse": scores}


@dataclass
class LogisticFit:
    """scikit-learn's LogisticRegression on standardized features, giving logits over all
    ``n_classes`` (a class absent from training gets the floor probability)."""

    mean: np.ndarray
    scale: np.ndarray
    model: object
    n_classes: int

    def predict(self, X):
        probabilities = np.full((X.shape[0], self.n_classes), PROBABILITY_FLOOR)
        probabilities[:, self.model.classes_] = np.maximum(
            self.model.predict_proba(standardized(X, self.mean, self.scale)), PROBABILITY_FLOOR)
        return np.log(probabilities)

    def raw(self):
        """(weight (C, D), bias (C,)) whose logits give the same probabilities, on the
        unstandardized features."""
        coef, intercept = self.model.coef_, self.model.intercept_
        if len(self.model.classes_) == 2:  # one logit z: the classes' logits are 0 and z
            coef = np.vstack([np.zeros_like(coef), coef])
            intercept = np.concatenate([[0.0], intercept])
        weight = np.full((self.n_classes, coef.shape[1]), 0.0)
        bias = np.full(self.n_classes, np.log(PROBABILITY_FLOOR))
        weight[self.model.classes_] = coef / self.scale
        bias[self.model.classes_] = intercept - weight[self.model.classes_] @ self.mean
        return weight, bias


def log_loss(logits, labels):
    logits = logits - logits.max(axis=1, keepdims=True)
    log_probability = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    return float(-log_probability[np.arange(len(labels)), labels].mean())


def fit_logistic(X, y, X_valid, y_valid, n_classes,
                 inverse_penalties=LOGISTIC_INVERSE_PENALTIES):
    """The logistic regression (X (R, D) -> class y (R,)) whose inverse penalty C scores best
    (mean log loss) on the validation rows, and {C: validation log loss}."""
    from sklearn.linear_model import LogisticRegression

    if not sparse.issparse(X):
        X, X_valid = np.asarray(X, np.float64), np.asarray(X_valid, np.float64)
    if len(np.unique(y)) < 2:
        raise ValueError(f"the training rows hold one class only ({np.unique(y).tolist()}); "
                         "a classifier baseline needs at least two")
    mean, scale = standardizer(X)
    Z = standardized(X, mean, scale)
    scores, fits = {}, {}
    for c in inverse_penalties:
        # one BLAS thread: each of the solver's steps is a few small products, on which BLAS's
        # threads mostly wait for each other, and on busy cores for a time slice
        # (BENCHMARKS.md, "Baselines on one BLAS thread")
        with single_threaded_blas():
            model = LogisticRegression(C=c, max_iter=2000).fit(Z, y)
        fits[c] = LogisticFit(mean, scale, model, n_classes)
        scores[c] = log_loss(fits[c].predict(X_valid), y_valid)
    best = min(scores, key=scores.get)
    return fits[best], {"C": best, "validation_log_loss": scores}
