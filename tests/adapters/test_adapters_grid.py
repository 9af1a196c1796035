"""GridAdapter: token layout, NaN masks, normalization, persistence, round trips, errors."""
import numpy as np
import pytest
import xarray as xr
from hypothesis import given, settings

from adapters_helpers import grid_cases, make_grid, put_back_all
from seqattn.adapters import BatchIterator, GridAdapter, Normalizer


def test_layout_of_tokens_and_features():
    ds = make_grid(time=2, lat=4, lon=6)
    batch = GridAdapter(["t", "u", "lsm"], {"lat": 2, "lon": 3}, normalize=False).fit(ds).encode(ds)
    # 2 samples; (4/2) x (6/3) = 4 tokens; 3 variables x 6 cells + 3 validity channels.
    assert batch.tokens.shape == (2, 4, 21)
    assert batch.tokens.dtype == np.float32
    assert batch.valid.shape == (2, 4, 18)
    # token 1 is lat rows 0-1, lon columns 3-5 of variable t, row-major inside the patch
    np.testing.assert_array_equal(batch.tokens[1, 1, :6],
                                  ds.t.values[1, 0:2, 3:6].astype(np.float32).ravel())
    np.testing.assert_allclose(batch.coords["lat"][0], [160 / 3, 160 / 3, -160 / 3, -160 / 3])
    assert set(batch.coords) == {"lat", "lon", "time", "position", "year_fraction"}
    np.testing.assert_array_equal(batch.coords["position"], [[0, 1, 2, 3]] * 2)


def test_nan_cells_are_masked_never_silent_zeros():
    ds = make_grid(time=1, lat=4, lon=4, static=False)
    ds["t"][0, :2, :2] = np.nan           # token 0 of t entirely missing
    ds["u"][0, :2, :2] = np.nan
    ds["t"][0, 2, 2] = np.nan             # token 3 partly missing
    batch = GridAdapter(["t", "u"], {"lat": 2, "lon": 2}, normalize=False).fit(ds).encode(ds)
    assert batch.key_padding_mask[0].tolist() == [True, False, False, False]
    assert not batch.valid[0, 3, 0] and batch.valid[0, 3, 1:4].all()
    assert batch.tokens[0, 3, 0] == 0                       # a filler, flagged below
    np.testing.assert_allclose(batch.tokens[0, 3, -2:], [0.75, 1.0])  # validity fractions


def test_grid_not_divisible_by_patch_is_padded_and_masked_or_refused():
    ds = make_grid(time=1, lat=5, lon=8, static=False)
    batch = GridAdapter(["t"], {"lat": 2, "lon": 4}).fit(ds).encode(ds)
    assert batch.tokens.shape[1] == 6                       # 3 x 2 tokens, last row half pad
    assert not batch.valid[0, 4:, 4:].any() and batch.valid[0, 4:, :4].all()
    with pytest.raises(ValueError, match="'lat' has 5 cells, not divisible by patch"):
        GridAdapter(["t"], {"lat": 2, "lon": 4}, strict=True).fit(ds)


def test_longitude_wraps_for_periodic_padding_and_patch_centres():
    ds = make_grid(time=1, lat=2, lon=6, static=False, dtype="float32")  # lon 0, 60, ..., 300
    adapter = GridAdapter(["t"], {"lat": 2, "lon": 4}, periodic=("lon",), normalize=False).fit(ds)
    batch = adapter.encode(ds)
    # the second patch holds lon 240, 300 and wraps to 0, 60: centred on the seam (330 deg)
    np.testing.assert_allclose(batch.coords["lon"][0], [90.0, 330.0])
    np.testing.assert_array_equal(batch.tokens[0, 1, [2, 3]], ds.t.values[0, 0, [0, 1]])
    assert batch.valid.all()
    xr.testing.assert_identical(adapter.decode(batch), ds[["t"]])


@settings(max_examples=40, deadline=None)
@given(grid_cases())
def test_encode_decode_is_exact(case):
    ds, patch, window, overlap, level = case
    channel_dims = ("level",) if level else ()
    adapter = GridAdapter(["t", "u", "lsm"], patch, channel_dims=channel_dims, dtype=ds.t.dtype,
                          normalize=False).fit(ds)
    xr.testing.assert_identical(adapter.decode(adapter.encode(ds)), ds)
    windows = BatchIterator(ds, adapter, input_dims=window, input_overlap=overlap, batch_size=3)
    xr.testing.assert_identical(put_back_all(windows), ds)


@settings(max_examples=15, deadline=None)
@given(grid_cases())
def test_levels_and_variables_as_separate_tokens_round_trip(case):
    ds, patch, _, _, level = case
    patch = dict(patch, level=1) if level else patch
    adapter = GridAdapter(["t", "u"], patch, variables_as="tokens", dtype=ds.t.dtype,
                          normalize=False).fit(ds)
    batch = adapter.encode(ds)
    assert batch.coords["variable"].shape == batch.key_padding_mask.shape
    xr.testing.assert_identical(adapter.decode(batch), ds[["t", "u"]])


def test_decode_predictions_masks_missing_inputs_and_checks_shape():
    ds = make_grid(time=2, lat=4, lon=4, nan_fraction=0.2)
    adapter = GridAdapter(["t", "u"], {"lat": 2, "lon": 2}, normalize=False).fit(ds)
    batch = adapter.encode(ds)
    doubled = adapter.decode(batch, 2 * batch.values)
    xr.testing.assert_allclose(doubled, 2 * ds[["t", "u"]].astype("float32"))
    only_u = adapter.decode(batch, batch.values[..., 4:], variables=["u"], mask_missing=False)
    assert list(only_u.data_vars) == ["u"] and np.isnan(only_u.u.values).sum() == 0
    with pytest.raises(ValueError, match=r"expected \(2, 4, 8\) = \(B, N, F\)"):
        adapter.decode(batch, batch.tokens)


def test_normalization_applied_inverted_and_computed_lazily():
    ds = make_grid(time=4, level=3, lat=4, lon=4, nan_fraction=0.1)
    adapter = GridAdapter(["t", "u"], {"lat": 2, "lon": 2}, channel_dims=("level",),
                          per_dims=("level",), dtype="float64").fit(ds)
    lazy = GridAdapter(["t", "u"], {"lat": 2, "lon": 2}, channel_dims=("level",),
                       per_dims=("level",)).fit(ds.chunk({"time": 1}))
    xr.testing.assert_allclose(adapter.normalizer.stats, lazy.normalizer.stats)
    assert adapter.normalizer.stats.t.dims == ("stat", "level")
    batch = adapter.encode(ds)
    t = batch.values[..., :12][batch.valid[..., :12]]
    assert abs(t.mean()) < 1e-12 and abs(t.std() - 1) < 1e-12
    xr.testing.assert_allclose(adapter.decode(batch), ds[["t", "u"]], rtol=1e-12)


def test_adapter_saved_and_loaded_without_pickle(tmp_path):
    import seqattn

    ds = make_grid(time=3, level=2, lat=4, lon=4)
    adapter = GridAdapter(["t", "u"], {"lat": 2, "lon": 2}, channel_dims=("level",),
                          per_dims=("level",), periodic=("lon",)).fit(ds)
    seqattn.save(adapter, tmp_path / "adapter")
    assert not any(p.suffix == ".pkl" for p in (tmp_path / "adapter").iterdir())
    loaded = seqattn.load(tmp_path / "adapter")
    assert loaded.config() == adapter.config()
    xr.testing.assert_allclose(loaded.normalizer.stats, adapter.normalizer.stats)
    np.testing.assert_array_equal(loaded.encode(ds).tokens, adapter.encode(ds).tokens)
    assert isinstance(Normalizer.from_dict(adapter.normalizer.to_dict()), Normalizer)


def test_user_data_is_not_modified():
    ds = make_grid(time=2, lat=4, lon=4, nan_fraction=0.3)
    before = ds.copy(deep=True)
    adapter = GridAdapter(["t", "u"], {"lat": 2, "lon": 2}).fit(ds)
    adapter.decode(adapter.encode(ds))
    xr.testing.assert_identical(ds, before)


@pytest.mark.parametrize("change, match", [
    (lambda ds: ds.rename(lat="y"), "patch dim 'lat' is not in the dataset"),
    (lambda ds: ds.isel(lat=slice(0, 1)), r"patch\['lat'\] = 2 is larger than the grid"),
    (lambda ds: ds.isel(lon=[0, 2, 1, 3]), "coordinate 'lon' is not monotonic"),
    (lambda ds: ds.drop_vars("u"), "variable 'u' is not in the dataset"),
])
def test_bad_input_errors_name_the_dim_or_variable(change, match):
    ds = make_grid(time=1, lat=4, lon=4)
    adapter = GridAdapter(["t", "u"], {"lat": 2, "lon": 2}).fit(ds)
    with pytest.raises(ValueError, match=match):
        adapter.encode(change(ds))


def test_fit_refuses_all_nan_variable_and_predict_time_variables_must_match():
    ds = make_grid(time=2, lat=4, lon=4)
    with pytest.raises(ValueError, match="variable 'u' is all NaN"):
        GridAdapter(["t", "u"], {"lat": 2, "lon": 2}).fit(ds.assign(u=ds.u * np.nan))
    fitted = GridAdapter(["t"], {"lat": 2, "lon": 2}).fit(ds)
    fitted.variables = ["t", "u"]
    with pytest.raises(ValueError, match=r"variables \['u'\] have no normalization statistics"):
        fitted.encode(ds)
    with pytest.raises(ValueError, match="variable 'lsm' lacks patch dim"):
        GridAdapter(["lsm"], {"lat": 2, "level": 1}).fit(make_grid(level=2))
    with pytest.raises(TypeError, match="patch must be a dict"):
        GridAdapter(["t"], 4)


def test_unfitted_adapters_refuse_and_old_calls_name_the_replacement():
    from seqattn.data.protocol import NotFittedError

    ds = make_grid(time=2, lat=4, lon=4)
    adapter = GridAdapter(["t"], {"lat": 2, "lon": 2})
    for call in (lambda: adapter.encode(ds), lambda: adapter.batches(ds),
                 lambda: adapter.model_config(), lambda: BatchIterator(ds, adapter)):
        with pytest.raises(NotFittedError, match=r"GridAdapter\.\w+ needs the statistics"):
            call()
    with pytest.raises(TypeError, match=r"normalizer=...\) is gone: the statistics come from "
                                        r"fit\(ds, where=train\)"):
        GridAdapter(["t"], {"lat": 2, "lon": 2}, normalizer=adapter.normalizer)


def test_fit_reads_the_training_samples_only_and_treats_inf_as_missing():
    ds = make_grid(time=4, lat=4, lon=4, static=False)
    ds["t"][3] += 100.0
    ds["t"][0, 0, 0] = np.inf
    train = GridAdapter(["t"], {"lat": 2, "lon": 2}).fit(ds, where=ds.time < ds.time[3])
    mean = float(train.normalizer.stats.t.sel(stat="mean"))
    finite = ds.t.isel(time=slice(0, 3)).where(np.isfinite(ds.t))
    assert mean == pytest.approx(float(finite.mean()), rel=1e-12)
    batch = train.encode(ds)
    assert not batch.valid[0, 0, 0] and batch.tokens[0, 0, 0] == 0     # masked, not spread
    assert np.isfinite(batch.tokens).all()
    out = train.decode(batch)
    assert np.isnan(out.t.values[0, 0, 0]) and np.isfinite(out.t.values[0, 0, 1])


def test_model_sizes_come_from_the_fitted_adapter():
    ds = make_grid(time=2, level=3, lat=4, lon=6)
    for options in (dict(), dict(calendar=True, validity_channel=False),
                    dict(variables_as="tokens", patch={"lat": 2, "lon": 3, "level": 1})):
        patch = options.pop("patch", {"lat": 2, "lon": 3})
        channels = () if "level" in patch else ("level",)
        adapter = GridAdapter(["t", "u"], patch, channel_dims=channels, **options).fit(ds)
        batch = adapter.encode(ds)
        config = adapter.model_config(d_model=8)
        assert config.in_features == batch.tokens.shape[-1]
        assert config.out_features == batch.values.shape[-1]


def test_input_variables_as_targets_are_predicted_per_token():
    import seqattn

    ds = make_grid(time=4, lat=4, lon=4, nan_fraction=0.2, static=False)
    adapter = GridAdapter(["t", "u"], {"lat": 2, "lon": 2}).fit(ds, targets="u")
    batch = adapter.encode(ds)
    np.testing.assert_array_equal(batch.targets, batch.values[..., 4:8])   # u's 4 cells
    np.testing.assert_array_equal(batch.target_valid, batch.valid[..., 4:8])
    config = adapter.model_config(d_model=8)
    assert (config.in_features, config.out_features) == (10, 4)
    copy_u = lambda tokens, key_padding_mask, coords: tokens[..., 4:8]
    out = seqattn.predict(copy_u, ds, adapter)
    assert list(out.data_vars) == ["u"]
    xr.testing.assert_allclose(out.u, ds.u, rtol=1e-5, atol=1e-5)
    xr.testing.assert_identical(adapter.decode(batch, batch.targets), out)
    with pytest.raises(ValueError, match=r"mix input variables .* with \['lsm'\]"):
        GridAdapter(["t", "u"], {"lat": 2, "lon": 2}).fit(make_grid(), targets=["u", "lsm"])
