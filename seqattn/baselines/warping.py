"""Per sample (N -> 1): the nearest training series under dynamic time warping.

The field's standard strong baseline for time-series classification: the k nearest training
samples in dynamic time warping (DTW) distance, within a Sakoe-Chiba band chosen on validation.
:class:`WarpingNeighbour` compares the samples' tokens in their order (each token one step of
the warped series, its channels standardized with the mean and spread of the training samples'
tokens), every pair over the tokens that are not padding, which may differ in number; the
distance is the least sum of squared Euclidean distances of matched tokens
(:mod:`seqattn.kernels.cpu.warping_distance`). A missing value inside a token counts as what
the model reads there.

The band (a fraction of the longer series' length: 0 matches token i with token i only, the
squared Euclidean distance between series of one length; 1 is no band) and the number of
neighbours k are chosen together on validation, as :class:`NearestNeighbour` chooses k: for
classes the best validation accuracy (ties: the lower validation log loss of the smoothed
votes, then the narrower band, then the smaller k), for values the lowest validation mean
squared error (ties: the narrower band, then the smaller k).

Tokens that are frames of a series (:class:`seqattn.adapters.SignalAdapter`) can also be
compared as the steps they hold: with ``steps=adapter.step_features()`` each token's first
`hop` steps are taken in order, as many as the adapter counts as the series' own in each
frame (its ``coords["steps"]``: the empty steps that pad a series' last frame left out), so
the warping works on the series' own steps, which keeps a waveform's shape that frames of
several steps blur; whether to compare frames or steps is then
chosen on validation with the band and k, the steps only where their validation accuracy (for
values: mean squared error) is strictly better.

With ``validation_references=True`` the validation samples join the training samples as
references once the band, k and view are chosen (standardized as the training samples were):
the choice is made as above, and the rule then votes over every labelled sample it was given.

Its cost grows as the training samples times the compared samples times the squared number of
tokens (of steps, `hop` times more, where those are compared). :func:`seqattn.evaluate` fits it
where it is given, ``baselines=[...]``; it is not among the defaults of
:func:`seqattn.baselines.for_batch`.
"""
import numpy as np

from ..adapters.signal import STEPS
from ..backend import CPU, kernels_for
from .base import Baseline, target_matrix
from .estimators import standardizer
from .linear import vocab_size_of
from .sequences import NEIGHBOURS, neighbours_outputs, validation_scores

WINDOWS = (0.0, 0.05, 0.1, 0.2, 1.0)


def _window_text(window):
    return "no window" if window >= 1.0 else f"window {100 * window:g} %"


def _by_choice(table):
    """{(view, window, k): score} keyed by readable strings (what evaluate stores as JSON)."""
    return {("on the steps, " if view == "steps" else "") + f"{_window_text(w)}, k={k}": v
            for (view, w, k), v in table.items()}


def as_steps(X, lengths, steps, own):
    """Frame tokens (B, N, F) with `lengths` real tokens first -> the steps they hold
    (B, N * hop, K), each series' own steps first in order, and (B,) their numbers: of each
    real token, the features `steps` (hop, K) of its first `own` (B, N) steps (SignalAdapter's
    ``coords["steps"]``, in the tokens' order: `hop`, fewer in the frame where the series ends).

    The steps that pad a series' last frame hold 0 in every value, as a series' own steps may:
    only the adapter's count tells them apart."""
    hop, width = steps.shape
    own = np.asarray(own, np.float64)
    if own.shape != X.shape[:2]:
        raise ValueError(f"the tokens' own steps have shape {own.shape}; expected {X.shape[:2]}, "
                         "one count per token (SignalAdapter's coords['steps'])")
    own = np.where(np.arange(X.shape[1]) < lengths[:, None], own, 0.0)
    if not np.isin(own, np.arange(hop + 1)).all():
        raise ValueError(f"the tokens' own steps (coords['steps']) must be whole numbers from 0 "
                         f"to hop={hop}; got values from {own.min()} to {own.max()}")
    view = X[:, :, steps].reshape(len(X), X.shape[1] * hop, width)
    padding = (np.arange(hop) >= own[..., None]).reshape(len(X), -1)
    return real_tokens_first(view, padding)


def token_steps(coords, padding):
    """A batch's ``coords["steps"]`` (B, N) with each sample's tokens that are not `padding`
    first, as :func:`real_tokens_first` orders the tokens."""
    if coords is None or STEPS not in coords:
        raise ValueError(f"comparing the steps inside frame tokens needs each token's "
                         f"coords[{STEPS!r}] (the series' own steps of its frame), which "
                         f"SignalAdapter's batches carry; got coords "
                         f"{None if coords is None else sorted(coords)}")
    own = np.asarray(coords[STEPS], np.float64)
    if own.shape != padding.shape:
        raise ValueError(f"coords[{STEPS!r}] has shape {own.shape}; the tokens are "
                         f"{padding.shape} (B, N)")
    return real_tokens_first(own[..., None], padding)[0][..., 0]


def _labelled(known, lengths):
    """Which samples have a known target and a token that is not padding."""
    return (known if known.ndim == 1 else known.any(axis=1)) & (lengths > 0)


def _padding(batch):
    return (np.zeros(np.shape(batch.tokens)[:2], bool) if batch.key_padding_mask is None
            else np.asarray(batch.key_padding_mask, bool))


def series(batch):
    """`batch`'s float tokens as series: (B, T, F) float64 with each sample's tokens that are
    not padding moved to the front (in their order), and (B,) their numbers."""
    tokens = np.asarray(batch.tokens)
    if tokens.dtype.kind != "f" or tokens.ndim != 3:
        raise ValueError(f"the batch's tokens have dtype {tokens.dtype} and shape {tokens.shape}; "
                         "WarpingNeighbour compares float tokens (B, N, F) as series (integer "
                         "ids have no distance between steps)")
    return real_tokens_first(tokens, _padding(batch))


def step_counts(batch):
    """`batch`'s ``coords["steps"]`` in the order :func:`series` gives its tokens."""
    return token_steps(batch.coords, _padding(batch))


def real_tokens_first(tokens, padding):
    """Tokens (B, N, F) and their padding (B, N) -> (B, N, F) float64 with each sample's tokens
    that are not padding moved to the front in their order, and (B,) their numbers."""
    # a stable sort of "padding" moves the real tokens to the front in their order
    order = np.argsort(padding, axis=1, kind="stable")
    return (np.take_along_axis(tokens, order[..., None], axis=1).astype(np.float64),
            (~padding).sum(axis=1))


class WarpingNeighbour(Baseline):
    """The mean target (values) or the smoothed class votes (classes) of the k nearest training
    samples in dynamic time warping distance, the band and k chosen on validation (see the
    module docstring), for targets per sample (N -> 1) of float tokens.

    Parameters
    ----------
    windows : tuple of float, default (0.0, 0.05, 0.1, 0.2, 1.0)
        The candidate Sakoe-Chiba bands, as fractions (0 to 1) of the longer series' number
        of tokens; a band is widened to the two lengths' difference where that is larger.
    neighbours : tuple of int, default (1, 3, 5, 9)
        The candidate numbers of neighbours k; one larger than the number of training
        samples is cut to it.
    steps : array of int (hop, K), optional
        ``SignalAdapter.step_features()``: also compare the steps the frame tokens hold, and
        choose between frames and steps on validation.
    validation_references : bool, default False
        Once the band, k and view are chosen, add the validation samples to the training
        samples as references (what a cross-validated nearest-neighbour rule does after its
        choice): on a small training file the fifth held out for the choice is a fifth of
        the references.
    """

    def __init__(self, windows=WINDOWS, neighbours=NEIGHBOURS, steps=None,
                 validation_references=False):
        windows, neighbours = tuple(windows), tuple(neighbours)
        if not windows or not all(0.0 <= w <= 1.0 for w in windows):
            raise ValueError(f"windows={windows!r}; expected bands as fractions of the length "
                             "from 0 to 1, e.g. (0.0, 0.1, 1.0)")
        if not neighbours or not all(isinstance(k, (int, np.integer)) and k >= 1
                                     for k in neighbours):
            raise ValueError(f"neighbours={neighbours!r}; expected numbers of neighbours >= 1, "
                             "e.g. (1, 3, 5)")
        self.windows, self.neighbours = tuple(float(w) for w in windows), neighbours
        if steps is not None:
            steps = np.asarray(steps)
            if steps.ndim != 2 or steps.size == 0 or steps.dtype.kind not in "iu":
                raise ValueError(f"steps has shape {steps.shape} and dtype {steps.dtype}; "
                                 "expected the (hop, K) feature indices that "
                                 "SignalAdapter.step_features() gives")
        self.steps = steps
        self.validation_references = bool(validation_references)
        self.view = "frames"

    @property
    def name(self):
        if not self.chosen:
            return "k-nearest neighbour (DTW)"
        on = ", on the steps" if self.view == "steps" else ""
        return f"{self.k}-nearest neighbour (DTW{on}, {_window_text(self.window)})"

    def _views(self, X, lengths, own):
        """{view: (series, lengths)}: the tokens as they are, and where ``steps`` was given,
        the steps they hold, each token's first `own` (B, N) of them."""
        views = {"frames": (X, lengths)}
        if self.steps is not None:
            if self.steps.max() >= X.shape[2]:
                raise ValueError(f"steps index feature {self.steps.max()}; the tokens have "
                                 f"{X.shape[2]}")
            views["steps"] = as_steps(X, lengths, self.steps, own)
        return views

    def _series(self, batch):
        """series(batch) and, where ``steps`` was given, the tokens' own steps (else None)."""
        X, lengths = series(batch)
        return X, lengths, None if self.steps is None else step_counts(batch)

    def _rows(self, batches):
        parts = [self._series(b) for b in batches]
        width = max(x.shape[1] for x, _, _ in parts)
        X = np.concatenate([np.pad(x, ((0, 0), (0, width - x.shape[1]), (0, 0)))
                            for x, _, _ in parts])
        own = (None if self.steps is None else
               np.concatenate([np.pad(o, ((0, 0), (0, width - o.shape[1]))) for _, _, o in parts]))
        targets = [target_matrix(b, self.layout)[:2] for b in batches]
        return (X, np.concatenate([n for _, n, _ in parts]), own,
                np.concatenate([t for t, _ in targets]), np.concatenate([k for _, k in targets]))

    def _fit(self, train, validation):
        if self.layout.per_token:
            raise ValueError("WarpingNeighbour predicts one target per sample; these targets are "
                             "per token")
        if vocab_size_of(train) is not None:
            raise ValueError("the training batches' tokens are integer ids; WarpingNeighbour "
                             "compares float tokens as series")
        X, lengths, own, Y, known = self._rows(train)
        keep = _labelled(known, lengths)
        if not keep.any():
            raise ValueError("no training sample has both a known target and a token that is "
                             "not padding; WarpingNeighbour needs at least one")
        self.Y, self.known, self.n_features = Y[keep], known[keep], X.shape[2]
        training = self._views(X[keep], lengths[keep], None if own is None else own[keep])
        X_valid, lengths_valid, own_valid, Y_valid, known_valid = self._rows(validation)
        references, scores, accuracies = {}, {}, {}
        held = self._views(X_valid, lengths_valid, own_valid)
        for view, queries in held.items():
            self._reference(*training[view], view)
            references[view] = (self.X, self.lengths, self.mean, self.scale)
            for window in self.windows:
                distances = self._distances(*queries, window)
                for k in self.neighbours:
                    self.k = min(k, len(self.X))
                    choice = (view, window, k)
                    accuracies[choice], scores[choice] = validation_scores(
                        self._from_neighbours(distances), Y_valid, known_valid, self.layout)
        # the steps only where they score strictly better on validation: the frames are the
        # tokens the model reads
        rank = {"frames": 0, "steps": 1}
        if self.layout.classes:
            best = min(scores, key=lambda c: (-accuracies[c], rank[c[0]], scores[c], c[1:]))
        else:
            best = min(scores, key=lambda c: (scores[c], rank[c[0]], c[1:]))
        self.view, self.window = best[0], best[1]
        self.X, self.lengths, self.mean, self.scale = references[self.view]
        if self.validation_references:
            self._add_references(held[self.view], Y_valid, known_valid)
        self.k = min(best[2], len(self.X))
        chosen = {"window": self.window, "k": self.k}
        if self.steps is not None:
            chosen["view"] = self.view
        if self.validation_references:
            chosen["references"] = len(self.X)
        if not self.layout.classes:
            return {**chosen, "validation_mse": _by_choice(scores)}
        return {**chosen, "validation_accuracy": _by_choice(accuracies),
                "validation_log_loss": _by_choice(scores)}

    def _add_references(self, validation, Y_valid, known_valid):
        """Add the validation series `validation` (series, lengths) of the chosen view that have
        a known target to the references, standardized as the training series were (the rule
        chosen keeps its scale)."""
        X_valid, lengths_valid = validation
        keep = _labelled(known_valid, lengths_valid)
        X_valid = self._standardized(X_valid[keep], lengths_valid[keep])
        width = max(self.X.shape[1], X_valid.shape[1])
        self.X = np.concatenate([np.pad(x, ((0, 0), (0, width - x.shape[1]), (0, 0)))
                                 for x in (self.X, X_valid)])
        self.lengths = np.concatenate([self.lengths, lengths_valid[keep]])
        self.Y = np.concatenate([self.Y, Y_valid[keep]])
        self.known = np.concatenate([self.known, known_valid[keep]])

    def _reference(self, X, lengths, view):
        """Keep the training series `X` (real tokens first) of `view`, standardized with the
        mean and spread of their real tokens."""
        real = np.arange(X.shape[1]) < lengths[:, None]
        self.mean, self.scale = standardizer(X[real])
        self.X = self._standardized(X, lengths)
        self.lengths, self.view = lengths, view

    def _standardized(self, X, lengths):
        """Series `X` (real tokens first) standardized with the references' mean and spread,
        their padding 0."""
        real = np.arange(X.shape[1]) < lengths[:, None]
        return np.where(real[..., None], (X - self.mean) / self.scale, 0.0)

    def _distances(self, X, lengths, window):
        """(B, R) DTW distances of series X (B, T, F) (unstandardized, their real tokens first)
        to the training series within band `window`."""
        return kernels_for(CPU, "warping_distance").warping_distance_matrix(
            (X - self.mean) / self.scale, lengths, self.X, self.lengths, window)

    def _from_neighbours(self, distances):
        # a stable sort: of equally distant training samples the earlier one counts first
        nearest = np.argsort(distances, axis=1, kind="stable")[:, :self.k]
        return neighbours_outputs(nearest, self.Y, self.known, self.layout)

    def _predict(self, batch):
        X, lengths, own = self._series(batch)
        if X.shape[2] != self.n_features:
            raise ValueError(f"the batch's tokens have {X.shape[2]} channels; WarpingNeighbour "
                             f"was fitted on tokens of {self.n_features}")
        X, lengths = self._views(X, lengths, own)[self.view]
        return self._from_neighbours(self._distances(X, lengths, self.window)).astype(np.float32)
