"""Forecasting a tracer carried by the wind: the whole seqattn pipeline on physical data.

A passive tracer (think smoke, in ppb) is emitted by a few fixed sources whose strength varies
from day to day, carried around the globe by a known wind (mid-latitude westerly jets, weak
equatorial westerlies and a stationary wave that moves air north and south), diffused, and
removed with an e-folding time of a few days. The data are integrated in NumPy on a regular
lat/lon grid and held as an xarray Dataset; then:

    simulate -> split in time (train | validation | test) -> GridAdapter (patches, statistics
    of the training period only) + ForecastWindows (history, leads, increments scaled per lead:
    predicting zero is persistence) -> the baselines of seqattn.baselines on the same inputs
    (persistence, climatology, ridge on each patch's history per lead: "lead token ridge"),
    fitted on the training period with their choices made on the validation period ->
    TokenModel encoding each patch's latitude/longitude and the lead, each patch attending to
    itself and its west and east neighbours (local attention), with a linear path of
    each patch's inputs, one map per lead, started at that fitted ridge
    (seqattn.baselines.warm_start: the model starts as the ridge, and attention, its output
    projection zeroed, learns the residual; the path stays fixed) -> fit on the windows'
    batches (latitude-weighted MSE, AdamW, warmup-cosine, a moving average of the weights,
    early stopping on validation that scores the start too, so the model never ends worse
    there than the ridge) ->
    seqattn.predict over the test period: a Dataset on the original coordinates, in ppb ->
    seqattn.evaluate: latitude-weighted RMSE per lead of the model and of those same fitted
    baselines.

Run ``python examples/advection_forecast.py [--quick] [--epochs N] [--plot out.png] [--save DIR]``.
"""
import argparse
import dataclasses
import time
from pathlib import Path

import numpy as np
import xarray as xr
from scipy.ndimage import map_coordinates

import seqattn
from seqattn.adapters import ForecastWindows, GridAdapter
from seqattn.baselines import LeadRidge, for_batch, warm_start
from seqattn.models import build
from seqattn.models.linear_path import residual_parameters
from seqattn.train import (EMA, AdamW, EarlyStopping, LatitudeWeightedMSELoss, WarmupCosine,
                           fit)

EARTH_RADIUS = 6.371e6  # m
SECONDS_PER_HOUR = 3600.0


@dataclasses.dataclass
class ExampleConfig:
    """Everything the run depends on; ``seed`` fixes the data and the training alike."""

    nlat: int = 32                # cell centres from -90 + d/2 to 90 - d/2
    nlon: int = 64
    days: int = 160               # kept after the spin-up
    spinup_days: int = 20         # discarded: the tracer starts from nothing
    output_hours: int = 6         # the Dataset's time step
    substeps: int = 3             # integration steps per output step
    train_fraction: float = 0.7   # the first 70% of the times train,
    validation_fraction: float = 0.1  # the next 10% choose the baselines' penalties, the rest test
    patch: int = 4                # patch x patch cells per token
    history: int = 2              # inputs at t - history .. t
    leads: tuple = (1, 2)         # in output steps
    # increments divided by each lead's RMS: chosen on the quick run's validation period
    lead_scales: str = "rms"
    # the linear path per lead, started at the fitted lead token ridge: the model starts as
    # that baseline and early stopping on validation keeps it unless an epoch beats it
    linear: bool = True
    fourier_frequencies: int = 16
    # (left, right): each patch attends to the patches up to `left` before and `right` after
    # it in their row-major (lat, lon) order: (1, 1) is itself and its west and east
    # neighbours, upwind and downwind in the zonal flow (across longitude 0, the neighbour one
    # row of patches south or north); chosen on the quick run's validation period
    window: tuple = (1, 1)
    d_model: int = 64
    nhead: int = 4
    num_layers: int = 2
    dim_feedforward: int = 128
    epochs: int = 40
    patience: int = 8             # epochs without a better validation loss before stopping
    batch_size: int = 16
    lr: float = 3e-3
    warmup_fraction: float = 0.1
    # validation, early stopping and the returned model use the weights' moving average
    # (seqattn.train.EMA): which epoch a single step's weights win on validation is noise that
    # floating-point rounding changes from one CPU to another; chosen on the quick run's
    # validation period
    average_decay: float = 0.99
    seed: int = 0


# a shorter run with a longer validation period than the full run's share, chosen on validation
QUICK = dict(days=80, train_fraction=0.65, validation_fraction=0.15, epochs=30)


# ---- the physics -------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Physics:
    """The simulated world's settings; the defaults are the world the recipe was fixed on
    (other settings make other data of the same kind: benchmarks/transfer_advection.py)."""

    jet_speed: float = 35.0          # m/s, westerly jets at +-jet_latitude
    jet_latitude: float = 45.0       # degrees
    trade_speed: float = 0.0         # m/s, easterly band about the equator (none by default)
    trade_width: float = 15.0        # degrees, its e-folding half-width
    kappa: float = 4e5               # m2/s, diffusivity
    removal_days: float = 4.0        # e-folding time of the removal
    n_sources: int = 6
    source_latitudes: tuple = (-60.0, 60.0)  # the sources' centres are uniform in this band
    source_rate: float = 100.0       # ppb per day at a source's centre, on average
    source_memory_days: float = 4.0  # the red noise's memory of the sources' strengths


def angular_velocity(lat, lon, physics=Physics()):
    """(dlat/dt, dlon/dt) in rad/s of the wind at (lat, lon) in radians.

    The flow is non-divergent: westerly jets (by default 35 m/s at 45N and 45S), 8 m/s
    solid-body westerlies, an optional easterly band about the equator, and a zonal
    wavenumber-3 stationary wave with stream function psi = -A a cos^2(lat) sin(3 lon), whose
    v = 3 A cos(lat) cos(3 lon) reaches 6 m/s.
    Written as angular rates the terms stay finite at the poles, where u and v vanish.
    """
    degrees = np.rad2deg(lat)
    jet = physics.jet_latitude
    jets = physics.jet_speed * (np.exp(-((degrees - jet) / 12) ** 2)
                                + np.exp(-((degrees + jet) / 12) ** 2))
    trades = -physics.trade_speed * np.exp(-(degrees / physics.trade_width) ** 2)
    wave = 6.0 / 3
    u = 8.0 * np.cos(lat) + jets + trades + 2 * wave * np.cos(lat) * np.sin(lat) * np.sin(
        3 * lon)
    v = 3 * wave * np.cos(lat) * np.cos(3 * lon)
    return v / EARTH_RADIUS, u / (EARTH_RADIUS * np.cos(lat))


def across_poles(field, width):
    """`field` (lat, lon) with `width` rows past each pole and columns past the seam, so that
    interpolation near the edges reads the right neighbours: the row past a pole is the row on
    the other side of it, half way round the globe."""
    nlon = field.shape[1]
    opposite = np.roll(field, nlon // 2, axis=1)
    rows = np.concatenate([opposite[:width][::-1], field, opposite[-width:][::-1]])
    return np.concatenate([rows[:, -width:], rows, rows[:, :width]], axis=1)


class Integrator:
    """One step of the tracer equation

        dq/dt + wind . grad q = kappa lap q + sources(t) - q / tau

    split into semi-Lagrangian advection (departure points from two midpoint iterations,
    cubic interpolation; stable at any Courant number, so also near the poles where grid
    cells are narrow), diffusion (implicit in longitude via FFT, explicit in latitude, where
    kappa dt / dy^2 is far below the stability limit 1/2), then sources and removal."""

    PAD = 3  # rows/columns past the edges; cubic interpolation needs 2

    def __init__(self, lat, lon, dt, physics=Physics()):
        self.dt = dt
        self.physics = physics
        kappa = physics.kappa
        self.lat, self.lon = np.meshgrid(np.deg2rad(lat), np.deg2rad(lon), indexing="ij")
        self.dlat = np.deg2rad(lat[1] - lat[0])
        self.dlon = np.deg2rad(lon[1] - lon[0])
        self.departure = self._departure_indices()
        dy2 = (EARTH_RADIUS * self.dlat) ** 2
        self.lat_number = kappa * dt / dy2
        assert self.lat_number < 0.5, "explicit latitude diffusion would be unstable"
        wavenumber = np.fft.rfftfreq(len(lon), 1.0 / len(lon))
        x = EARTH_RADIUS * np.cos(self.lat[:, :1])
        self.lon_damping = 1.0 / (1.0 + kappa * dt * (wavenumber[None, :] / x) ** 2)
        self.removal = np.exp(-dt / (physics.removal_days * 86400.0))
        # metric factors of (1/cos) d/dlat (cos d/dlat) at the cell faces
        faces = self.lat[:, 0] + self.dlat / 2
        self.north_face = (np.cos(faces) / np.cos(self.lat[:, 0]))[:, None]
        self.south_face = (np.cos(faces - self.dlat) / np.cos(self.lat[:, 0]))[:, None]

    def _departure_indices(self):
        """Where the air arriving at each cell centre was dt ago, as (row, column) indices
        into the padded field. The wind is steady, so this is computed once."""
        lat, lon = self.lat, self.lon
        dlat_dt, dlon_dt = angular_velocity(lat, lon, self.physics)
        for _ in range(2):  # midpoint rule: rates at the middle of the trajectory
            dlat_dt, dlon_dt = angular_velocity(lat - 0.5 * self.dt * dlat_dt,
                                                lon - 0.5 * self.dt * dlon_dt, self.physics)
        row = (lat - self.dt * dlat_dt - lat[0, 0]) / self.dlat
        column = np.mod((lon - self.dt * dlon_dt - lon[0, 0]) / self.dlon, lat.shape[1])
        return np.stack([row + self.PAD, column + self.PAD])

    def step(self, q, sources):
        q = map_coordinates(across_poles(q, self.PAD), self.departure, order=3, mode="nearest")
        q = np.maximum(q, 0.0)  # cubic interpolation undershoots beside steep plumes
        q = np.fft.irfft(np.fft.rfft(q, axis=1) * self.lon_damping, n=q.shape[1], axis=1)
        padded = across_poles(q, 1)[:, 1:-1]
        q = q + self.lat_number * (self.north_face * (padded[2:] - q)
                                   - self.south_face * (q - padded[:-2]))
        return q * self.removal + self.dt * sources


def simulate(config, physics=Physics()):
    """The tracer Dataset (time, lat, lon), plus the wind as static fields; deterministic
    given ``config.seed``, in the world `physics` describes."""
    rng = np.random.default_rng(config.seed)
    step = 180.0 / config.nlat
    lat = -90 + step * (np.arange(config.nlat) + 0.5)
    lon = np.arange(config.nlon) * (360.0 / config.nlon)
    dt = config.output_hours * SECONDS_PER_HOUR / config.substeps
    integrator = Integrator(lat, lon, dt, physics)

    # Gaussian sources (about 800 km wide; by default six) with log-normal strengths that are
    # red noise in time (by default a four-day memory): most of tomorrow's emission is
    # predictable from today's.
    n_sources = physics.n_sources
    centre_lat = np.deg2rad(rng.uniform(*physics.source_latitudes, n_sources))
    centre_lon = rng.uniform(0, 2 * np.pi, n_sources)
    distance = np.arccos(np.clip(
        np.sin(integrator.lat[..., None]) * np.sin(centre_lat)
        + np.cos(integrator.lat[..., None]) * np.cos(centre_lat)
        * np.cos(integrator.lon[..., None] - centre_lon), -1, 1)) * EARTH_RADIUS
    shapes = np.exp(-(distance / 8e5) ** 2)  # (lat, lon, source)
    rate = physics.source_rate / 86400.0  # ppb per second at a source's centre, on average
    memory = np.exp(-dt / (physics.source_memory_days * 86400.0))
    log_strength = rng.normal(size=n_sources)

    n_out = (config.spinup_days + config.days) * 24 // config.output_hours
    q = np.zeros((config.nlat, config.nlon))
    out = np.empty((n_out, config.nlat, config.nlon))
    for t in range(n_out):
        for _ in range(config.substeps):
            log_strength = memory * log_strength + np.sqrt(1 - memory ** 2) * rng.normal(
                size=n_sources)
            q = integrator.step(q, rate * shapes @ np.exp(log_strength - 0.5))
        out[t] = q
    keep = config.spinup_days * 24 // config.output_hours
    times = (np.datetime64("2001-01-01T00") + np.arange(n_out - keep)
             * np.timedelta64(config.output_hours, "h"))
    u_lat, u_lon = angular_velocity(integrator.lat, integrator.lon, physics)
    return xr.Dataset(
        {"tracer": (("time", "lat", "lon"), out[keep:].astype(np.float32),
                    {"long_name": "passive tracer mixing ratio", "units": "ppb"}),
         "u": (("lat", "lon"), u_lon * EARTH_RADIUS * np.cos(integrator.lat),
               {"long_name": "eastward wind", "units": "m s-1"}),
         "v": (("lat", "lon"), u_lat * EARTH_RADIUS,
               {"long_name": "northward wind", "units": "m s-1"})},
        coords={"time": ("time", times),
                "lat": ("lat", lat, {"units": "degrees_north", "standard_name": "latitude"}),
                "lon": ("lon", lon, {"units": "degrees_east", "standard_name": "longitude"})},
        attrs={"title": "tracer advected by jets and a stationary wave, with diffusion, "
                        "pulsing sources and removal",
               "source": "examples/advection_forecast.py", "seed": config.seed})


# ---- from the Dataset to the model and back ----------------------------------------------------

def split_in_time(ds, train_fraction, validation_fraction):
    """(train, validation, test): selections of the first `train_fraction` of the times, the
    next `validation_fraction`, and the rest."""
    position = xr.DataArray(np.arange(ds.sizes["time"]) / ds.sizes["time"], dims="time")
    end = train_fraction + validation_fraction
    return position < train_fraction, (position >= train_fraction) & (position < end), \
        position >= end


def lead_seconds(windows):
    """The fitted windows' leads as ``coords["lead"]`` holds them: seconds."""
    return tuple(float(lead / np.timedelta64(1, "s")) for lead in windows.lead_values)


def build_model(config, windows, ridge=None):
    """Tokens are patches located by their centre's latitude and longitude (Fourier features
    of the point on the unit sphere: no seam at the date line, no crowding at the poles; the
    wind depends on both), so no sequence positions; ``lead`` lets one model serve every lead.
    Attention is local in the patches' row-major order (``config.window``): the tracer a patch
    will hold is mostly upwind of it now, which its own inputs, all the ridge sees, miss.
    With ``config.linear`` a linear path with one map per lead has the function class of the
    fitted `ridge` (a LeadRidge): each patch's own inputs where it regressed per token (the
    grid is too large to flatten), all the sample's where it flattened them. Its sizes come
    from the fitted windows."""
    flattened = config.linear and ridge.flatten
    return build(windows.model_config(
        d_model=config.d_model, nhead=config.nhead, num_layers=config.num_layers,
        dim_feedforward=config.dim_feedforward, positions="none",
        coordinates=["latlon", "lead"], num_frequencies=config.fourier_frequencies,
        linear=config.linear, linear_leads=lead_seconds(windows) if config.linear else None,
        linear_tokens=ridge.n_tokens if flattened else None, window=config.window,
        seed=config.seed))


def fit_baselines(windows, ds, train_part, valid_part, batch_size):
    """The baselines of seqattn.baselines for these batches and windows (persistence, seasonal
    persistence where the history reaches a day back, climatology, ridge per lead), fitted on
    `train_part` with their choices made on `valid_part`."""
    training = windows.batches(ds, where=train_part, batch_size=batch_size)
    validation = windows.batches(ds, where=valid_part, batch_size=batch_size)
    return [baseline.fit(training, validation)
            for baseline in for_batch(next(iter(training)), windows)]


def train(config, ds, train_part, valid_part, progress=True):
    """The forecast set-up (adapter statistics from the `train_part` times only), the fitted
    baselines, the model, history. With ``config.linear`` the model's linear path starts at
    the fitted ridge per lead and stays there: training moves the attention residual only,
    and early stopping on `valid_part` keeps the start when no epoch beats it.

    The targets are increments, the change from the last input step (normalized), so a model
    that predicts zero change is persistence."""
    adapter = GridAdapter(["tracer"], {"lat": config.patch, "lon": config.patch},
                          periodic=["lon"])
    windows = ForecastWindows(adapter, leads=list(config.leads), history=config.history,
                              increments=True, lead_scales=config.lead_scales).fit(
                                  ds, where=train_part)
    batches = windows.batches(ds, where=train_part, batch_size=config.batch_size, shuffle=True,
                              seed=config.seed)
    validation = windows.batches(ds, where=valid_part, batch_size=config.batch_size)
    baselines = fit_baselines(windows, ds, train_part, valid_part, config.batch_size)
    ridge = next(b for b in baselines if isinstance(b, LeadRidge))
    model = build_model(config, windows, ridge)
    trained = model.named_parameters()
    if config.linear:
        warm_start(model, ridge)
        # weight decay would shrink the fitted maps: they stay as fitted
        trained = residual_parameters(model)
    steps = config.epochs * len(batches)
    schedule = WarmupCosine(config.lr, max(1, int(config.warmup_fraction * steps)), steps,
                            min_lr=config.lr / 20)
    stopping = EarlyStopping(patience=config.patience, include_start=True)
    history = fit(model, LatitudeWeightedMSELoss(), AdamW(trained, lr=config.lr), batches,
                  validation=validation, epochs=config.epochs, seed=config.seed,
                  schedule=schedule, clip_grad_norm=1.0, progress=False,
                  early_stopping=stopping, average=EMA(config.average_decay),
                  callbacks=[print_epoch] if progress else ())
    if progress:
        kept = "the start" if stopping.best_epoch == -1 else f"epoch {stopping.best_epoch + 1}"
        print(f"kept {kept} (validation loss {stopping.best:.4f})")
    return windows, baselines, model, history


def print_epoch(state):
    """One line per epoch (fit's own progress bars flood a log that is not a terminal)."""
    print(f"epoch {state.epoch:>3}: training loss {state.history['loss'][-1]:.4f}, validation "
          f"{state.history['val_loss'][-1]:.4f} (normalized increments), lr "
          f"{state.history['lr'][-1]:.2e}", flush=True)


# ---- skill -------------------------------------------------------------------------------------

def span(ds, where):
    times = ds.time.values[where.values]
    return f"{len(times)} times, {str(times[0])[:13]} .. {str(times[-1])[:13]}"


def plot(path, predicted, truth, lead_index=-1):
    """Truth, model and persistence at the longest lead for the last test time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lead = predicted["lead"].values[lead_index]
    model = predicted["tracer"].sel(lead=lead).dropna("time", how="all").isel(time=-1)
    when = model["time"].values
    panels = {"truth": truth.sel(time=when), "model": model,
              "persistence": truth.sel(time=when - lead)}
    vmax = float(truth.sel(time=when).max())
    fig, axes = plt.subplots(1, 3, figsize=(15, 3.6), constrained_layout=True)
    for ax, (name, field) in zip(axes, panels.items()):
        image = ax.pcolormesh(field["lon"], field["lat"], field, vmin=0, vmax=vmax,
                              shading="nearest")
        ax.set_title(f"{name}, valid {str(when)[:13]}, lead {lead / np.timedelta64(1, 'h'):g}h")
        ax.set_xlabel("longitude [deg E]")
    axes[0].set_ylabel("latitude [deg N]")
    fig.colorbar(image, ax=axes, label="tracer [ppb]")
    fig.savefig(path, dpi=100)
    plt.close(fig)


def save(folder, model, windows):
    """The model and the windows' set-up (its adapter with the normalization statistics, leads,
    history) in seqattn's storage, enough to forecast new data: ``seqattn.predict(
    seqattn.load(DIR/model), new_data, seqattn.load(DIR/windows))``."""
    seqattn.save(model, Path(folder) / "model")
    seqattn.save(windows, Path(folder) / "windows")


def main(argv=None, config=None, progress=True):
    """Run the pipeline; returns a dict with ``scores`` (seqattn.evaluate's Dataset: the model
    and the baselines per lead), ``forecast`` (the decoded Dataset, NaN outside the test
    period), ``truth`` (the simulated Dataset), ``history``, ``windows`` (the fitted set-up),
    ``baselines`` (the fitted baselines that were scored) and ``seconds``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a shorter run (under 2 minutes)")
    parser.add_argument("--epochs", type=int, help="training epochs")
    parser.add_argument("--plot", metavar="PATH", help="save a figure (needs matplotlib)")
    parser.add_argument("--save", metavar="DIR", help="save the model and the forecast set-up "
                        "(DIR/model, DIR/windows; reload with seqattn.load)")
    args = parser.parse_args(argv)
    config = config or ExampleConfig(**(QUICK if args.quick else {}))
    if args.epochs is not None:
        config = dataclasses.replace(config, epochs=args.epochs)
    start = time.perf_counter()

    ds = simulate(config)
    train_part, valid_part, test_part = split_in_time(ds, config.train_fraction,
                                                      config.validation_fraction)
    windows, baselines, model, history = train(config, ds, train_part, valid_part, progress)
    # every initial time of the test period with a full history there, in physical units on
    # (lead, valid time, lat, lon)
    predicted = seqattn.predict(model, ds, windows, where=test_part,
                                batch_size=config.batch_size)
    scores = seqattn.evaluate(model, ds, windows, where=test_part, baselines=baselines,
                              weights=np.cos(np.deg2rad(ds.lat)), batch_size=config.batch_size)
    print(f"trained on {span(ds, train_part)} (normalization and baselines from those times "
          f"only); baselines' choices on {span(ds, valid_part)}; scored on {span(ds, test_part)}")
    print("latitude-weighted scores of tracer [ppb] per lead (rmse_skill: against the "
          "strongest baseline):")
    print(seqattn.evaluation.table(scores).to_string(float_format="%.3f"))
    if args.plot:
        plot(args.plot, predicted, ds["tracer"])
        print(f"figure saved to {args.plot}")
    if args.save:
        save(args.save, model, windows)
        print(f"model and forecast set-up saved to {args.save}")
    seconds = time.perf_counter() - start
    print(f"total {seconds:.0f} s")
    return {"scores": scores, "forecast": predicted, "truth": ds, "history": history,
            "windows": windows, "baselines": baselines, "seconds": seconds}


if __name__ == "__main__":
    main()
