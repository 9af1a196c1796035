"""The adapter protocol (seqattn.data.protocol), checked the same way for every adapter: one row
per adapter in tests/helpers/conformance_*.py."""
import numpy as np
import pytest
import xarray as xr

import seqattn
import seqattn.adapters  # noqa: F401  (registers ds.seqattn)
from seqattn.data.protocol import NotFittedError
from seqattn.models import build
from seqattn.train import Adam, fit

from conformance import as_outputs, rows

ROWS = rows()


@pytest.fixture(params=ROWS, ids=[r.name for r in ROWS], scope="module")
def row(request):
    return request.param


@pytest.fixture(scope="module")
def dataset(row):
    return row.make_dataset()


@pytest.fixture(scope="module")
def fitted(row, dataset):
    return row.make_adapter().fit(dataset, targets=row.targets, where=row.train)


def test_an_unfitted_adapter_refuses_to_encode(row, dataset):
    with pytest.raises(NotFittedError, match="fit"):
        row.make_adapter().encode(dataset)


def test_fit_reads_only_the_selected_samples(row, dataset, fitted):
    on_subset = row.make_adapter().fit(fitted.select(dataset, row.train), targets=row.targets)
    on_all = row.make_adapter().fit(dataset, targets=row.targets)
    assert fitted.to_dict() == on_subset.to_dict()
    assert fitted.to_dict() != on_all.to_dict(), "the row's train part must differ from the rest"


def test_fit_leaves_the_dataset_unchanged(row, dataset):
    before = dataset.copy(deep=True)
    adapter = row.make_adapter().fit(dataset, targets=row.targets, where=row.train)
    list(adapter.batches(dataset, where=row.train, batch_size=3, shuffle=True, seed=0))
    xr.testing.assert_identical(dataset, before)


def test_epochs_replay_and_differ(row, dataset, fitted):
    batches = fitted.batches(dataset, where=row.train, batch_size=3, shuffle=True, seed=1)
    first = [b.tokens for b in batches.epoch(1)]
    again = [b.tokens for b in batches.epoch(1)]
    other = [b.tokens for b in batches.epoch(2)]
    assert len(first) == len(batches)
    assert all(np.array_equal(a, b) for a, b in zip(first, again))
    assert not all(a.shape == b.shape and np.array_equal(a, b) for a, b in zip(first, other))
    n_train = sum(len(t) for t in first)
    assert n_train == sum(len(b) for b in fitted.batches(dataset, where=row.train))
    assert n_train < sum(len(b) for b in fitted.batches(dataset))


def test_decoding_the_targets_gives_them_back(row, dataset, fitted):
    batch = fitted.encode(dataset, where=row.test)
    if row.outputs is not None:
        outputs = row.outputs(batch)
    else:
        n_classes = fitted.model_config(task=row.task, **row.model_options).out_features \
            if row.task == "classification" else None
        outputs = as_outputs(batch, row.task, n_classes)
    decoded = fitted.decode(batch, outputs)
    expected = fitted.select(dataset, row.test)[row.predicted]
    got = decoded[row.predicted]
    if row.view is not None:
        got, expected = row.view(got, expected)
    got = got.transpose(*expected.dims)
    if row.task == "classification":
        np.testing.assert_array_equal(got.values, expected.values)
    else:
        np.testing.assert_allclose(got.values, expected.values, rtol=1e-5, atol=1e-5 * float(
            np.nanmax(np.abs(expected.values))))


def test_fit_predict_save_load(row, dataset, fitted, tmp_path):
    config = fitted.model_config(task=row.task, **row.model_options)
    model = build(config)
    history = fit(model, row.loss(), Adam(model.parameters(), lr=3e-3),
                  fitted.batches(dataset, where=row.train, batch_size=4, shuffle=True, seed=0),
                  epochs=2, progress=False)
    assert np.isfinite(history["loss"]).all()
    out = seqattn.predict(model, dataset, fitted)
    assert set(row.prediction_dims) <= set(out[row.predicted].dims)
    for dim in row.prediction_dims:
        if dim in dataset.coords:
            np.testing.assert_array_equal(out[dim].values, dataset[dim].values)
    if row.task == "classification":
        probability = out[f"{row.predicted}_probability"]
        np.testing.assert_allclose(probability.sum("class"), 1.0, rtol=1e-5)
    elif "units" in dataset[row.predicted].attrs:
        assert out[row.predicted].attrs["units"] == dataset[row.predicted].attrs["units"]
    xr.testing.assert_identical(dataset.seqattn.predict(model, fitted), out)
    seqattn.save(model, tmp_path / "model")
    seqattn.save(fitted, tmp_path / "adapter")
    loaded = seqattn.load(tmp_path / "adapter")
    xr.testing.assert_identical(seqattn.predict(seqattn.load(tmp_path / "model"), dataset, loaded),
                                out)


def test_bad_inputs_are_named(row, dataset, fitted):
    with pytest.raises(ValueError, match="where"):
        fitted.batches(dataset, where={"no_such_dim": [0]})
    for call, error, text in row.bad_inputs:
        with pytest.raises(error, match=text):
            call(fitted, dataset)
