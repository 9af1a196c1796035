"""The task model a config describes: ``build(adapter.model_config(task=...))``.

Adapters return the config of the model that reads their batches (a TokenModelConfig for a value
per token, a SequenceModelConfig for one per sample, a GraphModelConfig, a MoleculeModelConfig);
``build`` makes that model, so a user never picks the class by hand."""
from .complex import ComplexModel, ComplexModelConfig
from .graph import GraphModel, GraphModelConfig
from .molecule import MoleculeModel, MoleculeModelConfig
from .seq2seq import Seq2SeqConfig, Seq2SeqModel
from .sequence_model import SequenceModel, SequenceModelConfig
from .token_model import TokenModel, TokenModelConfig

# Most specific first: GraphModelConfig and the others derive from EncoderConfig.
MODELS = ((ComplexModelConfig, ComplexModel), (GraphModelConfig, GraphModel),
          (MoleculeModelConfig, MoleculeModel),
          (Seq2SeqConfig, Seq2SeqModel), (SequenceModelConfig, SequenceModel),
          (TokenModelConfig, TokenModel))


def build(config):
    """The model for `config` (one of the task model configs).

    Parameters
    ----------
    config : dataclass
        A task model config (TokenModelConfig, SequenceModelConfig, Seq2SeqConfig,
        GraphModelConfig, MoleculeModelConfig or ComplexModelConfig): what
        ``adapter.model_config(...)`` returns, or one built by hand.

    Returns
    -------
    seqattn.nn.Module
        The model of that config's class, e.g. a :class:`TokenModel` for a
        :class:`TokenModelConfig`.
    """
    for config_class, model_class in MODELS:
        if isinstance(config, config_class):
            return model_class(config)
    known = ", ".join(c.__name__ for c, _ in MODELS)
    raise TypeError(f"config is a {type(config).__name__}; expected one of {known} (what "
                    "adapter.model_config(...) returns)")
