"""Every adapter's and ForecastWindows' configuration round-trips through to_dict/from_dict
(as JSON text), normalizer included: what seqattn.save/load builds on."""
import json

import numpy as np
import pytest

from adapters_helpers import make_grid, make_signal
from seqattn.adapters import ForecastWindows, GridAdapter, SignalAdapter
from seqattn.data.persistence import Persistable
from seqattn.data.protocol import NotFittedError

GRID = make_grid(time=5, level=2, lat=4, lon=4)
SIGNAL = make_signal(length=24, stations=2, start="2020-01-01")

ADAPTERS = {
    "grid": (lambda: GridAdapter(["t", "u", "lsm"], {"lat": 2, "lon": 2}, channel_dims=("level",),
                                 per_dims=("level",), periodic=("lon",), validity_channel=False,
                                 strict=True, dtype="float64", calendar=True), GRID),
    "grid tokens": (lambda: GridAdapter(["t", "u"], {"lat": 2, "lon": 2, "level": 1},
                                        variables_as="tokens"), GRID),
    "signal": (lambda: SignalAdapter(["x"], np.timedelta64(3, "h"), hop="1h", calendar=True,
                                     dtype="float64"), SIGNAL),
}


def through_json(d):
    return json.loads(json.dumps(d))


@pytest.mark.parametrize("name", ADAPTERS)
@pytest.mark.parametrize("fitted", [True, False])
def test_adapters_round_trip_through_json_dicts(name, fitted):
    make, ds = ADAPTERS[name]
    adapter = make().fit(ds) if fitted else make()
    d = through_json(adapter.to_dict())
    for loaded in (type(adapter).from_dict(d), Persistable.from_dict(d)):
        assert type(loaded) is type(adapter) and loaded.config() == adapter.config()
        assert loaded.fitted == fitted and (loaded.normalizer is None) == (not fitted)
        if fitted:
            np.testing.assert_array_equal(loaded.encode(ds).tokens, adapter.encode(ds).tokens)
            assert loaded.model_config() == adapter.model_config()
        else:
            with pytest.raises(NotFittedError, match="fit"):
                loaded.encode(ds)
    other = SignalAdapter if isinstance(adapter, GridAdapter) else GridAdapter
    with pytest.raises(ValueError, match=f"describes a '{type(adapter).__name__}', not a "
                                         f"{other.__name__}"):
        other.from_dict(d)


@pytest.mark.parametrize("name, options, batching", [
    ("grid", dict(leads=["6h", 2], history=1, targets=["u"], increments=True,
                  lead_scales="rms"), dict(shuffle=True, seed=np.int64(4), batch_size=3)),
    ("grid tokens", dict(leads=[np.timedelta64(6, "h")]), dict(drop_last=True, batch_size=2)),
    ("signal", dict(leads=[3, "4h"], history=5, increments=True), dict(batch_size=None)),
])
def test_forecast_windows_round_trip_through_json_dicts(name, options, batching):
    make, ds = ADAPTERS[name]
    windows = ForecastWindows(make(), **options).fit(ds, where={"time": slice(0, 20)})
    d = through_json(windows.to_dict())
    loaded = ForecastWindows.from_dict(d)
    assert loaded.config() == windows.config() and loaded.adapter.config() == \
        windows.adapter.config()
    np.testing.assert_array_equal(loaded.steps, windows.steps)
    for ours, theirs in zip(windows.batches(ds, **batching).epoch(1),
                            loaded.batches(ds, **batching).epoch(1), strict=True):
        np.testing.assert_array_equal(ours.tokens, theirs.tokens)
        np.testing.assert_array_equal(ours.targets, theirs.targets)
    with pytest.raises(ValueError, match="describes a 'GridAdapter', not a ForecastWindows"):
        ForecastWindows.from_dict(d | {"adapter": "GridAdapter"})
