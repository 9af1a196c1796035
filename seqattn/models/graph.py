"""Graph models: every node a token, the graph's structure in the tokens and in the attention.

N -> N (``task="node"``: a class or value per node) and N -> 1 (``task="graph"``: one per
graph) on the batches of :class:`seqattn.adapters.GraphAdapter`, which carry per node the
encodings the config asks for (in ``coords``, by the names below) and per pair of nodes the
hop-distance, edge-type and edge-weight-bin codes (``structure.pair_codes``, read by a
learnable per-head bias in every layer: ``pair_bias={"num_codes": ...}``; a negative code
hides the pair, which restricts attention to the edges). ``adapter.model_config(...)`` fills
in the sizes; ``seqattn.models.build`` makes the model.

Node encodings, each an option of :class:`GraphModelConfig`:

* ``max_degree``: in- and out-degree embeddings (Graphormer), degrees clipped at it; one-hot
  rows through the input projection, which is a learned vector per degree added to the token;
* ``laplacian``: k Laplacian eigenvector positions; in training each graph's eigenvectors get
  random signs (an eigenvector's sign means nothing, and the model must not learn one);
* ``random_walk``: K random-walk return probabilities (GraphGPS's RWSE).

They are concatenated to the node features and projected together with them.
"""
from dataclasses import dataclass, fields

import numpy as np

from .. import autodiff
from ..graphs import random_sign_flips
from ..nn import Module
from ..nn.placement import moved
from .encoder import EncoderConfig
from .sequence_model import SequenceModel, SequenceModelConfig
from .token_model import TokenModel, TokenModelConfig

IN_DEGREE, OUT_DEGREE = "in_degree", "out_degree"
TASKS = ("node", "graph")


def laplacian_coord(i):
    """The coords name of the i-th (from 1) Laplacian eigenvector position."""
    return f"laplacian_{i}"


def random_walk_coord(steps):
    """The coords name of the return probability after ``steps`` steps."""
    return f"random_walk_{steps}"


@dataclass
class GraphModelConfig(EncoderConfig):
    """``in_features`` node features per node, then the encodings (module docstring);
    ``task`` "node" or "graph" (pooled by ``pooling`` as in SequenceModel); ``out_features``
    values or class logits per node or graph. Node order carries no meaning, so ``positions``
    defaults to "none".

    Parameters
    ----------
    task : str, default 'node'
        ``"node"``: outputs per node (N -> N); ``"graph"``: outputs per graph (N -> 1).
    out_features : int, default 1
        Outputs per node or per graph (target features, or classes).
    pooling : str, default 'mean'
        For ``task="graph"``, how the nodes are pooled, as in
        :class:`~seqattn.models.SequenceModelConfig`: ``"mean"``, ``"cls"`` or
        ``"attention"``.
    max_degree : int, default None
        In- and out-degree embeddings, degrees clipped at this value; None: none.
    laplacian : int, default 0
        k, the Laplacian eigenvector positions per node (0: none).
    random_walk : int, default 0
        K, the random-walk return probabilities per node, after 1 .. K steps (0: none).
    positions : str, default 'none'
        As in :class:`~seqattn.models.EncoderConfig`; a node's index means nothing, so none.
    """

    task: str = "node"
    out_features: int = 1
    pooling: str = "mean"
    max_degree: int = None
    laplacian: int = 0
    random_walk: int = 0
    positions: str = "none"

    def encoding_names(self):
        """The coords the model reads, in the order their columns are appended."""
        names = [IN_DEGREE, OUT_DEGREE] if self.max_degree is not None else []
        names += [laplacian_coord(i) for i in range(1, self.laplacian + 1)]
        return names + [random_walk_coord(s) for s in range(1, self.random_walk + 1)]


class GraphModel(Module):
    """inputs (B, N, F) node features -> (B, N, out_features) per node (task "node") or
    (B, out_features) per graph (task "graph"); ``coords`` hold the node encodings (names in
    the module docstring, (B, N) each, NaN at padding), ``structure`` the pair codes.

    Parameters
    ----------
    config : GraphModelConfig
        The model's sizes, task and node encodings (``in_features`` required).
    """

    def __init__(self, config):
        super().__init__()
        if config.task not in TASKS:
            raise ValueError(f"task must be one of {TASKS}, got {config.task!r}")
        if config.in_features is None:
            raise ValueError("a GraphModelConfig needs in_features (node features per node)")
        self.config = config
        degree_columns = 0 if config.max_degree is None else 2 * (config.max_degree + 1)
        extra = degree_columns + config.laplacian + config.random_walk
        shared = {f.name: getattr(config, f.name) for f in fields(EncoderConfig)}
        shared["in_features"] = config.in_features + extra
        if config.task == "node":
            self.model = TokenModel(TokenModelConfig(**shared, out_features=config.out_features))
        else:
            self.model = SequenceModel(SequenceModelConfig(
                **shared, out_features=config.out_features, pooling=config.pooling))
        self.signs = np.random.default_rng([config.seed, 7])  # Laplacian sign flips

    def encoding_columns(self, batch_size, coords):
        """(B, N, encodings) on the model's device: the columns appended to the features."""
        config = self.config
        names = config.encoding_names()
        missing = [name for name in names if name not in (coords or {})]
        if missing:
            raise ValueError(f"the model reads node encodings {missing} from coords, which the "
                             f"batch lacks; build the adapter with the same encodings "
                             f"(GraphAdapter(max_degree=..., laplacian=..., random_walk=...))")
        columns = []
        if config.max_degree is not None:
            for name in (IN_DEGREE, OUT_DEGREE):
                degree = np.nan_to_num(coords[name], nan=0.0)  # padding: any id, it is masked
                ids = np.minimum(degree.astype(np.int64), config.max_degree)
                columns.append(np.eye(config.max_degree + 1)[ids])
        if config.laplacian:
            positions = np.stack([coords[laplacian_coord(i)]
                                  for i in range(1, config.laplacian + 1)], axis=-1)
            if self.training:
                positions = positions * random_sign_flips(self.signs,
                                                          (batch_size, 1, config.laplacian))
            columns.append(positions)
        if config.random_walk:
            columns.append(np.stack([coords[random_walk_coord(s)]
                                     for s in range(1, config.random_walk + 1)], axis=-1))
        x = np.concatenate([np.nan_to_num(c, nan=0.0) for c in columns], axis=-1)
        return moved(np.ascontiguousarray(x, dtype=np.dtype(config.dtype)), self.device)

    def forward(self, inputs, key_padding_mask=None, coords=None, attn_mask=None,
                structure=None):
        if self.config.encoding_names():
            columns = self.encoding_columns(int(inputs.shape[0]), coords)
            inputs = autodiff.concat([inputs, columns], axis=-1)
        return self.model(inputs, key_padding_mask, None, attn_mask, structure)

