"""help() on a task model's config shows every field with its type, default and meaning,
including the fields it inherits from EncoderConfig (issue 40: the field docs lived on another
class, and help() showed only the generated signature)."""
import pydoc

from seqattn.models import (EncoderConfig, GraphModelConfig, Seq2SeqConfig, SequenceModelConfig,
                            TokenModelConfig)
from seqattn.models.encoder import parameter_entries


def help_text(cls):
    return pydoc.render_doc(cls, renderer=pydoc.plaintext)


def test_every_encoder_field_is_documented():
    entries = parameter_entries(EncoderConfig.__doc__)
    fields = list(EncoderConfig.__dataclass_fields__)
    assert list(entries) == fields
    assert all(kind and description for kind, description in entries.values())


def test_a_subclass_shows_the_inherited_fields_with_their_docs():
    for config in (TokenModelConfig, SequenceModelConfig, GraphModelConfig, Seq2SeqConfig):
        text = help_text(config)
        assert "Other Parameters" in text, config
        assert "d_model : int, default 64" in text, config
        assert "Width E of every token inside the encoder." in text, config
        listed = {line.partition(" : ")[0] for line in config.__doc__.splitlines()
                  if " : " in line and not line.startswith(" ")}
        assert set(config.__dataclass_fields__) <= listed, config

def test_an_overridden_default_is_the_subclass_default():
    """GraphModelConfig sets positions to "none": its help must not say 'sinusoidal'."""
    assert "positions : str, default 'none'" in GraphModelConfig.__doc__
    assert "positions : str, default 'sinusoidal'" in EncoderConfig.__doc__


def test_a_subclass_keeps_its_own_parameter_docs():
    own = parameter_entries(Seq2SeqConfig.__doc__)
    assert list(own) == ["target_features", "target_vocab_size", "num_decoder_layers",
                         "start_id"]
    assert own["start_id"][1] == ["    The id that starts every discrete target sequence."]
