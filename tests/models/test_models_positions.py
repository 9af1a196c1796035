"""How task models place their tokens: sequence positions, the adapters' coordinates, causality."""
import numpy as np
import pytest

from gradcheck import check_module_gradients
from seqattn.models import TokenModel, TokenModelConfig
from seqattn.models.coordinates import CoordinateEncoding

RNG = np.random.default_rng(0)
X = RNG.normal(size=(2, 5, 3))


def _model(**options):
    config = dict(in_features=3, out_features=2, d_model=8, nhead=2, num_layers=1,
                  dim_feedforward=8, max_len=16, dtype="float64")
    config.update(options)
    return TokenModel(TokenModelConfig(**config))


def _coords(shape=(2, 5)):
    rng = np.random.default_rng(1)
    return {"lat": rng.uniform(-80, 80, shape), "lon": rng.uniform(0, 360, shape),
            "time": rng.uniform(0, 3e9, shape), "lead": rng.uniform(0, 3e5, shape)}


@pytest.mark.parametrize("positions", ["sinusoidal", "learned", "rope", "alibi", "none"])
def test_every_sequence_position_scheme_trains(positions):
    model = _model(positions=positions, coordinates=["latlon", "time_of_day", "lead"])
    coords = _coords()
    check_module_gradients(model, lambda x: model(x, coords=coords), lambda d: {"x": model.backward(d)},
                           {"x": X.copy()})


@pytest.mark.parametrize("positions", ["sinusoidal", "learned", "rope", "alibi"])
def test_positions_make_order_matter(positions):
    """Without positions a Transformer is permutation-equivariant; each scheme breaks that."""
    order = [4, 2, 0, 1, 3]
    plain = _model(positions="none").eval()
    np.testing.assert_allclose(plain(X[:, order]), plain(X)[:, order], atol=1e-12)
    placed = _model(positions=positions).eval()
    assert not np.allclose(placed(X[:, order]), placed(X)[:, order], atol=1e-6)


def test_causal_models_do_not_see_the_future():
    later = X.copy()
    later[:, 3:] += 5.0
    causal = _model(causal=True).eval()
    np.testing.assert_allclose(causal(later)[:, :3], causal(X)[:, :3], atol=1e-12)
    seeing = _model().eval()
    assert not np.allclose(seeing(later)[:, :3], seeing(X)[:, :3], atol=1e-6)


def test_an_attention_mask_passes_through():
    causal_mask = np.tril(np.ones((5, 5), bool))
    model = _model().eval()
    np.testing.assert_allclose(model(X, attn_mask=causal_mask), _model(causal=True).eval()(X),
                               atol=1e-12)


def test_calendar_features_follow_the_formula():
    """06:00 UTC is a quarter of the day: sin = 1, cos = 0; the yearly phase of 1970-01-01
    00:00 is 0."""
    encoding = CoordinateEncoding(["time_of_day", "day_of_year"], 4, dtype=np.float64, seed=0)
    six_am = 6 * 3600.0
    features = encoding.features({"time": np.array([[six_am, 0.0]])}, (1, 2))
    np.testing.assert_allclose(features[0, 0, :2], [1.0, 0.0], atol=1e-12)
    np.testing.assert_allclose(features[0, 1], [0.0, 1.0, 0.0, 1.0], atol=1e-12)
    year_phase = (six_am / 86400.0) / 365.2425
    np.testing.assert_allclose(features[0, 0, 2:], [np.sin(2 * np.pi * year_phase),
                                                    np.cos(2 * np.pi * year_phase)], atol=1e-12)


def test_latlon_features_have_no_seam_and_nan_gives_zeros():
    encoding = CoordinateEncoding(["latlon"], 4, dtype=np.float64, seed=0)
    f = encoding.features({"lat": np.array([[10.0, 10.0, np.nan]]),
                           "lon": np.array([[-180.0, 180.0, 5.0]])}, (1, 3))
    np.testing.assert_allclose(f[0, 0], f[0, 1], atol=1e-12)
    assert not f[0, 2].any()


def test_lead_features_depend_on_the_lead():
    model = _model(coordinates=["lead"], positions="none").eval()
    one = model(X, coords={"lead": np.full((2, 5), 3600.0)})
    six = model(X, coords={"lead": np.full((2, 5), 6 * 3600.0)})
    assert not np.allclose(one, six)


def test_missing_coordinates_are_named():
    model = _model(coordinates=["latlon", "lead"])
    with pytest.raises(ValueError, match=r"needs coords \['lat', 'lead', 'lon'\]"):
        model(X)


def test_bad_position_options_are_explained():
    with pytest.raises(ValueError, match="positions must be one of"):
        _model(positions="absolute")
    with pytest.raises(ValueError, match="not known encodings"):
        _model(coordinates=["latitude"])
    with pytest.raises(ValueError, match="not a string"):
        _model(coordinates="latlon")
