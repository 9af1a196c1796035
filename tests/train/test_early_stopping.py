"""EarlyStopping on scripted validation values: it stops after exactly ``patience`` epochs
without improvement (an off-by-one there passed the whole suite once), keeps the best epoch's
weights, honours ``min_delta`` and ``mode``, and a resumed stopper continues its count."""
import numpy as np
import pytest

from seqattn.train import EarlyStopping


class _Weights:
    """Stands in for a model: its state dict is the epoch it was taken at."""

    def __init__(self):
        self.epoch = None

    def state_dict(self):
        return {"epoch": np.array(self.epoch)}


def _stop_decisions(stopper, values, monitor="val_loss"):
    """What ``update`` answers for each epoch's value, until it says stop."""
    model, decisions = _Weights(), []
    for epoch, value in enumerate(values):
        model.epoch = epoch
        decisions.append(stopper.update(epoch, {monitor: value}, model))
        if decisions[-1]:
            break
    return decisions


@pytest.mark.parametrize("patience", [1, 2, 3])
def test_it_stops_after_exactly_patience_epochs_without_improvement(patience):
    values = [1.0, 0.5] + [0.7] * (patience + 3)
    decisions = _stop_decisions(EarlyStopping(patience=patience), values)
    assert decisions == [False] * (patience + 1) + [True]


def test_an_improvement_resets_the_count_and_the_best_weights_are_those_of_the_best_epoch():
    stopper = EarlyStopping(patience=2)
    decisions = _stop_decisions(stopper, [1.0, 1.1, 0.9, 1.2, 0.95, 1.3])
    assert decisions == [False, False, False, False, True]
    assert stopper.best == 0.9 and stopper.best_epoch == 2 and stopper.wait == 2
    assert stopper.best_weights["epoch"] == 2


def test_min_delta_and_mode_max():
    small_gains = _stop_decisions(EarlyStopping(patience=2, min_delta=0.1), [1.0, 0.95, 0.92])
    assert small_gains == [False, False, True]
    rising = EarlyStopping(patience=1, monitor="val_accuracy", mode="max")
    assert _stop_decisions(rising, [0.5, 0.6, 0.55], monitor="val_accuracy") == [False] * 2 + [True]
    assert rising.best == 0.6


def test_a_stopper_restored_from_its_state_counts_on():
    first = EarlyStopping(patience=3)
    _stop_decisions(first, [1.0, 1.5, 1.5])
    resumed = EarlyStopping(patience=3)
    resumed.load_state(first.state(), first.best_weights)
    assert _stop_decisions(resumed, [1.5]) == [True]


def test_a_missing_monitored_value_is_named():
    with pytest.raises(KeyError, match="val_loss.*lack.*'loss'"):
        EarlyStopping().update(0, {"loss": 1.0}, _Weights())


@pytest.mark.parametrize("options, match", [
    (dict(patience=0), "patience must be a whole number of epochs >= 1, got 0"),
    (dict(patience=2.5), "patience must be .* got 2.5"),
    (dict(min_delta=-0.1), "min_delta must be >= 0 .* got -0.1"),
    (dict(mode="lowest"), "mode must be 'min' or 'max', got 'lowest'"),
])
def test_bad_settings_are_named(options, match):
    with pytest.raises(ValueError, match=match):
        EarlyStopping(**options)
