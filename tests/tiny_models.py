"""Tiny random models and a word-level tokenizer, built in code for tests (no network, well under 2 s).

Each ``build_*`` function writes a folder with ``save_pretrained`` and returns its path, so specs such as
``classifier:<folder>`` load it through the normal code path.
"""

from __future__ import annotations

from pathlib import Path

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "<s>", "</s>", "<|user|>", "<|assistant|>", "<|system|>",
            "<|end|>"]
CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|> {{ m['content'] }} <|end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)
WORDS = (
    "A B a an the and or but of to in on for with at by from is are was be it this that these those "
    "i you he she we they user users question questions answer answers response responses request asked "
    "before help helpful prefer would which one line exactly reply result Result assistant assistants "
    "two same both good general decide when shows use infer background needs tastes fits them there here "
    "camera photo photos settings sharp kids indoors beginner simple steps plain language jargon tonight "
    "cook cooking pan eggs cheap nonstick travel budget train bus city trip law rent lease anime music "
    "guitar song songs practice daily minutes short long list first then after use try keep make take "
    "shutter speed fast light lamp window iso auto mode dial press button buttons manual guide "
    "User Assistant Request Response Which THIS ** : . , ? ! - [ ] ( ) \" ' 0 1 2 3 4 5 6 7 8 9"
).split()


def build_tokenizer(path: str | Path, *, chat_template: bool | None = None, encoder: bool = False,
                    add_bos: bool = False, template_bos: bool = False):
    """A word-level PreTrainedTokenizerFast (pad ``[PAD]``); ``encoder=True`` wraps inputs in [CLS] ... [SEP],
    like BERT. ``chat_template`` defaults to True for decoders and False for encoders (the prompts fallback).
    ``add_bos``: the tokenizer puts ``<s>`` before every text; ``template_bos``: the chat template writes ``<s>``
    itself (Llama-3 style; with ``add_bos`` too, a text tokenized with special tokens gets two)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    raw = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    raw.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.WordLevelTrainer(special_tokens=SPECIALS, min_frequency=1)
    raw.train_from_iterator([" ".join(WORDS)] * 2, trainer=trainer)
    kwargs = {"pad_token": "[PAD]", "unk_token": "[UNK]"}
    if encoder:
        raw.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]",
            special_tokens=[("[CLS]", raw.token_to_id("[CLS]")), ("[SEP]", raw.token_to_id("[SEP]"))])
        kwargs.update(cls_token="[CLS]", sep_token="[SEP]")
    else:
        kwargs.update(bos_token="<s>", eos_token="</s>")
        if add_bos:
            raw.post_processor = processors.TemplateProcessing(
                single="<s> $A", pair="<s> $A $B", special_tokens=[("<s>", raw.token_to_id("<s>"))])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=raw, model_max_length=256, **kwargs)
    if chat_template if chat_template is not None else not encoder:
        tokenizer.chat_template = ("<s>" if template_bos else "") + CHAT_TEMPLATE
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(str(path))
    return tokenizer


def _llama_config(tokenizer, **extra):
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
        pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.convert_tokens_to_ids("<s>"),
        eos_token_id=tokenizer.convert_tokens_to_ids("</s>"), tie_word_embeddings=False, **extra,
    )


def build_causal_lm(path: str | Path, *, seed: int = 0, chat_template: bool = True, nan: bool = False,
                    **tokens: bool) -> Path:
    """A tiny random LlamaForCausalLM (``nan=True``: every weight NaN; ``tokens``: as for
    :func:`build_sequence_classifier`)."""
    import torch
    from transformers import LlamaForCausalLM

    path = Path(path)
    tokenizer = build_tokenizer(path, chat_template=chat_template, **tokens)
    torch.manual_seed(seed)
    model = LlamaForCausalLM(_llama_config(tokenizer))
    if nan:
        _fill_nan(model)
    model.save_pretrained(str(path))
    return path


def build_sequence_classifier(path: str | Path, *, seed: int = 0, nan: bool = False, **tokens: bool) -> Path:
    """A tiny random LlamaForSequenceClassification with one logit (``tokens``: :func:`build_tokenizer`'s
    ``add_bos``/``template_bos``)."""
    import torch
    from transformers import LlamaForSequenceClassification

    path = Path(path)
    tokenizer = build_tokenizer(path, **tokens)
    torch.manual_seed(seed)
    model = LlamaForSequenceClassification(_llama_config(tokenizer, num_labels=1))
    if nan:
        _fill_nan(model)
    model.save_pretrained(str(path))
    return path


def build_bert(path: str | Path, *, seed: int = 0, nan: bool = False) -> Path:
    """A tiny random BertModel with a [CLS]/[SEP] tokenizer and no chat template (for ``embedding:``)."""
    import torch
    from transformers import BertConfig, BertModel

    path = Path(path)
    tokenizer = build_tokenizer(path, encoder=True)
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                        num_attention_heads=4, max_position_embeddings=128, pad_token_id=tokenizer.pad_token_id)
    model = BertModel(config)
    if nan:
        _fill_nan(model)
    model.save_pretrained(str(path))
    return path


def build_bert_classifier(path: str | Path, *, seed: int = 0, chat_template: bool = True) -> Path:
    """A tiny random BertForSequenceClassification (one logit) whose [CLS]/[SEP] tokenizer has a chat template."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    path = Path(path)
    tokenizer = build_tokenizer(path, encoder=True, chat_template=chat_template)
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                        num_attention_heads=4, max_position_embeddings=128, pad_token_id=tokenizer.pad_token_id,
                        num_labels=1)
    BertForSequenceClassification(config).save_pretrained(str(path))
    return path


def _fill_nan(model) -> None:
    import torch

    with torch.no_grad():
        for parameter in model.parameters():
            parameter.fill_(float("nan"))
