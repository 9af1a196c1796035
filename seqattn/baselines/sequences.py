"""Per sample (N -> 1): a linear model on pooled inputs, and the nearest training sample.

Pooled features of every input channel over the tokens that are not padding: the mean (the
function class of the task model's linear path, ``SequenceModelConfig(linear=True)``), and with
``statistics=("mean", "std", "min", "max")`` (the default) the spread and extremes too, plus the
number of tokens. Integer ids are pooled as one-hot rows, so their mean is the ids' frequencies
(for ids the default pools the frequencies and the number of tokens only).
:class:`NearestNeighbour` predicts the target of the closest training sample (Euclidean, on the
standardized flattened inputs when every sample has the same number of tokens, else on the pooled
features), with the number of neighbours chosen on validation: for classes the k of the best
validation accuracy (ties: the lower validation log loss, then the smaller k), the class
probabilities being the neighbours' votes smoothed by one pseudo-vote shared equally by the
classes, ``(votes + 1 / C) / (k + 1)`` (raw vote fractions give a class no neighbour voted for
probability 0, so the log loss of raw fractions punishes every miss of a small k without bound
and picks the largest k on small training sets); for values the k of the lowest validation mean
squared error.
"""
import numpy as np

from .base import Baseline, target_matrix
from .estimators import PROBABILITY_FLOOR, log_loss, masked_mse, standardizer
from .linear import LinearBaseline, id_frequencies, token_inputs, vocab_size_of

STATISTICS = ("mean", "std", "min", "max")
NEIGHBOURS = (1, 3, 5, 9)


def pooled(inputs, key_padding_mask, statistics):
    """(B, N, F) inputs -> (B, F * len(statistics) [+ 1]) over the unpadded tokens; anything
    but the mean alone adds the number of tokens."""
    present = ~np.asarray(key_padding_mask)
    count = np.maximum(present.sum(axis=1), 1)[:, None]
    weights = present[..., None]
    mean = (inputs * weights).sum(axis=1) / count
    columns = {"mean": mean}
    if "std" in statistics:
        columns["std"] = np.sqrt(np.maximum((inputs ** 2 * weights).sum(axis=1) / count
                                            - mean ** 2, 0.0))
    if "min" in statistics:
        columns["min"] = np.where(weights, inputs, np.inf).min(axis=1)
    if "max" in statistics:
        columns["max"] = np.where(weights, inputs, -np.inf).max(axis=1)
    out = [columns[s] for s in statistics]
    if statistics != ("mean",):
        out.append(present.sum(axis=1)[:, None].astype(np.float64))
    features = np.concatenate(out, axis=1)
    return np.where(np.isfinite(features), features, 0.0)


def neighbours_outputs(nearest, Y, known, layout):
    """What the (B, k) `nearest` training samples (rows of targets `Y`, `known` where given)
    predict: for classes their smoothed votes' log probabilities, for values the mean of their
    known targets."""
    if layout.classes:
        return smoothed_votes(Y[nearest], layout.n_outputs)
    known = known[nearest]
    return np.where(known, Y[nearest], 0.0).sum(axis=1) / np.maximum(known.sum(axis=1), 1)


def validation_scores(prediction, Y, known, layout):
    """How neighbours' `prediction` scores on validation targets `Y` (`known` where given):
    (accuracy, log loss) for classes, (None, mean squared error) for values."""
    if not layout.classes:
        return None, masked_mse(prediction, Y, known)
    logits, labels = prediction[known], Y[known]
    return float(np.mean(logits.argmax(axis=1) == labels)), log_loss(logits, labels)


def smoothed_votes(neighbour_classes, n_classes):
    """(B, k) class ids of each sample's k nearest training samples -> (B, n_classes) log
    probabilities: the votes smoothed by one pseudo-vote shared by the classes,
    ``(votes + 1 / C) / (k + 1)`` (see the module docstring)."""
    neighbour_classes = np.asarray(neighbour_classes)
    k = neighbour_classes.shape[1]
    counts = np.zeros((len(neighbour_classes), n_classes))
    np.add.at(counts, (np.arange(len(neighbour_classes))[:, None], neighbour_classes), 1.0)
    return np.log(np.maximum((counts + 1.0 / n_classes) / (k + 1), PROBABILITY_FLOOR))


class PooledFeatures(LinearBaseline):
    """Ridge (values) or logistic regression (classes) per sample on its inputs pooled over
    the tokens that are not padding, for targets per sample (N -> 1); the penalty chosen on
    validation.

    Parameters
    ----------
    statistics : tuple of str, default ('mean', 'std', 'min', 'max')
        The statistics of every input channel over the tokens (used in the order mean,
        std, min, max, whatever the order given); ``"mean"`` is required. Anything but the mean alone adds the number of tokens.
        Integer ids are pooled as their frequencies (and the number of tokens, unless
        ``("mean",)``). ``("mean",)`` is the function class of a SequenceModel's linear
        path, which :func:`~seqattn.baselines.warm_start` can start from it.
    """

    kind = "pooled"

    def __init__(self, statistics=STATISTICS):
        unknown = set(statistics) - set(STATISTICS)
        if unknown or "mean" not in statistics:
            raise ValueError(f"statistics={statistics!r}; expected 'mean' and any of "
                             f"{STATISTICS}")
        self.statistics = tuple(s for s in STATISTICS if s in statistics)

    def prepare(self, train):
        self.vocab_size = vocab_size_of(train)

    def features(self, batch):
        if self.vocab_size is None:
            return pooled(token_inputs(batch), batch.key_padding_mask, self.statistics)
        # ids: the one-hot rows' spread and extremes are functions of their mean (the ids'
        # frequencies), so the frequencies and the number of tokens say it all
        frequencies = id_frequencies(batch, self.vocab_size)
        return frequencies[:, :-1] if self.statistics == ("mean",) else frequencies


class NearestNeighbour(Baseline):
    """The mean target (values) or the smoothed class votes (classes) of the k nearest training
    samples, k chosen on validation among ``neighbours`` (see the module docstring), for
    targets per sample (N -> 1). Samples are compared on their flattened inputs up to
    ``max_features`` numbers (one-hot ids count one per id), else on their pooled features.

    Parameters
    ----------
    neighbours : tuple of int, default (1, 3, 5, 9)
        The candidate numbers of neighbours k; one larger than the number of training
        samples is cut to it.
    max_features : int, default 4096
        The widest flattened input (tokens times channels, or tokens times ids) compared as
        it is; samples of different lengths, or wider, are compared on their pooled
        features (for ids: their frequencies and number of tokens).
    """

    def __init__(self, neighbours=NEIGHBOURS, max_features=4096):
        self.neighbours, self.max_features = tuple(neighbours), int(max_features)

    @property
    def name(self):
        return f"{self.chosen['k'] if self.chosen else 'k'}-nearest neighbour"

    def features(self, batch):
        tokens = np.asarray(batch.tokens)
        if self.flat_width is not None:
            if self._width(batch) != self.flat_width:
                raise ValueError(f"the batch's samples flatten to {self._width(batch)} numbers (or "
                                 "have padding); NearestNeighbour was fitted on samples of one "
                                 f"length, {self.flat_width} numbers, compared position by "
                                 "position")
            return token_inputs(batch, self.vocab_size).reshape(len(tokens), -1)
        if self.vocab_size is not None:
            return id_frequencies(batch, self.vocab_size)
        return pooled(token_inputs(batch), batch.key_padding_mask, STATISTICS)

    def _width(self, batch):
        """How many numbers a sample of `batch` flattens to; None if any sample is padded."""
        tokens = np.asarray(batch.tokens)
        if batch.key_padding_mask is not None and np.asarray(batch.key_padding_mask).any():
            return None
        return tokens.shape[1] * (self.vocab_size or tokens.shape[-1])

    def rows(self, batches):
        X = np.concatenate([self.features(b) for b in batches])
        targets = [target_matrix(b, self.layout)[:2] for b in batches]
        return X, np.concatenate([t for t, _ in targets]), np.concatenate([k for _, k in targets])

    def _fit(self, train, validation):
        from sklearn.neighbors import NearestNeighbors

        if self.layout.per_token:
            raise ValueError("NearestNeighbour predicts one target per sample; these targets "
                             "are per token")
        self.vocab_size = vocab_size_of(train)
        widths = {self._width(b) for b in train + validation}
        width = widths.pop()
        self.flat_width = (width if not widths and width is not None
                           and width <= self.max_features else None)
        X, Y, known = self.rows(train)
        keep = known if known.ndim == 1 else known.any(axis=1)
        self.X, self.Y, self.known = X[keep], Y[keep], known[keep]
        self.mean, self.scale = standardizer(self.X)
        self.index = NearestNeighbors().fit((self.X - self.mean) / self.scale)
        X_valid, Y_valid, known_valid = self.rows(validation)
        scores, accuracies = {}, {}
        for k in self.neighbours:
            self.k = min(k, len(self.X))
            accuracies[k], scores[k] = validation_scores(self._from_neighbours(X_valid),
                                                         Y_valid, known_valid, self.layout)
        if not self.layout.classes:
            self.k = min(min(scores, key=scores.get), len(self.X))
            return {"k": self.k, "validation_mse": scores}
        best = min(scores, key=lambda k: (-accuracies[k], scores[k], k))
        self.k = min(best, len(self.X))
        return {"k": self.k, "validation_accuracy": accuracies, "validation_log_loss": scores}

    def _from_neighbours(self, X):
        _, nearest = self.index.kneighbors((X - self.mean) / self.scale, n_neighbors=self.k)
        return neighbours_outputs(nearest, self.Y, self.known, self.layout)

    def _predict(self, batch):
        return self._from_neighbours(self.features(batch)).astype(np.float32)
