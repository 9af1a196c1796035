"""seqattn's own task models through predict: N -> N on a grid, N -> 1 per sample, and a
forecast, each equal to running the model by hand in evaluation mode and decoding; the models
encode the batches' coordinates (lat/lon, time, lead), which predict passes by name."""
import inspect

import numpy as np
import pytest
import xarray as xr

from adapters_helpers import make_grid
from seqattn.adapters import ForecastWindows, GridAdapter, predict
from seqattn.models import SequenceModel, TokenModel, build

SIZES = dict(d_model=16, nhead=2, num_layers=1, dim_feedforward=32, dropout=0.5)


def by_hand(model, batch):
    """The model on one batch in evaluation mode, coords passed when it takes them."""
    takes = "coords" in inspect.signature(model.forward).parameters
    model.eval()
    out = model(batch.tokens, batch.key_padding_mask, **({"coords": batch.coords} if takes
                                                           else {}))
    model.train()
    return np.asarray(out)


@pytest.fixture(scope="module")
def data():
    ds = make_grid(time=4, lat=4, lon=4, nan_fraction=0.1, dtype="float32")
    ds["storm"] = ("time", np.array(["calm", "gale", "calm", "storm"], dtype=object))
    return ds, GridAdapter(["t", "u", "lsm"], {"lat": 2, "lon": 2}, calendar=True).fit(ds)


def test_a_token_model_predicts_on_the_grid_as_by_hand(data):
    ds, adapter = data
    batch = adapter.encode(ds)
    config = adapter.model_config(coordinates=("latlon", "time_of_day", "day_of_year"), **SIZES)
    model = build(config)
    assert isinstance(model, TokenModel) and config.out_features == 12  # t, u, lsm: 4 cells
    out = predict(model, ds, adapter)
    assert model.training                                   # its mode is given back
    xr.testing.assert_identical(out, adapter.decode(batch, by_hand(model, batch)))


def test_a_sequence_model_classifies_per_sample_as_by_hand(data):
    ds, _ = data
    adapter = GridAdapter(["t", "u", "lsm"], {"lat": 2, "lon": 2}).fit(ds, targets="storm")
    batch = adapter.encode(ds)
    config = adapter.model_config(task="classification", **SIZES)
    model = build(config)
    assert isinstance(model, SequenceModel) and config.out_features == 3
    out = predict(model, ds, adapter)
    logits = by_hand(model, batch)
    np.testing.assert_array_equal(out.storm.values,
                                  np.array(["calm", "gale", "storm"])[logits.argmax(-1)])
    probability = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    np.testing.assert_allclose(out.storm_probability.values, probability, rtol=1e-5)
    assert out.storm_probability.dims == ("time", "class")
    assert out["class"].values.tolist() == ["calm", "gale", "storm"]


def test_a_token_model_forecasts_as_by_hand(data):
    ds, adapter = data
    windows = ForecastWindows(adapter, leads=["6h", "12h"], history=1, increments=True).fit(ds)
    batch = windows.encode(ds)
    model = build(windows.model_config(coordinates=("latlon", "lead"), causal=True, **SIZES))
    out = predict(model, ds, windows)
    xr.testing.assert_identical(out, windows.decode(batch, by_hand(model, batch)))
    xr.testing.assert_identical(predict(model, ds.chunk({"time": 2}), windows).compute(), out)
    with pytest.raises(ValueError, match="pass the ForecastWindows, not its adapter"):
        ds.seqattn.predict(model, adapter)
