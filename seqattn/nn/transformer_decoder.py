"""A stack of decoder layers with an optional final norm (torch names: layers.0..., norm)."""
import copy

from .containers import ModuleList
from .dropout import reseed_dropouts
from .module import Module


class TransformerDecoder(Module):
    """A stack of ``num_layers`` copies of a decoder layer, optionally followed by a norm.

    tgt (B, N, E), memory (B, M, E) -> (B, N, E). ``backward`` returns (dtgt, dmemory), the
    memory gradients of all layers summed (every layer reads the memory).

    Parameters
    ----------
    decoder_layer : TransformerDecoderLayer
        The layer to copy.
    num_layers : int
        How many copies.
    norm : Module, optional
        Applied to the last layer's output.
    """

    def __init__(self, decoder_layer, num_layers, norm=None):
        super().__init__()
        layers = [copy.deepcopy(decoder_layer) for _ in range(num_layers)]
        for i, layer in enumerate(layers):
            reseed_dropouts(layer, i)
        self.layers = ModuleList(layers)
        self.norm = norm

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=False, caches=None):
        """``caches``: one (self-attention, memory) :class:`KeyValueCache` pair per layer, for
        decoding one position at a time."""
        x = tgt
        for i, layer in enumerate(self.layers):
            x = layer(x, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                      tgt_key_padding_mask=tgt_key_padding_mask,
                      memory_key_padding_mask=memory_key_padding_mask,
                      tgt_is_causal=tgt_is_causal, cache=None if caches is None else caches[i])
        return x if self.norm is None else self.norm(x)
