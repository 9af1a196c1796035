"""The SequenceModel's feature path: the features of PooledFeatures and PositionFeatures
computed alike, a model warm-started from those baselines giving their probabilities, parameter
gradients against finite differences, and bad configs named."""
import numpy as np
import pytest

from baseline_batches import batch
from gradcheck import check_module_gradients
from seqattn import load, save
from seqattn.baselines import PooledFeatures, PositionFeatures, warm_start
from seqattn.models import SequenceModel, SequenceModelConfig

RNG = np.random.default_rng(11)
TINY = dict(d_model=8, nhead=2, num_layers=1, dim_feedforward=8, dtype="float64")
TOKENS = RNG.normal(size=(40, 4, 3))
PADDING = np.arange(4)[None, :] >= RNG.integers(1, 5, size=40)[:, None]
LABELS = np.arange(40) % 3
CASES = {"pooled": (PooledFeatures(), PADDING),
         "additive": (PositionFeatures(), None),
         "pairwise": (PositionFeatures(pairwise=True), None)}


def model(features, linear_tokens=4):
    return SequenceModel(SequenceModelConfig(in_features=3, out_features=3, linear=True,
                                             linear_features=features,
                                             linear_tokens=linear_tokens, **TINY))


@pytest.mark.parametrize("features", CASES)
def test_the_path_reads_the_baselines_features(features):
    baseline, padding = CASES[features]
    data = batch(TOKENS, LABELS, key_padding_mask=padding)
    baseline.fit([data], [data])
    np.testing.assert_allclose(model(features).linear.inputs_features(TOKENS, padding),
                               baseline.features(data), rtol=1e-12)


@pytest.mark.parametrize("features", CASES)
def test_a_model_started_from_the_baseline_gives_its_probabilities(features):
    baseline, padding = CASES[features]
    data = batch(TOKENS, LABELS, key_padding_mask=padding)
    started = warm_start(model(features), baseline.fit([data], [data]))
    logits = started(TOKENS, padding)
    probabilities = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    np.testing.assert_allclose(probabilities, np.exp(baseline.predict(data)), atol=1e-6)


@pytest.mark.parametrize("features", ["pooled", "pairwise"])
def test_feature_path_parameter_gradients(features):
    path_model = model(features)
    width = path_model.linear.map.weight.data.shape[1]
    path_model.start_from_linear(RNG.normal(size=(3, width)), RNG.normal(size=3))
    path_model.head.weight.data[...] = RNG.normal(size=path_model.head.weight.data.shape)
    padding = PADDING[:5] if features == "pooled" else None

    def parameter_gradients_only(dout):
        path_model.backward(dout)  # the features are data: no input gradient through the path
        return {}

    check_module_gradients(path_model, lambda x: path_model(x, padding),
                           parameter_gradients_only, {"x": TOKENS[:5].copy()})


def test_the_path_starts_at_zero_and_saves_with_its_map(tmp_path):
    plain = SequenceModel(SequenceModelConfig(in_features=3, out_features=3, **TINY))
    path_model = model("pairwise")
    np.testing.assert_array_equal(path_model(TOKENS), plain(TOKENS))
    width = path_model.linear.map.weight.data.shape[1]
    path_model.linear.set(RNG.normal(size=(3, width)), RNG.normal(size=3))
    save(path_model, tmp_path / "model")
    np.testing.assert_array_equal(load(tmp_path / "model")(TOKENS), path_model(TOKENS))


def test_bad_configs_and_mismatched_baselines_are_named():
    with pytest.raises(ValueError, match="linear_features='cubic'"):
        model("cubic")
    with pytest.raises(ValueError, match="linear_tokens=N"):
        model("additive", linear_tokens=None)
    with pytest.raises(ValueError, match="in_features"):
        SequenceModel(SequenceModelConfig(vocab_size=5, out_features=3, linear=True,
                                          linear_features="pooled", **TINY))
    with pytest.raises(ValueError, match="4 unpadded tokens"):
        model("additive")(TOKENS[:, :3])
    data = batch(TOKENS, LABELS)
    with pytest.raises(ValueError, match="linear_features='pairwise'"):
        warm_start(model("additive"), PositionFeatures(pairwise=True).fit([data], [data]))
    with pytest.raises(ValueError, match="statistics=\\(.mean., .max.\\)"):
        warm_start(model("pooled"), PooledFeatures(("mean", "max")).fit([data], [data]))


def test_warm_start_can_keep_the_head_to_add_the_baselines_logits():
    data = batch(TOKENS, LABELS)
    baseline = PositionFeatures().fit([data], [data])
    trained = model("additive")
    trained.head.weight.data[...] = RNG.normal(size=trained.head.weight.data.shape)
    alone = trained(TOKENS)
    both = warm_start(trained, baseline, keep_head=True)(TOKENS)
    weight, bias = baseline.model.raw()
    np.testing.assert_allclose(both, alone + TOKENS.reshape(40, -1) @ weight.T + bias,
                               rtol=1e-10, atol=1e-10)


def test_a_column_constant_in_training_up_to_rounding_is_not_amplified():
    tokens = RNG.normal(size=(60, 4, 3))
    tokens[:, :, 0] = np.float32(-0.81341475)  # its pair products spread by rounding only
    data = batch(tokens, np.arange(60) % 3)
    baseline = PositionFeatures(pairwise=True).fit([data], [data])
    spread = baseline.features(data).std(axis=0)
    rounding = (spread > 0) & (spread < 1e-12)
    assert rounding.any(), spread.min()  # the case this test is about
    # the standardizer keeps scale 1 there, so the fitted map puts no large weight on noise
    np.testing.assert_array_equal(baseline.model.scale[rounding], 1.0)
    weight, bias = baseline.model.raw()
    assert np.abs(weight[:, rounding]).max() < 1.0
    started = warm_start(model("pairwise"), baseline).linear.map
    np.testing.assert_allclose(started.weight.data, weight, rtol=1e-12)
    np.testing.assert_allclose(started.bias.data, bias, rtol=1e-12)


@pytest.mark.parametrize("features", ["pooled", "pairwise"])
def test_the_path_runs_on_the_gpu_as_on_the_cpu(features):
    from numba import cuda

    path_model = model(features)
    width = path_model.linear.map.weight.data.shape[1]
    path_model.linear.set(RNG.normal(size=(3, width)), RNG.normal(size=3))
    path_model.eval()
    padding = PADDING[:3] if features == "pooled" else np.zeros((3, 4), bool)
    on_cpu = path_model(TOKENS[:3], padding)
    path_model.to("cuda")
    on_gpu = path_model(cuda.to_device(TOKENS[:3]), cuda.to_device(padding))
    np.testing.assert_allclose(on_gpu.copy_to_host(), on_cpu, rtol=1e-10, atol=1e-12)
