"""Small Batches for the baseline and evaluation tests, built field by field (no adapter)."""
import numpy as np

from seqattn.data.batch import Batch
from seqattn.nn import Structure

HOUR = 3600.0


def batch(tokens, targets, key_padding_mask=None, coords=None, target_valid=None,
          structure=None, valid_features=None):
    """A Batch of `tokens` (B, N, F) floats or (B, N) ids with `targets`; nothing padded unless
    `key_padding_mask` says so."""
    tokens = np.asarray(tokens)
    B, N = tokens.shape[:2]
    mask = np.zeros((B, N), bool) if key_padding_mask is None else np.asarray(key_padding_mask)
    width = valid_features or (tokens.shape[2] if tokens.ndim == 3 else 1)
    valid = np.broadcast_to(~mask[..., None], (B, N, width)).copy()
    coords = dict(coords or {"position": np.broadcast_to(np.arange(N, dtype=float), (B, N))})
    return Batch(tokens=tokens, key_padding_mask=mask, valid=valid, coords=coords,
                 placement=None, targets=np.asarray(targets), target_valid=target_valid,
                 structure=structure)


def forecast_batch(values, targets, initial_hours, lead_hours, target_valid=None):
    """A forecast batch: `values` (B, N, F), `targets` (B, N, Ft), per-sample initial times
    (hours since 1970) and leads (hours), as coords in seconds on every token."""
    values = np.asarray(values, np.float32)
    B, N, _ = values.shape
    per_token = lambda x: np.repeat(np.asarray(x, float)[:, None] * HOUR, N, axis=1)  # noqa: E731
    coords = {"time": per_token(initial_hours), "lead": per_token(lead_hours)}
    return batch(values, np.asarray(targets, np.float32), coords=coords,
                 target_valid=target_valid)


def graph_batch(features, pair_codes, targets, nodes, key_padding_mask=None):
    """One or more graphs: node `features` (B, N, F), `pair_codes` (B, N, N), per-node targets
    and node numbers (coords['node'])."""
    features = np.asarray(features, np.float32)
    return batch(features, targets, key_padding_mask=key_padding_mask,
                 coords={"node": np.asarray(nodes, float)},
                 structure=Structure(pair_codes=np.asarray(pair_codes, np.int8)))


def molecule_batch(types, targets, key_padding_mask=None):
    types = np.asarray(types)
    tokens = np.zeros((*types.shape, 1), np.float32)
    return batch(tokens, targets, key_padding_mask=key_padding_mask,
                 structure=Structure(types=types))
