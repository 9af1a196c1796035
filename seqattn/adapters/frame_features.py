"""Features computed from each frame of a signal inside the SignalAdapter: log-mel energies of
25 ms audio windows, or any function of a frame's steps.

The adapter calls a frame-feature object as ``f(frames, rate)``: ``frames`` (..., window) in
physical units (one frame of one channel per row; a frame with a missing step arrives with
zeros in its place, and the adapter marks its features missing), ``rate`` the time coordinate's steps per second (None when it has
no numeric or datetime coordinate); it returns (..., K) features. ``dim`` names the dim the K
features get when a batch is decoded, ``coordinate(K, rate)`` that dim's values (or None), and
``config()`` the JSON the adapter is saved with. A plain function ``f(frames)`` given as
``frame_features`` is wrapped in :class:`FrameFunction` (dim ``"feature"``; not saveable).

:class:`LogMel` is the one the seeds describe for audio: a Hann window, the power spectrum
(scaled as :func:`scipy.signal.stft` scales it, by the window's sum), triangular filters evenly
spaced on the mel scale, and the log.
"""
import numpy as np
from scipy.fft import rfft
from scipy.signal import get_window


def hz_to_mel(hz):
    """The mel scale (O'Shaughnessy's formula, as in HTK): 1000 mel at 1000 Hz."""
    return 2595.0 * np.log10(1.0 + np.asarray(hz, dtype=np.float64) / 700.0)


def mel_to_hz(mel):
    return 700.0 * (10.0 ** (np.asarray(mel, dtype=np.float64) / 2595.0) - 1.0)


class LogMel:
    """frames (..., window) -> (..., n_mels) ``log(mel filters @ |rfft(hann * frame)|^2 + floor)``.

    ``rate`` (samples per second) defaults to the one the adapter reads off the time coordinate;
    the filters span ``fmin`` .. ``fmax`` (default rate / 2) Hz. ``floor`` keeps silence finite.

    Parameters
    ----------
    n_mels : int, default 40
        Number of mel bands, the features per frame (a positive whole number).
    rate : float, optional
        Samples per second; default None, the rate the adapter reads off the time coordinate.
    fmin : float, default 0.0
        Lowest frequency of the filters, in Hz.
    fmax : float, optional
        Highest frequency of the filters, in Hz; default None, half the sample rate.
    floor : float, default 1e-6
        Added to the band energies before the log (> 0), so that silence stays finite.
    """

    dim = "mel"

    def __init__(self, n_mels=40, rate=None, fmin=0.0, fmax=None, floor=1e-6):
        if not isinstance(n_mels, (int, np.integer)) or n_mels < 1:
            raise ValueError(f"n_mels = {n_mels!r}; expected a positive whole number of bands")
        if floor <= 0:
            raise ValueError(f"floor = {floor!r}; expected > 0, so that log stays finite")
        self.n_mels, self.rate, self.fmin, self.fmax = int(n_mels), rate, fmin, fmax
        self.floor = float(floor)

    def config(self):
        return {"n_mels": self.n_mels, "rate": self.rate, "fmin": self.fmin, "fmax": self.fmax,
                "floor": self.floor}

    def _rate(self, rate):
        rate = self.rate if self.rate is not None else rate
        if rate is None:
            raise ValueError("LogMel needs the sample rate: give the time coordinate in seconds "
                             "(or datetimes), or LogMel(rate=...)")
        return float(rate)

    def filterbank(self, window, rate):
        """(n_mels, window // 2 + 1) triangular filters on the rfft bins of a `window`-step
        frame: filter m rises from edge m to its peak at edge m + 1 and falls to edge m + 2, the
        n_mels + 2 edges evenly spaced in mel between fmin and fmax."""
        edges = self._edges(rate)
        freqs = np.fft.rfftfreq(window, 1.0 / rate)
        rising = (freqs[None] - edges[:-2, None]) / (edges[1:-1] - edges[:-2])[:, None]
        falling = (edges[2:, None] - freqs[None]) / (edges[2:] - edges[1:-1])[:, None]
        return np.maximum(0.0, np.minimum(rising, falling))

    def coordinate(self, n_features, rate=None):
        """The bands' centre frequencies in Hz, the coordinate of the decoded ``mel`` dim."""
        return self._edges(self._rate(rate))[1:-1]

    def _edges(self, rate):
        fmax = rate / 2 if self.fmax is None else self.fmax
        return mel_to_hz(np.linspace(hz_to_mel(self.fmin), hz_to_mel(fmax), self.n_mels + 2))

    def __call__(self, frames, rate=None):
        rate = self._rate(rate)
        window = frames.shape[-1]
        taper = get_window("hann", window)  # periodic, scipy.signal.stft's default
        spectrum = rfft(frames * taper, axis=-1) / taper.sum()
        power = spectrum.real ** 2 + spectrum.imag ** 2
        return np.log(power @ self.filterbank(window, rate).T + self.floor)


class FrameFunction:
    """A user's function ``f(frames) -> (..., K)`` seen through the frame-feature protocol (it
    is not given the rate); its K features decode on dim ``dim``."""

    def __init__(self, function, dim="feature"):
        self.function, self.dim = function, dim

    def config(self):
        raise TypeError(f"frame_features={self.function!r} is a Python function, which cannot be "
                        "stored as JSON; save an adapter with frame_features='log_mel' or a "
                        "LogMel(...), or rebuild this one in code")

    def coordinate(self, n_features, rate=None):
        return None

    def __call__(self, frames, rate=None):
        return np.asarray(self.function(frames))


def frame_features(spec):
    """The frame-feature object for a SignalAdapter's ``frame_features`` argument: None (the raw
    steps), "log_mel", a dict ``{"log_mel": {...LogMel options}}`` (what a saved adapter holds), a
    LogMel, or a callable."""
    if spec is None or isinstance(spec, (LogMel, FrameFunction)):
        return spec
    if isinstance(spec, str):
        if spec != "log_mel":
            raise ValueError(f"frame_features={spec!r}; expected 'log_mel', a LogMel(...) or a "
                             "function of the frames (..., window) -> (..., K)")
        return LogMel()
    if isinstance(spec, dict) and set(spec) == {"log_mel"}:
        return LogMel(**spec["log_mel"])
    if callable(spec):
        return FrameFunction(spec)
    raise TypeError(f"frame_features must be None, 'log_mel', a LogMel or a callable, got "
                    f"{type(spec).__name__}")
