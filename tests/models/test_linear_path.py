"""The task models' linear path: gradients against finite differences, zero at the start, and
starting from a fitted linear map gives that map's outputs exactly."""
import numpy as np
import pytest

from gradcheck import check_module_gradients
from seqattn.models import (SequenceModel, SequenceModelConfig, TokenModel, TokenModelConfig)

RNG = np.random.default_rng(3)
X = RNG.normal(size=(3, 5, 4))
IDS = RNG.integers(0, 6, size=(3, 5))
PADDING = np.zeros((3, 5), bool)
PADDING[0, 3:] = True
TINY = dict(d_model=8, nhead=2, num_layers=1, dim_feedforward=8, dtype="float64")


def models(linear):
    return {"token": TokenModel(TokenModelConfig(in_features=4, out_features=2, linear=linear,
                                                 **TINY)),
            "sequence": SequenceModel(SequenceModelConfig(in_features=4, out_features=2,
                                                          linear=linear, **TINY))}


@pytest.mark.parametrize("kind", ["token", "sequence"])
def test_linear_path_gradients(kind):
    model = models(True)[kind]
    # a nonzero path, so that its gradient with respect to the inputs is checked too
    model.start_from_linear(RNG.normal(size=(2, 4)), RNG.normal(size=2))
    model.head.weight.data[...] = RNG.normal(size=model.head.weight.data.shape)
    check_module_gradients(model, lambda x: model(x, PADDING),
                           lambda d: {"x": model.backward(d)}, {"x": X.copy()})


@pytest.mark.parametrize("kind", ["token", "sequence"])
def test_the_path_starts_at_zero(kind):
    with_path, without = models(True)[kind], models(False)[kind]
    np.testing.assert_array_equal(with_path(X, PADDING), without(X, PADDING))


def test_a_token_model_started_from_a_linear_map_gives_its_outputs():
    model = models(True)["token"]
    weight, bias = RNG.normal(size=(2, 4)), RNG.normal(size=2)
    model.start_from_linear(weight, bias)
    np.testing.assert_allclose(model(X, PADDING), X @ weight.T + bias, rtol=1e-12)


def test_a_sequence_model_started_from_a_linear_map_gives_it_on_the_inputs_mean():
    model = models(True)["sequence"]
    weight, bias = RNG.normal(size=(2, 4)), RNG.normal(size=2)
    model.start_from_linear(weight, bias)
    mean = np.stack([X[b][~PADDING[b]].mean(axis=0) for b in range(3)])
    np.testing.assert_allclose(model(X, PADDING), mean @ weight.T + bias, rtol=1e-12)


def test_ids_take_the_map_of_their_one_hot_rows():
    model = SequenceModel(SequenceModelConfig(vocab_size=7, out_features=2, linear=True,
                                              **TINY))
    weight, bias = RNG.normal(size=(2, 6)), RNG.normal(size=2)  # ids 0..5 seen in training
    model.start_from_linear(weight, bias)
    onehot = np.eye(6)[IDS]
    frequencies = np.stack([onehot[b][~PADDING[b]].mean(axis=0) for b in range(3)])
    np.testing.assert_allclose(model(IDS, PADDING), frequencies @ weight.T + bias, rtol=1e-12)


def test_a_map_of_the_wrong_shape_is_refused():
    with pytest.raises(ValueError, match=r"weight has shape \(2, 3\)"):
        models(True)["token"].start_from_linear(np.zeros((2, 3)), np.zeros(2))
    with pytest.raises(ValueError, match="linear=True"):
        models(False)["token"].start_from_linear(np.zeros((2, 4)), np.zeros(2))


LEADS = (3600.0, 7200.0)


def lead_model():
    return TokenModel(TokenModelConfig(in_features=3, out_features=2, linear=True,
                                       linear_leads=LEADS, linear_tokens=4, **TINY))


def lead_coords(hours=(1.0, 7.0, 13.0)):
    leads = np.array([LEADS[0], LEADS[1], LEADS[0]])
    return {"lead": np.repeat(leads[:, None], 4, 1),
            "time": np.repeat(np.array(hours)[:, None] * 3600.0, 4, 1)}


def test_lead_linear_path_gradients():
    model = lead_model()
    x = RNG.normal(size=(3, 4, 3))
    model.linear.map.weight.data[...] = RNG.normal(size=model.linear.map.weight.data.shape)
    model.head.weight.data[...] = RNG.normal(size=model.head.weight.data.shape)
    coords = lead_coords()
    check_module_gradients(model, lambda x: model(x, None, coords=coords),
                           lambda d: {"x": model.backward(d)}, {"x": x})


def test_lead_linear_path_applies_each_samples_own_leads_map():
    model = lead_model()
    x = RNG.normal(size=(3, 4, 3))
    maps = {lead: (RNG.normal(size=(8, 14)), RNG.normal(size=8)) for lead in LEADS}
    from seqattn.models.linear_path import start_from_leads
    start_from_leads(model, maps)
    hours = np.array([1.0, 7.0, 13.0])
    phase = 2 * np.pi * hours / 24
    features = np.concatenate([x.reshape(3, -1), np.sin(phase)[:, None],
                               np.cos(phase)[:, None]], axis=1)
    expected = [features[b] @ maps[lead][0].T + maps[lead][1]
                for b, lead in enumerate((LEADS[0], LEADS[1], LEADS[0]))]
    np.testing.assert_allclose(model(x, None, coords=lead_coords()),
                               np.reshape(expected, (3, 4, 2)), rtol=1e-10)


def test_a_lead_the_path_does_not_know_is_named():
    coords = lead_coords()
    coords["lead"][0] = 10800.0
    with pytest.raises(ValueError, match="lead 10800 is not one of the path's leads"):
        lead_model()(RNG.normal(size=(3, 4, 3)), None, coords=coords)


def test_residual_training_leaves_the_started_path_where_it_was():
    from seqattn.models.linear_path import residual_parameters
    from seqattn.train import AdamW, MSELoss, fit

    model = models(True)["token"]
    weight, bias = RNG.normal(size=(2, 4)), RNG.normal(size=2)
    model.start_from_linear(weight, bias)
    names = [name for name, _ in residual_parameters(model)]
    assert names and not any(name.startswith("linear.") for name in names)
    fit(model, MSELoss(), AdamW(residual_parameters(model), lr=1e-2),
        (X, RNG.normal(size=(3, 5, 2))), epochs=2, progress=False)
    np.testing.assert_array_equal(model.linear.map.weight.data, weight)
    assert np.abs(model.head.weight.data).max() > 0, "the residual was trained"


def lead_token_model():
    """The per-token lead path: no linear_tokens."""
    return TokenModel(TokenModelConfig(in_features=3, out_features=2, linear=True,
                                       linear_leads=LEADS, **TINY))


def test_lead_token_linear_path_gradients():
    model = lead_token_model()
    for _, parameter in model.linear.named_parameters():
        parameter.data[...] = RNG.normal(size=parameter.data.shape)
    model.head.weight.data[...] = RNG.normal(size=model.head.weight.data.shape)
    coords = lead_coords()
    check_module_gradients(model, lambda x: model(x, None, coords=coords),
                           lambda d: {"x": model.backward(d)}, {"x": RNG.normal(size=(3, 4, 3))})


def test_lead_token_linear_path_applies_its_leads_map_to_every_token():
    from seqattn.models.linear_path import start_from_leads

    model = lead_token_model()
    assert np.abs(model(X[:, :4, :3], None, coords=lead_coords())).max() > 0, "a live head"
    maps = {lead: (RNG.normal(size=(2, 5)), RNG.normal(size=2)) for lead in LEADS}
    start_from_leads(model, maps)
    x = RNG.normal(size=(3, 4, 3))
    coords = lead_coords()
    coords["time"][:, 2] += 3 * 3600.0  # each token's own hour, not the first token's
    phase = 2 * np.pi * coords["time"] / 86400.0
    features = np.concatenate([x, np.sin(phase)[..., None], np.cos(phase)[..., None]], axis=2)
    expected = [features[b] @ maps[lead][0].T + maps[lead][1]
                for b, lead in enumerate((LEADS[0], LEADS[1], LEADS[0]))]
    np.testing.assert_allclose(model(x, None, coords=coords), np.stack(expected), rtol=1e-10)


def test_lead_token_linear_path_refuses_a_map_of_the_wrong_shape_and_lead():
    from seqattn.models.linear_path import start_from_leads

    with pytest.raises(ValueError, match=r"weight has shape \(2, 3\).*expects \(2, 5\)"):
        start_from_leads(lead_token_model(), {lead: (np.zeros((2, 3)), np.zeros(2))
                                              for lead in LEADS})
    with pytest.raises(ValueError, match=r"maps has no map for leads \[7200.0\]"):
        start_from_leads(lead_token_model(), {LEADS[0]: (np.zeros((2, 5)), np.zeros(2))})


def test_a_forecast_model_started_from_lead_token_ridge_predicts_what_it_does():
    from baseline_batches import forecast_batch
    from seqattn.baselines import LeadRidge, warm_start

    values = RNG.normal(size=(80, 4, 3))
    leads = np.where(np.arange(80) % 2, 2, 1)
    hours = np.arange(80) * 5.0
    targets = values[..., :2] * leads[:, None, None] + np.cos(2 * np.pi * hours / 24)[
        :, None, None] + 0.1 * RNG.normal(size=(80, 4, 2))
    data = forecast_batch(values, targets, hours, leads)
    # 4 tokens x 5 inputs pass max_features: the ridge regresses each token on its own inputs
    baseline = LeadRidge(max_features=8).fit([data], [data])
    assert baseline.name == "lead token ridge"
    model = warm_start(lead_token_model(), baseline)
    np.testing.assert_allclose(model(data.tokens.astype(np.float64), None, coords=data.coords),
                               baseline.predict(data), rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="build it with linear_tokens=N"):
        warm_start(lead_token_model(), LeadRidge().fit([data], [data]))
    with pytest.raises(ValueError, match="build it without linear_tokens"):
        warm_start(lead_model(), baseline)


def test_a_saved_lead_token_model_loads_with_its_maps(tmp_path):
    import seqattn
    from seqattn.models.linear_path import LeadTokenLinearPath

    model = lead_token_model()
    for _, parameter in model.named_parameters():
        parameter.data[...] = RNG.normal(size=parameter.data.shape)
    seqattn.save(model, tmp_path / "model")
    loaded = seqattn.load(tmp_path / "model")
    assert isinstance(loaded.linear, LeadTokenLinearPath) and loaded.linear.leads == LEADS
    x = RNG.normal(size=(3, 4, 3))
    np.testing.assert_array_equal(loaded(x, None, coords=lead_coords()),
                                  model(x, None, coords=lead_coords()))
