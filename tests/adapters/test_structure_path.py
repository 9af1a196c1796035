"""A batch's pairwise structure (positions, pair codes) reaches the model's structured biases
through the library's own path: fit and evaluate, predict's model call, seqattn.save / load."""
import numpy as np
import pytest

import seqattn
from seqattn.data.batch import Batch
from seqattn.data.model_call import ModelCall
from seqattn.models import SequenceModel, SequenceModelConfig, TokenModel, TokenModelConfig
from seqattn.nn import Structure
from seqattn.train import AdamW, MSELoss, evaluate, fit

SIZES = dict(d_model=16, nhead=2, num_layers=1, dim_feedforward=32, positions="none", seed=0)
B, N = 6, 5


def _neighbour_means(seed=0):
    """Targets that are each token's mean over its neighbours (pair code 1): a model can fit them
    only when it reads the pair codes."""
    rng = np.random.default_rng(seed)
    codes = (rng.random((B, N, N)) < 0.4).astype(np.int8)
    codes[:, np.arange(N), (np.arange(N) + 1) % N] = 1  # everyone has a neighbour
    tokens = rng.normal(size=(B, N, 1)).astype(np.float32)
    targets = (codes @ tokens) / codes.sum(-1, keepdims=True)
    return tokens, targets.astype(np.float32), Structure(pair_codes=codes)


def _adapter_batch(tokens, structure):
    return Batch(tokens=tokens, key_padding_mask=np.zeros(tokens.shape[:2], bool),
                 valid=np.ones(tokens.shape, bool), coords={}, placement=None,
                 structure=structure)


def _trained_loss(tokens, targets, structure):
    model = TokenModel(TokenModelConfig(in_features=1, pair_bias={"num_codes": 2}, **SIZES))
    batches = [{"inputs": tokens, "targets": targets, "structure": structure}]
    fit(model, MSELoss(), AdamW(model, lr=1e-2), batches, epochs=80, progress=False)
    return evaluate(model, MSELoss(), batches)["loss"]


def test_fit_trains_the_pair_bias_from_the_batches_structure():
    tokens, targets, structure = _neighbour_means()
    blind = Structure(pair_codes=np.zeros_like(structure.pair_codes))  # same model, no news
    assert _trained_loss(tokens, targets, structure) < 0.5 * _trained_loss(tokens, targets,
                                                                           blind)


def test_predict_passes_the_structure_and_a_reloaded_model_predicts_the_same(tmp_path):
    rng = np.random.default_rng(1)
    positions = rng.normal(size=(B, N, 3))  # float64, as an adapter gives them
    structure = Structure(positions=positions, types=rng.integers(0, 2, (B, N)))
    config = SequenceModelConfig(in_features=1, out_features=2,
                                 distance_bias={"bins": 8, "r_max": 4.0, "num_types": 2},
                                 **SIZES)
    model = SequenceModel(config)
    tokens = rng.normal(size=(B, N, 1)).astype(np.float32)
    out = ModelCall(model)(_adapter_batch(tokens, structure))
    direct = model(tokens, structure=structure.on("cpu", np.float32))
    np.testing.assert_array_equal(out, direct)
    moved = Structure(positions=positions * 1.5, types=structure.types)
    assert not np.allclose(ModelCall(model)(_adapter_batch(tokens, moved)), out)
    seqattn.save(model, tmp_path / "model")
    again = seqattn.load(tmp_path / "model")
    np.testing.assert_array_equal(ModelCall(again)(_adapter_batch(tokens, structure)), out)


def test_a_structure_for_a_model_without_structured_biases_is_an_error():
    tokens, targets, structure = _neighbour_means()

    class Plain(TokenModel):
        def forward(self, inputs, key_padding_mask=None):
            return super().forward(inputs, key_padding_mask)

    model = Plain(TokenModelConfig(in_features=1, **SIZES))
    with pytest.raises(TypeError, match="structure"):
        ModelCall(model)(_adapter_batch(tokens, structure))
    with pytest.raises(TypeError, match="structure"):
        fit(model, MSELoss(), AdamW(model), [{"inputs": tokens, "targets": targets,
                                               "structure": structure}], progress=False)


def test_bad_structured_bias_options_are_reported():
    with pytest.raises(ValueError, match="distance_bias must be a dict"):
        TokenModel(TokenModelConfig(in_features=1, distance_bias=16, **SIZES))
    with pytest.raises(ValueError, match="class token"):
        SequenceModel(SequenceModelConfig(in_features=1, pooling="cls",
                                          pair_bias={"num_codes": 2}, **SIZES))


def test_structure_on_casts_float_arrays_and_leaves_the_users_alone():
    positions = np.zeros((1, 2, 3))
    structure = Structure(positions=positions, types=np.zeros((1, 2), np.int64))
    placed = structure.on("cpu", np.float32)
    assert placed.positions.dtype == np.float32 and placed.types.dtype == np.int64
    assert structure.positions is positions and positions.dtype == np.float64
