"""BatchIterator: windows, batch dims, shuffling, laziness, putting outputs back, in-memory
regions normalized once."""
import dask.array as dsa
import numpy as np
import pytest
import xarray as xr

from adapters_helpers import forecast_batches, make_grid, put_back_all
from seqattn.adapters import BatchIterator, GridAdapter
from seqattn.data import batching

# fitted without statistics, so that windows carry the data's own values
ADAPTER = GridAdapter(["t", "u"], {"lat": 2, "lon": 2}, dtype="float64",
                      normalize=False).fit(make_grid(time=1, lat=2, lon=2))


def sample_keys(iterator):
    return [tuple(s) for batch in iterator for s in batch.placement.starts]


def test_windows_cover_every_sample_once_in_batches_of_the_asked_size():
    ds = make_grid(time=5, lat=6, lon=8)
    it = BatchIterator(ds, ADAPTER, input_dims={"lat": 4, "lon": 4}, batch_size=4)
    # lat windows start at 0 and 2 (the last aligned to the end), lon at 0 and 4; 5 times
    assert it.n_samples == 2 * 2 * 5 and len(it) == 5
    keys = sample_keys(it)
    assert len(keys) == len(set(keys)) == 20
    assert [len(b) for b in it] == [4] * 5
    assert [len(b) for b in BatchIterator(ds, ADAPTER, batch_size=3)] == [3, 2]
    assert [len(b) for b in BatchIterator(ds, ADAPTER, batch_size=3, drop_last=True)] == [3]


def test_shuffle_is_reproducible_from_the_seed_and_new_each_epoch():
    ds = make_grid(time=8, lat=4, lon=4)
    make = lambda seed: BatchIterator(ds, ADAPTER, batch_dims={"time": 4}, batch_size=2,
                                      shuffle=True, seed=seed)
    first, again = make(7), make(7)
    epoch1 = sample_keys(first)
    assert epoch1 == sample_keys(again)
    assert sample_keys(first) != epoch1                       # epoch 2 draws a new order
    assert sorted(epoch1) == sorted(sample_keys(BatchIterator(ds, ADAPTER, batch_size=2)))
    assert epoch1 != sorted(epoch1)


@pytest.mark.parametrize("make", [
    lambda ds, seed: BatchIterator(ds, ADAPTER, batch_dims={"time": 2}, batch_size=3,
                                   shuffle=True, seed=seed),
    lambda ds, seed: forecast_batches(ds, ADAPTER, leads=[1, 2], batch_size=3, shuffle=True,
                                      seed=seed),
], ids=["BatchIterator", "ForecastWindows"])
def test_epoch_e_replays_the_order_of_the_eth_iteration_from_seed_and_e_only(make):
    ds = make_grid(time=8, lat=4, lon=4)
    keys = lambda batches: [tuple(s) for b in batches for s in b.placement.starts]
    running = make(ds, 5)
    epochs = [keys(running) for _ in range(3)]                # three for-loops: epochs 0, 1, 2
    resumed = make(ds, 5)
    assert [keys(resumed.epoch(e)) for e in (2, 0, 1)] == [epochs[2], epochs[0], epochs[1]]
    assert epochs[0] != epochs[1] and sorted(epochs[0]) == sorted(epochs[1])
    assert keys(make(ds, 6).epoch(2)) != epochs[2]
    first = next(iter(resumed.epoch(1)))
    np.testing.assert_array_equal(first.tokens, next(iter(make(ds, 5).epoch(1))).tokens)
    with pytest.raises(ValueError, match="epoch = -1; expected a whole number >= 0"):
        list(resumed.epoch(-1))


def test_overlapping_windows_are_blended_when_put_back():
    ds = make_grid(time=2, lat=6, lon=6)
    it = BatchIterator(ds, ADAPTER, input_dims={"lat": 4, "lon": 4},
                       input_overlap={"lat": 2, "lon": 2}, batch_size=5, shuffle=True, seed=0)
    xr.testing.assert_identical(put_back_all(it), ds[["t", "u"]])
    # predict each window's lat start everywhere: rows seen by two windows get a tapered mix
    lat_start = lambda b: np.broadcast_to(
        b.placement.starts[:, 0, None, None].astype(float), b.values.shape)
    out = put_back_all(BatchIterator(ds, ADAPTER, input_dims={"lat": 4}, input_overlap={"lat": 2}),
                       lat_start)
    np.testing.assert_allclose(out.t.values[0, :, 0], [0, 0, 2 / 3, 4 / 3, 2, 2])


def test_same_windows_as_xbatcher():
    xbatcher = pytest.importorskip("xbatcher")
    ds = make_grid(time=2, lat=6, lon=8, static=False)
    ours = BatchIterator(ds, ADAPTER, input_dims={"lat": 2, "lon": 4},
                         input_overlap={"lon": 2}, batch_dims={"time": 1}, batch_size=1)
    theirs = xbatcher.BatchGenerator(ds, input_dims={"lat": 2, "lon": 4},
                                     input_overlap={"lon": 2}, batch_dims={"time": 1})
    ours_windows = sorted(
        (str(ds.time.values[s[2]]), ds.lat.values[s[0]], ds.lon.values[s[1]])
        for b in ours for s in b.placement.starts)
    theirs_windows = sorted((str(w.time.values[0]), w.lat.values[0], w.lon.values[0])
                            for w in theirs)
    assert ours_windows == theirs_windows


def test_dask_data_is_read_lazily_one_block_at_a_time():
    reads = []

    def block(x, block_info=None):
        reads.append(block_info[None]["chunk-location"])
        return x

    ds = make_grid(time=12, lat=4, lon=4, static=False).chunk({"time": 3})
    ds["t"] = ds.t.copy(data=dsa.map_blocks(block, ds.t.data, dtype=ds.t.dtype))
    it = BatchIterator(ds, ADAPTER, batch_size=3)
    next(iter(it))
    assert len(reads) == 1                                    # one chunk of 3 time steps
    assert len(it) == 4


@pytest.mark.parametrize("kwargs, match", [
    ({"input_dims": {"lat": 9}}, r"input_dims\['lat'\] = 9 is larger than the dataset"),
    ({"input_dims": {"lat": 2}, "input_overlap": {"lat": 2}}, r"input_overlap\['lat'\] = 2"),
    ({"input_overlap": {"lat": 1}}, "input_overlap names 'lat', which is not in input_dims"),
    ({"batch_dims": {"lat": 2}}, r"batch_dims\['lat'\]: 'lat' is not a sample dim"),
    ({"input_dims": {"time": 2}}, r"'time' is a sample dim of the adapter"),
    ({"input_dims": {"depth": 2}}, "input_dims dim 'depth' is not in the dataset"),
    ({"batch_size": 0}, "batch_size = 0"),
])
def test_bad_iterator_arguments_name_the_dim(kwargs, match):
    with pytest.raises(ValueError, match=match):
        BatchIterator(make_grid(time=2, lat=4, lon=4), ADAPTER, **kwargs)


def labelled_series():
    """12 series (sample, time) whose first value is their own index, each with a label."""
    x = np.arange(12, dtype=np.float64)[:, None] + np.zeros((12, 6))
    return xr.Dataset({"x": (("sample", "time"), x),
                       "label": ("sample", np.arange(12) % 3),
                       "score": (("sample", "output"), np.arange(24.0).reshape(12, 2))})


def test_a_label_per_sample_becomes_the_batch_targets_in_any_order():
    from seqattn.adapters import SignalAdapter
    from seqattn.train.batches import as_training_batch

    ds = labelled_series()
    adapter = SignalAdapter(["x"], 3, dtype="float64", normalize=False).fit(ds, targets="label")
    it = BatchIterator(ds, adapter, batch_dims={"sample": 12}, batch_size=5, shuffle=True,
                       seed=1, targets="label")
    seen = []
    for batch in it.epoch(2):
        sample = batch.tokens[:, 0, 0].astype(int)  # the series' own index
        np.testing.assert_array_equal(batch.targets, sample % 3)
        np.testing.assert_array_equal(as_training_batch(batch).targets, sample % 3)
        seen += sample.tolist()
    assert sorted(seen) == list(range(12)) and seen != sorted(seen)
    (batch,) = BatchIterator(ds, adapter, batch_size=None, targets=ds["score"])
    np.testing.assert_array_equal(batch.targets, ds["score"].values)  # (B, output)


@pytest.mark.parametrize("targets, match", [
    ("x", r"targets vary along \['time'\], which a sample spans"),
    ("weight", "targets='weight' is not a variable of the dataset"),
    (np.arange(12), "targets must be a variable name or a DataArray"),
    (xr.DataArray(np.arange(5), dims="sample"), "targets have 5 values along 'sample'"),
])
def test_bad_targets_say_what_a_per_sample_target_is(targets, match):
    from seqattn.adapters import SignalAdapter

    with pytest.raises((ValueError, TypeError), match=match):
        BatchIterator(labelled_series(), SignalAdapter(["x"], 3).fit(labelled_series()),
                      targets=targets)


def test_shuffled_in_memory_batches_mix_samples_from_many_batches():
    ds = make_grid(time=64, lat=2, lon=2)
    it = BatchIterator(ds, ADAPTER, batch_size=4, shuffle=True, seed=0)
    groups = [{int(t) for t in b.placement.starts[:, 0]} for b in it.epoch(0)]
    assert any(max(g) - min(g) >= 4 for g in groups)      # not 4 neighbours read together
    again = [{int(t) for t in b.placement.starts[:, 0]} for b in it.epoch(1)]
    assert groups != again and sorted(map(sorted, groups)) != sorted(map(sorted, again))


def counted_normalizations(monkeypatch, adapter):
    """A list that grows by one at each normalization of a region read by `adapter`."""
    calls, apply = [], adapter.normalizer.apply
    monkeypatch.setattr(adapter.normalizer, "apply", lambda ds: calls.append(1) or apply(ds))
    return calls


def test_in_memory_regions_are_normalized_once_and_the_batches_unchanged(monkeypatch):
    ds = make_grid(time=12, lat=4, lon=4)
    adapter = GridAdapter(["t", "u"], {"lat": 2, "lon": 2}, dtype="float64").fit(ds)
    calls = counted_normalizations(monkeypatch, adapter)
    it = BatchIterator(ds, adapter, batch_dims={"time": 4}, batch_size=2, shuffle=True, seed=3)
    list(it.epoch(0))
    assert len(calls) == 3                                      # one read per block of 4 times
    later = list(it.epoch(1))
    assert len(calls) == 3                                      # kept, not normalized again
    fresh = list(BatchIterator(ds, adapter, batch_dims={"time": 4}, batch_size=2, shuffle=True,
                               seed=3).epoch(1))
    for a, b in zip(later, fresh, strict=True):
        np.testing.assert_array_equal(a.tokens, b.tokens)
        np.testing.assert_array_equal(a.placement.starts, b.placement.starts)
    assert np.abs(later[0].tokens).max() < 10                   # normalized values


def test_the_region_cache_is_bounded_and_dask_data_is_read_every_epoch(monkeypatch):
    ds = make_grid(time=12, lat=4, lon=4)
    adapter = GridAdapter(["t", "u"], {"lat": 2, "lon": 2}, dtype="float64").fit(ds)
    calls = counted_normalizations(monkeypatch, adapter)
    one_region = adapter.normalizer.apply(ds.isel(time=slice(0, 4))[["t", "u"]]).nbytes
    monkeypatch.setattr(batching, "REGION_CACHE_BYTES", one_region)
    it = BatchIterator(ds, adapter, batch_dims={"time": 4}, batch_size=2)
    calls.clear()
    list(it.epoch(0))
    list(it.epoch(1))
    assert len(calls) == 3 + 2                                  # only the first region kept
    lazy = BatchIterator(ds.chunk({"time": 4}), adapter, batch_size=2)
    calls.clear()
    list(lazy.epoch(0))
    list(lazy.epoch(1))
    assert len(calls) == 2 * 3
