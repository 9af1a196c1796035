"""Shared data makers and checks for the adapter tests (tests/*/test_adapters_*.py)."""
import numpy as np
import xarray as xr
from hypothesis import strategies as st


def make_grid(seed=0, time=3, level=0, lat=6, lon=8, nan_fraction=0.0, dtype="float64",
              static=True):
    """A small (time, [level,] lat, lon) Dataset with attrs, descending latitudes, longitudes on
    [0, 360) and optionally a static land-sea mask and NaNs."""
    rng = np.random.default_rng(seed)
    dims = ("time", "level", "lat", "lon") if level else ("time", "lat", "lon")
    shape = tuple(n for n in (time, level, lat, lon) if n)
    coords = {"time": np.datetime64("2020-01-01T00") + np.arange(time) * np.timedelta64(6, "h"),
              "lat": np.linspace(80, -80, lat), "lon": np.arange(lon) * (360.0 / lon)}
    if level:
        coords["level"] = np.linspace(1000, 100, level)
    data = {}
    for i, name in enumerate(["t", "u"]):
        values = (rng.normal(size=shape) * (i + 1) + 10 * i).astype(dtype)
        values[rng.random(shape) < nan_fraction] = np.nan
        data[name] = (dims, values, {"units": f"unit_{name}"})
    if static:
        data["lsm"] = (("lat", "lon"), (rng.random((lat, lon)) > 0.5).astype(dtype))
    return xr.Dataset(data, coords=coords, attrs={"title": "test grid"})


def put_back_all(iterator, values_of=None):
    """Feed every batch of `iterator` (or `values_of(batch)`) to its put_back; the Dataset."""
    put_back = iterator.put_back()
    for batch in iterator:
        put_back.add(batch, None if values_of is None else values_of(batch))
    return put_back.result()


@st.composite
def grid_cases(draw):
    """A random grid, a patch that may not divide it, a window and an overlap."""
    lat, lon = draw(st.integers(2, 9)), draw(st.integers(2, 9))
    level = draw(st.sampled_from([0, 2]))
    ds = make_grid(seed=draw(st.integers(0, 2**16)), time=draw(st.integers(1, 3)), level=level,
                   lat=lat, lon=lon, nan_fraction=draw(st.sampled_from([0.0, 0.3, 1.0])),
                   dtype=draw(st.sampled_from(["float32", "float64"])))
    window = {"lat": draw(st.integers(1, lat)), "lon": draw(st.integers(1, lon))}
    patch = {d: draw(st.integers(1, window[d])) for d in window}
    overlap = {d: draw(st.integers(0, window[d] - 1)) for d in window}
    return ds, patch, window, overlap, level


def make_signal(seed=0, length=50, stations=2, channels=0, rate=100.0, nan_fraction=0.0,
                dtype="float64", start=None):
    """Station series 'x' (station, time) and, with channels, 'y' (time, channel). The time axis
    is in seconds at `rate` Hz, or hourly datetimes from `start`."""
    rng = np.random.default_rng(seed)
    time = (np.arange(length) / rate if start is None
            else np.datetime64(start) + np.arange(length) * np.timedelta64(1, "h"))
    x = rng.normal(size=(stations, length)).astype(dtype)
    x[rng.random(x.shape) < nan_fraction] = np.nan
    data = {"x": (("station", "time"), x, {"units": "m"})}
    if channels:
        data["y"] = (("time", "channel"), rng.normal(size=(length, channels)).astype(dtype))
    return xr.Dataset(data, coords={"time": time}, attrs={"source": "test"})


@st.composite
def signal_cases(draw):
    """A random signal and a frame (window, hop <= window) that may not divide it."""
    window = draw(st.integers(1, 8))
    ds = make_signal(seed=draw(st.integers(0, 2**16)), length=draw(st.integers(1, 40)),
                     stations=draw(st.integers(1, 3)), channels=draw(st.sampled_from([0, 2])),
                     nan_fraction=draw(st.sampled_from([0.0, 0.3])),
                     dtype=draw(st.sampled_from(["float32", "float64"])))
    return ds, window, draw(st.integers(1, window))


class ScaleModel:
    """A tiny NumPy model obeying seqattn's predict protocol: it returns `scale` times the first
    `features` value features of every token, and counts its calls."""

    def __init__(self, features, scale=2.0):
        self.features = features
        self.scale = scale
        self.calls = 0

    def predict(self, tokens, key_padding_mask, coords):
        self.calls += 1
        assert key_padding_mask.shape == tokens.shape[:2]
        assert all(c.shape == key_padding_mask.shape for c in coords.values())
        return self.scale * tokens[..., : self.features]


@st.composite
def forecast_cases(draw):
    """A random grid whose time axis (6-hourly) holds a history and one or two distinct leads,
    given as steps (ints) or as timedeltas; the leads' steps come along for the checks. Levels,
    when there are any, are channels or a second sample dim."""
    time = draw(st.integers(2, 6))
    history = draw(st.integers(0, time - 2))
    steps = draw(st.lists(st.integers(1, time - 1 - history), min_size=1, max_size=2, unique=True))
    as_timedelta = draw(st.booleans())
    leads = [np.timedelta64(6 * s, "h") if as_timedelta else s for s in steps]
    lat, lon = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    level = draw(st.sampled_from([0, 2]))
    ds = make_grid(seed=draw(st.integers(0, 2**16)), time=time, level=level, lat=lat, lon=lon,
                   nan_fraction=draw(st.sampled_from([0.0, 0.3, 1.0])),
                   dtype=draw(st.sampled_from(["float32", "float64"])))
    patch = {"lat": draw(st.integers(1, lat)), "lon": draw(st.integers(1, lon))}
    channel_dims = draw(st.sampled_from([(), ("level",)])) if level else ()
    return ds, patch, history, leads, steps, channel_dims


def assert_targets_at_valid_times(out, ds, history, steps):
    """`out` (lead, time, ...) holds `ds`'s values at every valid time a sample reaches for each
    lead (time >= history + lead), bit for bit, and NaN at the valid times none reaches."""
    for i, s in enumerate(steps):
        reached = out.isel(lead=i, time=slice(history + s, None)).drop_vars("lead")
        xr.testing.assert_identical(reached, ds[list(out.data_vars)].isel(
            time=slice(history + s, None)))
        before = out.isel(lead=i, time=slice(0, history + s))
        assert all(before[v].isnull().all() for v in out.data_vars)


class LeastSquares:
    """An honest small N -> N model: an affine map of chosen token features, fitted by least
    squares, one map per lead when the batches carry leads (a lead-conditioned model)."""

    def __init__(self, columns):
        self.columns = columns
        self.maps = {}  # lead in seconds (None without leads) -> (F_in + 1, F_out)

    @staticmethod
    def _lead_of(coords):
        return None if "lead" not in coords else coords["lead"][:, 0]

    def fit(self, batch, targets, valid):
        """Fit on `batch`'s tokens against `targets` (B, N, F_out), using tokens whose every
        target is `valid` and whose inputs are all present."""
        leads = self._lead_of(batch.coords)
        for lead in [None] if leads is None else np.unique(leads):
            rows = slice(None) if lead is None else leads == lead
            x = batch.tokens[rows][..., self.columns]
            keep = valid[rows].all(-1) & batch.valid[rows].all(-1)
            design = np.concatenate([x[keep], np.ones((keep.sum(), 1))], axis=1)
            self.maps[lead], *_ = np.linalg.lstsq(design, targets[rows][keep], rcond=None)
        return self

    def __call__(self, tokens, key_padding_mask, coords=None):
        leads = self._lead_of(coords)
        x = tokens[..., self.columns]
        design = np.concatenate([x, np.ones(x.shape[:-1] + (1,))], axis=-1)
        if leads is None:
            return design @ self.maps[None]
        return np.stack([design[b] @ self.maps[lead] for b, lead in enumerate(leads)])


def persistence(ds, names, time_dim, steps, leads):
    """The persistence forecast on (lead, *dims): each variable `steps[i]` steps before."""
    return xr.concat([ds[names].shift({time_dim: int(s)}) for s in steps],
                     dim=xr.DataArray(leads, dims="lead", name="lead")).transpose("lead", ...)


class ModeModel:
    """Has seqattn models' training/evaluation modes and call signature; notes the mode of each
    call. Returns the first `width` features of every token, or their mean over tokens
    (N -> 1) with `per_sample`; `fail` makes it raise after noting the mode."""

    def __init__(self, width, per_sample=False, fail=False):
        self.width, self.per_sample, self.fail = width, per_sample, fail
        self.training = True
        self.modes = []

    def eval(self):
        return self.train(False)

    def train(self, mode=True):
        self.training = bool(mode)
        return self

    def __call__(self, tokens, key_padding_mask=None, coords=None):
        self.modes.append(self.training)
        if self.fail:
            raise RuntimeError("planned failure")
        assert set(coords) >= {"position"}          # coords always arrive, by keyword
        out = tokens[..., : self.width]
        return out.mean(axis=1) if self.per_sample else out


def forecast_batches(ds, adapter, *, where=None, batch_size=32, shuffle=False, seed=0,
                     drop_last=False, **set_up):
    """The batches of ``ForecastWindows(adapter, **set_up)`` fitted on `ds`'s samples `where`
    selects, over all of `ds` (``.windows`` is the fitted set-up)."""
    from seqattn.adapters import ForecastWindows

    windows = ForecastWindows(adapter, **set_up).fit(ds, where=where)
    return windows.batches(ds, batch_size=batch_size, shuffle=shuffle, seed=seed,
                           drop_last=drop_last)
