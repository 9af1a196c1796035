"""Per token: a linear model on the token's own inputs (N -> N regression or labelling).

The features are exactly what the model reads for the token (every channel of ``tokens``:
values, validity and calendar channels; integer ids one-hot), so this is the function class of
the task model's linear path (``TokenModelConfig(linear=True)``) and can start it
(:func:`seqattn.baselines.warm_start`).
"""
from .linear import LinearBaseline, token_inputs, vocab_size_of


class TokenFeatures(LinearBaseline):
    kind = "token"

    def prepare(self, train):
        self.vocab_size = vocab_size_of(train)

    def features(self, batch):
        return token_inputs(batch, self.vocab_size)
