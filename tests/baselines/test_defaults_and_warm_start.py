"""Which baselines a batch gets, and a task model started from a fitted linear baseline
predicting what the baseline predicts."""
import numpy as np
import pytest

from baseline_batches import batch, forecast_batch, graph_batch, molecule_batch
from seqattn.baselines import (Climatology, KmerCounts, LabelPropagation, LeadRidge,
                               NearestNeighbour, NodeFeatures, Persistence, PooledFeatures,
                               PositionFeatures, TokenFeatures, ElementCounts, for_batch,
                               warm_start)
from seqattn.models import SequenceModel, SequenceModelConfig, TokenModel, TokenModelConfig

RNG = np.random.default_rng(6)
TINY = dict(d_model=8, nhead=2, num_layers=1, dim_feedforward=8, dtype="float64")


def kinds(b):
    return [type(x) for x in for_batch(b)]


def test_each_task_gets_its_families():
    values = RNG.normal(size=(4, 3, 2))
    assert kinds(forecast_batch(values, values[..., :1], range(4), [1] * 4)) == \
        [Persistence, Climatology, LeadRidge]
    assert kinds(batch(values, values)) == [TokenFeatures]
    assert kinds(batch(values, np.array([0, 1, 0, 1]))) == [PooledFeatures, NearestNeighbour,
                                                            PositionFeatures, PositionFeatures]
    assert kinds(batch(RNG.integers(0, 4, (4, 9)), np.array([0, 1, 0, 1]))) == \
        [PooledFeatures, NearestNeighbour, PositionFeatures, PositionFeatures, KmerCounts,
         KmerCounts]
    kmer_ids = RNG.integers(0, 4097, (4, 9))
    assert kinds(batch(kmer_ids, np.array([0, 1, 0, 1]))) == [PooledFeatures, NearestNeighbour]
    padded = np.arange(9)[None, :] > np.array([8, 6, 7, 5])[:, None]
    assert kinds(batch(RNG.integers(0, 4, (4, 9)), np.array([0, 1, 0, 1]),
                       key_padding_mask=padded)) == [PooledFeatures, NearestNeighbour,
                                                     KmerCounts, KmerCounts]
    codes = np.ones((4, 3, 3))
    assert kinds(graph_batch(values, codes, np.zeros((4, 3), int), np.zeros((4, 3)))) == \
        [NodeFeatures, LabelPropagation]
    assert kinds(molecule_batch(np.zeros((4, 3), int), np.zeros((4, 1)))) == \
        [PooledFeatures, NearestNeighbour, ElementCounts]


def test_a_token_model_started_from_token_ridge_predicts_what_it_does():
    tokens = RNG.normal(size=(20, 5, 3))
    data = batch(tokens, tokens @ RNG.normal(size=(3, 2)) + RNG.normal(size=(20, 5, 2)))
    baseline = TokenFeatures().fit([data], [data])
    model = warm_start(TokenModel(TokenModelConfig(in_features=3, out_features=2, linear=True,
                                                   **TINY)), baseline)
    np.testing.assert_allclose(model(tokens, data.key_padding_mask), baseline.predict(data),
                               rtol=1e-5, atol=1e-5)


def test_a_sequence_classifier_started_from_pooled_logistic_gives_its_probabilities():
    tokens = RNG.normal(size=(60, 6, 2))
    padding = np.zeros((60, 6), bool)
    padding[::2, 4:] = True
    labels = (tokens[..., 0].mean(1) > 0).astype(int)
    data = batch(tokens, labels, key_padding_mask=padding)
    baseline = PooledFeatures(statistics=("mean",)).fit([data], [data])
    model = warm_start(SequenceModel(SequenceModelConfig(in_features=2, out_features=2,
                                                         linear=True, **TINY)), baseline)
    logits = model(tokens, padding)
    probabilities = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    np.testing.assert_allclose(probabilities, np.exp(baseline.predict(data)), atol=1e-5)


def test_warm_start_needs_the_linear_paths_features():
    tokens = RNG.normal(size=(20, 5, 3))
    data = batch(tokens, np.arange(20) % 2)
    model = SequenceModel(SequenceModelConfig(in_features=3, out_features=2, linear=True, **TINY))
    with pytest.raises(ValueError, match="statistics=\\('mean',\\)"):
        warm_start(model, PooledFeatures().fit([data], [data]))
    with pytest.raises(ValueError, match="expected a fitted"):
        warm_start(model, PooledFeatures(statistics=("mean",)))


def test_a_forecast_model_started_from_ridge_per_lead_predicts_what_it_does():
    values = RNG.normal(size=(80, 3, 2))
    leads = np.where(np.arange(80) % 2, 2, 1)
    hours = np.arange(80) * 5.0
    targets = values[..., :1] * leads[:, None, None] + np.cos(2 * np.pi * hours / 24)[
        :, None, None] + 0.1 * RNG.normal(size=(80, 3, 1))
    data = forecast_batch(values, targets, hours, leads)
    baseline = LeadRidge().fit([data], [data])
    model = TokenModel(TokenModelConfig(in_features=2, out_features=1, linear=True,
                                        linear_leads=(3600.0, 7200.0), linear_tokens=3, **TINY))
    warm_start(model, baseline)
    np.testing.assert_allclose(model(data.tokens.astype(np.float64), None, coords=data.coords),
                               baseline.predict(data), rtol=1e-4, atol=1e-5)
