"""The adapter conformance table: one row per adapter, the same checks for every row
(tests/adapters/test_conformance.py). A new adapter joins by adding a module
``conformance_<domain>.py`` here with ``ROWS = [Row(...)]`` and naming it in ``ROW_MODULES``."""
import importlib
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

ROW_MODULES = ["conformance_grid", "conformance_signal", "conformance_forecast",
               "conformance_genome", "conformance_molecule", "conformance_graph",
               "conformance_complex", "conformance_residues"]


@dataclass
class Row:
    """How to exercise one adapter.

    ``make_dataset()`` builds a small Dataset whose ``train`` samples have other statistics than
    the rest (so a fit that reads every sample is caught); ``make_adapter()`` an unfitted
    adapter; ``targets`` the target variable (None where the adapter implies its targets, as
    forecast windows do); ``train``/``test`` are ``where`` selections; ``task`` is passed to
    ``model_config`` with ``model_options``; ``loss()`` makes the training loss;
    ``prediction_dims`` are the dims the predicted target must have; ``bad_inputs`` are
    (call(adapter, ds), exception type, text the message must contain) for a fitted adapter.
    """

    name: str
    make_dataset: Callable
    make_adapter: Callable
    targets: object
    train: object
    test: object
    task: str
    loss: Callable
    prediction_dims: tuple
    model_options: dict = field(default_factory=dict)
    bad_inputs: list = field(default_factory=list)
    prediction_name: str = None  # the predicted variable's name (default: targets)
    # batch -> the model outputs that stand for its own targets, where as_outputs cannot make
    # them (molecule batches carry a dict of target groups)
    outputs: Callable = None
    # (decoded variable, expected variable) -> the pair to compare, where decoding adds dims
    # (forecasts: a lead, on the valid times the test samples reach)
    view: Callable = None

    @property
    def predicted(self):
        return self.prediction_name or self.targets


def rows():
    found = []
    for name in ROW_MODULES:
        found.extend(importlib.import_module(name).ROWS)
    return found


def as_outputs(batch, task, n_classes=None):
    """The model outputs that stand for the batch's own targets: the targets themselves for
    regression, confident logits of the target class for classification."""
    targets = np.asarray(batch.targets)
    if task != "classification":
        valid = getattr(batch, "target_valid", None)
        return targets if valid is None else np.where(valid, targets, np.nan)
    classes = np.asarray(targets, dtype=np.int64)
    logits = np.full(classes.shape + (n_classes,), -20.0, dtype=np.float32)
    np.put_along_axis(logits, np.maximum(classes, 0)[..., None], 20.0, axis=-1)
    return logits
