"""The SequenceModel's neighbour path: a model warm-started from a fitted NearestNeighbour gives
its probabilities on new samples, a training sample is not its own neighbour, the references
are saved with the weights and rebuilt by seqattn.load, the map's gradients match finite
differences, and bad configs and baselines are named."""
import numpy as np
import pytest

from baseline_batches import batch
from gradcheck import check_module_gradients
from seqattn import load, save
from seqattn.baselines import NearestNeighbour, PooledFeatures, warm_start
from seqattn.baselines.sequences import smoothed_votes
from seqattn.models import SequenceModel, SequenceModelConfig

RNG = np.random.default_rng(5)
TINY = dict(d_model=8, nhead=2, num_layers=1, dim_feedforward=8, dtype="float64")
TOKENS = RNG.normal(size=(60, 5, 2))
LABELS = np.arange(60) % 3
PADDING = np.arange(5)[None, :] >= RNG.integers(2, 6, size=60)[:, None]


def neighbour_model(**options):
    return SequenceModel(SequenceModelConfig(in_features=2, out_features=3, linear=True,
                                             linear_features="neighbours", **TINY, **options))


def fitted(padding=None, neighbours=(1, 3, 5)):
    """NearestNeighbour fitted on the first 40 samples, k chosen on the next 10."""
    pad = (lambda rows: None) if padding is None else (lambda rows: padding[rows])
    train = batch(TOKENS[:40], LABELS[:40], key_padding_mask=pad(slice(0, 40)))
    valid = batch(TOKENS[40:50], LABELS[40:50], key_padding_mask=pad(slice(40, 50)))
    return NearestNeighbour(neighbours=neighbours).fit([train], [valid])


def probabilities(logits):
    return np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)


@pytest.mark.parametrize("padding", [None, PADDING], ids=["one length", "padded"])
def test_a_started_model_gives_the_baselines_probabilities_on_new_samples(padding):
    baseline = fitted(padding)
    model = warm_start(neighbour_model(), baseline)
    new = slice(50, 60)
    mask = None if padding is None else padding[new]
    expected = baseline.predict(batch(TOKENS[new], LABELS[new], key_padding_mask=mask))
    np.testing.assert_allclose(probabilities(model(TOKENS[new], mask)), np.exp(expected),
                               rtol=1e-6)
    # how the references are compared is the baseline's: position by position, or pooled
    assert model.config.linear_tokens == (5 if padding is None else None)
    assert model.config.linear_references == 40
    assert model.config.linear_neighbours == baseline.k


def test_a_training_sample_is_scored_by_the_other_references():
    baseline = fitted(neighbours=(1,))
    model = warm_start(neighbour_model(), baseline)
    votes = model.linear.votes(TOKENS[:40])
    # by hand: each training sample's nearest other training sample votes
    columns = (TOKENS[:40].reshape(40, -1) - baseline.mean) / baseline.scale
    distance = ((columns[:, None] - columns[None]) ** 2).sum(-1)
    np.fill_diagonal(distance, np.inf)
    np.testing.assert_allclose(votes, smoothed_votes(LABELS[:40][distance.argmin(1), None], 3),
                               rtol=1e-12)
    # left in, every sample would vote for its own class
    own = smoothed_votes(LABELS[:40, None], 3)
    assert not np.allclose(votes, own)


def test_a_new_sample_that_copies_a_reference_counts_it_in_evaluation_mode():
    # seqattn.predict runs the model in evaluation mode: a new sample identical to a training
    # sample (archives hold such copies) is classified by it, as the fitted baseline does
    baseline = fitted(neighbours=(1,))
    model = warm_start(neighbour_model(), baseline)
    copies = TOKENS[:40].copy()
    with model.mode(False):
        votes = model.linear.votes(copies)
    np.testing.assert_allclose(votes, smoothed_votes(LABELS[:40, None], 3), rtol=1e-12)
    np.testing.assert_allclose(votes, baseline.predict(batch(copies, LABELS[:40])), rtol=1e-6)
    assert not np.allclose(model.linear.votes(copies), votes)


def test_an_unstarted_path_adds_nothing_and_the_started_model_saves(tmp_path):
    plain = SequenceModel(SequenceModelConfig(in_features=2, out_features=3, **TINY))
    unstarted = neighbour_model()
    np.testing.assert_array_equal(unstarted(TOKENS), plain(TOKENS))
    model = warm_start(neighbour_model(), fitted(PADDING))
    model.head.weight.data[...] = RNG.normal(size=model.head.weight.data.shape)
    save(model, tmp_path / "model")
    loaded = load(tmp_path / "model")
    np.testing.assert_array_equal(loaded(TOKENS, PADDING), model(TOKENS, PADDING))
    assert loaded.config.linear_references == 40
    np.testing.assert_array_equal(loaded.linear.references, model.linear.references)


def test_neighbour_path_parameter_gradients():
    model = warm_start(neighbour_model(), fitted())
    model.linear.map.weight.data[...] = RNG.normal(size=(3, 3))
    model.head.weight.data[...] = RNG.normal(size=model.head.weight.data.shape)

    def parameter_gradients_only(dout):
        model.backward(dout)  # the votes are data: no input gradient through the path
        return {}

    check_module_gradients(model, lambda x: model(x), parameter_gradients_only,
                           {"x": TOKENS[50:55].copy()})


def test_bad_configs_and_baselines_are_named():
    with pytest.raises(ValueError, match="float tokens"):
        SequenceModel(SequenceModelConfig(vocab_size=5, out_features=3, linear=True,
                                          linear_features="neighbours", **TINY))
    with pytest.raises(ValueError, match="linear_neighbours"):
        neighbour_model(linear_neighbours=0)
    plain = SequenceModel(SequenceModelConfig(in_features=2, out_features=3, linear=True,
                                              linear_features="pooled", **TINY))
    with pytest.raises(ValueError, match="linear_features='neighbours'"):
        warm_start(plain, fitted())
    with pytest.raises(ValueError, match="not fitted"):
        warm_start(neighbour_model(), NearestNeighbour())
    with pytest.raises(ValueError, match="votes for 3 classes"):
        warm_start(SequenceModel(SequenceModelConfig(
            in_features=2, out_features=4, linear=True, linear_features="neighbours", **TINY)),
            fitted())
    with pytest.raises(ValueError, match="build it with linear_features=.pooled."):
        train = batch(TOKENS[:40], LABELS[:40], key_padding_mask=PADDING[:40])
        warm_start(neighbour_model(), PooledFeatures().fit([train], [train]))
    model = warm_start(neighbour_model(), fitted())
    with pytest.raises(ValueError, match="compares 5 unpadded tokens"):
        model(TOKENS[:, :4])


def test_the_whole_path_with_the_neighbours_as_a_second_expert(tmp_path):
    """SignalAdapter -> a model with a neighbour path -> fit (attention alone) -> warm_start
    with keep_head -> seqattn.predict on the Dataset's samples -> save / load -> the same
    predictions, and the second expert changed them."""
    import xarray as xr

    import seqattn
    from seqattn.adapters import SignalAdapter
    from seqattn.models import build
    from seqattn.models.linear_path import residual_parameters
    from seqattn.train import AdamW, CrossEntropyLoss, fit

    rng = np.random.default_rng(2)
    labels = np.arange(40) % 2
    x = rng.normal(size=(40, 24, 1))
    x[labels == 1, 8:12] += 2.0
    ds = xr.Dataset({"x": (("sample", "time", "channel"), x), "label": ("sample", labels)})
    train, valid = ds.sample < 30, ds.sample >= 30
    adapter = SignalAdapter(["x"], window=4, hop=4, channel_dims=("channel",)).fit(
        ds, targets="label", where=train)
    model = build(adapter.model_config(task="classification", d_model=8, nhead=2,
                                       num_layers=1, dim_feedforward=8, linear=True,
                                       linear_features="neighbours"))
    held = adapter.batches(ds, where=valid, batch_size=8)
    fit(model, CrossEntropyLoss(), AdamW(residual_parameters(model), lr=3e-3),
        adapter.batches(ds, where=train, batch_size=8, shuffle=True, seed=0), epochs=2,
        validation=held, progress=False)
    alone = seqattn.predict(model, ds, adapter, where=valid)
    neighbours = NearestNeighbour().fit(adapter.batches(ds, where=train, batch_size=64), held)
    model = warm_start(model, neighbours, keep_head=True)
    both = seqattn.predict(model, ds, adapter, where=valid)
    assert list(both["label"].dims) == ["sample"] and both.sizes["sample"] == 10
    assert not np.allclose(both["label_probability"], alone["label_probability"])
    seqattn.save(model, tmp_path / "model")
    again = seqattn.predict(seqattn.load(tmp_path / "model"), ds, adapter, where=valid)
    xr.testing.assert_identical(again, both)
