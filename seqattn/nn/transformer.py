"""The encoder-decoder Transformer, batch-first, with torch.nn.Transformer's parameter names
(encoder.layers.i..., encoder.norm, decoder.layers.i..., decoder.norm)."""
import numpy as np

from .init import generator
from .layer_norm import LayerNorm
from .module import Module
from .transformer_decoder_layer import TransformerDecoderLayer
from .transformer_decoder import TransformerDecoder
from .transformer_encoder import TransformerEncoder
from .transformer_encoder_layer import TransformerEncoderLayer


class Transformer(Module):
    """An encoder-decoder Transformer with torch.nn.Transformer's names and defaults.

    src (B, M, E), tgt (B, N, E) -> (B, N, E); each stack ends with a layer norm.

    Parameters
    ----------
    d_model : int, default 512
        Width E of the tokens.
    nhead : int, default 8
        Attention heads; ``d_model`` must be a multiple of it.
    num_encoder_layers : int, default 6
        Encoder layers.
    num_decoder_layers : int, default 6
        Decoder layers.
    dim_feedforward : int, default 2048
        Width of the feed-forward blocks' hidden layers.
    dropout : float, default 0.1
        Dropout on the feed-forward hidden layers and the residual branches, in training.
    activation : str, default 'relu'
        The feed-forward activation: ``"relu"``, ``"gelu"`` or ``"silu"``.
    layer_norm_eps : float, default 1e-5
        The layer norms' epsilon.
    batch_first : bool, default True
        Must be True: tokens are (B, N, E).
    norm_first : bool, default False
        Pre-norm layers instead of post-norm.
    bias : bool, default True
        Whether the linear layers have biases.
    dtype : NumPy float type, default numpy.float32
        Type of the parameters and of the activations they produce (float32 or float64).
    seed : int, numpy.random.Generator or None, default None
        Seed of the initial weights. One Generator shared by a model's modules makes the whole
        model reproducible from one seed; None draws fresh entropy.
    """

    def __init__(self, d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6,
                 dim_feedforward=2048, dropout=0.1, activation="relu", layer_norm_eps=1e-5,
                 batch_first=True, norm_first=False, bias=True, dtype=np.float32, seed=None):
        super().__init__()
        rng = generator(seed)
        layer_args = dict(d_model=d_model, nhead=nhead, dim_feedforward=dim_feedforward,
                          dropout=dropout, activation=activation, layer_norm_eps=layer_norm_eps,
                          batch_first=batch_first, norm_first=norm_first, bias=bias, dtype=dtype)
        self.encoder = TransformerEncoder(TransformerEncoderLayer(**layer_args, seed=rng),
                                          num_encoder_layers,
                                          LayerNorm(d_model, layer_norm_eps, dtype))
        self.decoder = TransformerDecoder(TransformerDecoderLayer(**layer_args, seed=rng),
                                          num_decoder_layers,
                                          LayerNorm(d_model, layer_norm_eps, dtype))

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None,
                src_key_padding_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, src_is_causal=False, tgt_is_causal=False):
        """src (B, M, E), tgt (B, N, E) -> (B, N, E)."""
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask,
                              is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask,
                            tgt_is_causal=tgt_is_causal)
