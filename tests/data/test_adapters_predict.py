"""predict: in memory, lazily on dask, on a 2-worker LocalCluster, to zarr."""
import numpy as np
import pytest
import xarray as xr

import adapters_helpers
from adapters_helpers import ModeModel, ScaleModel, make_grid, make_signal
from seqattn.adapters import ForecastWindows, GridAdapter, SignalAdapter, predict

GRID = dict(variables=["t", "u"], patch={"lat": 2, "lon": 2})


def doubled(ds, adapter):
    """What ScaleModel(scale=2) predicts, in physical units: 2 * (x - mean) / std * std + mean."""
    mean = adapter.normalizer.stats.sel(stat="mean", drop=True)
    return (2 * ds[adapter.variables] - mean).astype("float32")


def test_predictions_come_back_on_the_input_coordinates_with_missing_cells_masked():
    ds = make_grid(time=3, lat=6, lon=6, nan_fraction=0.1, dtype="float32")
    adapter = GridAdapter(**GRID).fit(ds)
    out = predict(ScaleModel(8), ds, adapter, input_dims={"lat": 4, "lon": 4},
                  input_overlap={"lat": 2, "lon": 2}, batch_size=5)
    xr.testing.assert_allclose(out, doubled(ds, adapter), rtol=1e-5, atol=1e-5)
    assert out.t.attrs == ds.t.attrs and list(out.t.dims) == list(ds.t.dims)
    np.testing.assert_array_equal(np.isnan(out.t.values), np.isnan(ds.t.values))


def test_plain_callables_work_and_bad_outputs_are_explained():
    ds = make_signal(length=30)
    adapter = SignalAdapter(["x"], 4, hop=2, normalize=False).fit(ds)
    out = predict(lambda tokens, mask, coords: tokens[..., :4], ds, adapter)
    xr.testing.assert_allclose(out, ds.astype("float32"))
    with pytest.raises(ValueError, match=r"the model returned shape \(2, 14\)"):
        predict(lambda tokens, mask, coords: tokens[..., 0], ds, adapter)
    with pytest.raises(TypeError, match="model must be callable"):
        predict(3, ds, adapter)


def test_dask_input_is_predicted_lazily_chunk_by_chunk():
    ds = make_grid(time=6, lat=4, lon=6, dtype="float32")
    adapter = GridAdapter(**GRID).fit(ds)
    model = ScaleModel(8)
    lazy = predict(model, ds.chunk({"time": 2, "lat": 2}), adapter)
    assert model.calls == 0 and lazy.t.chunks == ((2, 2, 2), (4,), (6,))
    xr.testing.assert_allclose(lazy.compute(), predict(model, ds, adapter))


def test_on_a_local_cluster_of_two_workers_written_to_zarr(tmp_path):
    distributed = pytest.importorskip("distributed")
    pytest.importorskip("zarr")
    cloudpickle = pytest.importorskip("cloudpickle")
    # the workers cannot import the tests folder: ship the helper model by value
    cloudpickle.register_pickle_by_value(adapters_helpers)
    ds = make_grid(time=4, lat=4, lon=4, dtype="float32")
    adapter = GridAdapter(**GRID).fit(ds)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        out = predict(ScaleModel(8), ds.chunk({"time": 1}), adapter,
                      store=str(tmp_path / "predictions.zarr"))
        assert len(client.scheduler_info()["workers"]) == 2
        xr.testing.assert_allclose(out.load(), doubled(ds, adapter), rtol=1e-5, atol=1e-5)
    cloudpickle.unregister_pickle_by_value(adapters_helpers)


def test_accessor_forwards_the_common_calls():
    ds = make_grid(time=2, lat=4, lon=4, dtype="float32")
    adapter = GridAdapter(**GRID, normalize=False).fit(ds)
    np.testing.assert_array_equal(ds.seqattn.encode(adapter).tokens, adapter.encode(ds).tokens)
    assert len(ds.seqattn.batches(adapter, batch_size=1)) == 2
    xr.testing.assert_allclose(ds.seqattn.predict(ScaleModel(8, scale=1.0), adapter),
                               ds[["t", "u"]])


def mean_and_max_of_t(tokens, key_padding_mask, coords):
    """An N -> 1 model: (B, N, F) -> (B, 2), the mean and max of variable t's 4 cells per token."""
    t = tokens[..., :4]
    return np.stack([t.mean(axis=(1, 2)), t.max(axis=(1, 2))], axis=1)


def with_targets(ds):
    """`ds` with per-sample targets: t's mean and max over each (time, level) field."""
    return ds.assign(t_mean=ds.t.mean(["lat", "lon"]), t_max=ds.t.max(["lat", "lon"]))


def test_per_sample_predictions_are_indexed_by_the_sample_dims_only():
    ds = with_targets(make_grid(time=5, level=2, lat=4, lon=4, dtype="float32"))
    adapter = GridAdapter(**GRID, normalize=False).fit(ds, targets=["t_mean", "t_max"])
    out = predict(mean_and_max_of_t, ds, adapter, batch_size=3)
    assert out.t_mean.dims == ("time", "level") and out.t_max.dims == ("time", "level")
    assert set(out.coords) == {"time", "level"} and out.attrs == ds.attrs
    np.testing.assert_allclose(out.t_mean.values, ds.t_mean.values, rtol=1e-6)
    np.testing.assert_array_equal(out.t_max.values, ds.t_max.values)
    lazy = predict(mean_and_max_of_t, ds.chunk({"time": 2}), adapter)
    np.testing.assert_array_equal(lazy.t_max.values, out.t_max.values)
    normalized = GridAdapter(**GRID).fit(ds, targets=["t_mean", "t_max"])
    batch = normalized.encode(ds)
    np.testing.assert_allclose(batch.targets.mean(axis=0), 0, atol=1e-6)   # as inputs are
    xr.testing.assert_allclose(normalized.decode(batch, batch.targets)[["t_mean", "t_max"]],
                               ds[["t_mean", "t_max"]].astype("float32"), rtol=1e-5)


def test_a_sample_without_any_valid_token_predicts_nan_not_the_output_bias():
    ds = with_targets(make_grid(time=4, lat=4, lon=4, dtype="float32", static=False))
    ds["t"][2] = np.nan
    ds["u"][2] = np.nan
    adapter = GridAdapter(**GRID).fit(ds, targets="t_max")
    bias = lambda tokens, key_padding_mask, coords: np.full((len(tokens), 1), 0.5)
    out = predict(bias, ds, adapter)
    assert np.isnan(out.t_max.values[2]) and np.isfinite(out.t_max.values[[0, 1, 3]]).all()


@pytest.mark.parametrize("model, options, match", [
    (mean_and_max_of_t, {"input_dims": {"lat": 2}}, "drop input_dims"),
    (lambda tokens, mask, coords: tokens, {}, r"targets per sample need \(B, 2\)"),
    (mean_and_max_of_t, {"variables": ["t_mean"]}, "drop input_dims and variables"),
])
def test_per_sample_errors_say_what_to_change(model, options, match):
    ds = with_targets(make_grid(time=2, lat=4, lon=4, dtype="float32"))
    adapter = GridAdapter(**GRID).fit(ds, targets=["t_mean", "t_max"])
    with pytest.raises(ValueError, match=match):
        predict(model, ds, adapter, **options)


PREDICTIONS = {
    "per token": lambda ds, a: dict(model=ModeModel(8), ds=ds, adapter=a),
    "per sample": lambda ds, a: dict(model=ModeModel(1, per_sample=True), ds=ds,
                                     adapter=a.fit(with_targets(ds), targets="t_max")),
    "lazily": lambda ds, a: dict(model=ModeModel(8), ds=ds.chunk({"time": 1}), adapter=a),
    "forecast": lambda ds, a: dict(model=ModeModel(8), ds=ds,
                                   adapter=ForecastWindows(a, leads=[1]).fit(ds)),
}


@pytest.mark.parametrize("case", PREDICTIONS)
@pytest.mark.parametrize("was_training", [True, False])
def test_models_with_modes_predict_in_evaluation_mode_and_get_their_mode_back(case, was_training):
    ds = make_grid(time=3, lat=4, lon=4, dtype="float32")
    call = PREDICTIONS[case](ds, GridAdapter(**GRID).fit(ds))
    model = call["model"].train(was_training)
    out = predict(**call)
    if case == "lazily":
        assert not model.modes
        out.compute()
    assert model.modes and not any(model.modes) and model.training is was_training
    failing = ModeModel(8, fail=True)
    with pytest.raises(RuntimeError, match="planned failure"):
        predict(failing, ds, GridAdapter(**GRID).fit(ds))
    assert failing.modes == [False] and failing.training


def test_a_model_without_a_coords_argument_is_called_without_them():
    ds = make_grid(time=2, lat=4, lon=4, dtype="float32")
    out = predict(lambda tokens, key_padding_mask: tokens[..., :8], ds,
                  GridAdapter(**GRID, normalize=False).fit(ds))
    xr.testing.assert_allclose(out, ds[["t", "u"]])
