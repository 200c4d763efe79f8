"""Configuration of a `tda` GPT-2 export (model_type "tda_gpt2").

Holds the `model` block of the training config flat (n_layer, d_model, ...), the whole
`attention` block as a dict, the layer layout the C++ variant declares (`attention_layout`), and the optimizer `step` of the checkpoint (the `dex` mechanism
anneals its lambda with it). `transformers` is optional: without it the class is a plain
attribute bag with the same constructor, so `modeling_tda.load(dir)` works on torch alone.
"""

try:
    from transformers import PretrainedConfig as _Base

    _HAVE_HF = True
except ImportError:  # plain-PyTorch use
    _HAVE_HF = False

    class _Base:  # minimal stand-in for PretrainedConfig
        model_type = ""

        def __init__(self, **kwargs):
            for k, v in kwargs.items():
                setattr(self, k, v)

        def to_dict(self):
            return dict(self.__dict__)


class TdaConfig(_Base):
    model_type = "tda_gpt2"
    # HF-generic names some tools read (lm-eval reads max_length-like fields).
    attribute_map = {
        "hidden_size": "d_model",
        "num_hidden_layers": "n_layer",
        "num_attention_heads": "n_head",
        "max_position_embeddings": "seq_len",
    }

    def __init__(self, n_layer=12, d_model=768, n_head=12, seq_len=1024, vocab_size=50304,
                 real_vocab_size=50257, rope_theta=10000.0, rope_ntk_factor=1.0, norm_eps=1e-5,
                 attention=None, attention_layout=None, step=0, **kwargs):
        self.n_layer = n_layer
        self.d_model = d_model
        self.n_head = n_head
        self.seq_len = seq_len
        self.vocab_size = vocab_size
        self.real_vocab_size = real_vocab_size
        self.rope_theta = rope_theta
        self.rope_ntk_factor = rope_ntk_factor
        self.norm_eps = norm_eps
        # `tda export` writes the resolved block: every option of every kind with its value
        # (src/core/config.cpp builds the defaults from the kinds' declarations).
        att = {"kind": "softmax"}
        att.update(attention or {})
        self.attention = att
        # {"proj_width": rows of c_attn, "params": [{"name", "shape", "init"}]}: one layer's
        # tensors as the C++ variant declares them (src/eval/export_hf.cpp writes it).
        self.attention_layout = attention_layout
        self.step = step
        if _HAVE_HF:
            kwargs.setdefault("tie_word_embeddings", False)
        super().__init__(**kwargs)
