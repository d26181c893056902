"""Model kinds as records with their traits: the one place a kind (the ``KIND`` of ``KIND:NAME``) is described.

Every question prb asks of a kind (does it compare both answers in one call? does it run a model at all? does
it render a chat template? which options and which adapter does it take?) is a trait of its
:class:`ModelKind` record in :data:`MODEL_KINDS`; nothing else tests a kind by its name. A new kind is its
adapter module and one record here; a server engine that also runs it lists its adapter in its own record
(:data:`prb_utils.models.engines.ENGINES`).

>>> MODEL_KINDS["judge"].pairwise, MODEL_KINDS["length"].weights
(True, False)
>>> [k.name for k in MODEL_KINDS.values() if k.quick]
['embedding', 'length', 'lexical']
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from prb_utils.errors import PRBError

#: What a kind's weights are: aliases and loaders ask for an architecture, never for a kind's name.
CAUSAL_LM, SEQUENCE_CLASSIFIER, ENCODER = "causal_lm", "sequence_classifier", "encoder"
ARCHITECTURES = (CAUSAL_LM, SEQUENCE_CLASSIFIER, ENCODER)

#: The :class:`~prb_utils.models.registry.ModelOptions` every adapter of a model with weights takes.
WEIGHT_OPTIONS = ("device", "dtype", "batch_tokens", "seed", "allow_untrained_head", "attention")
#: ... and those of a kind that renders a chat template and runs a decoder (prompt cache, special tokens).
CHAT_OPTIONS = (*WEIGHT_OPTIONS, "kv_reuse", "tokenization")


@dataclass(frozen=True)
class ModelKind:
    """One kind of reward model and its traits.

    ``adapter`` (and ``counter``) name a class as ``module:Class``, imported when a model of the kind is loaded
    (or counted), so reading the records loads no adapter. ``options``: the fields of
    :class:`~prb_utils.models.registry.ModelOptions` its adapters take, as keywords of the same names.
    """

    name: str
    help: str
    adapter: str
    options: tuple[str, ...] = ()
    pairwise: bool = False   # one call compares both answers: BoN and GRPO compare their answers in pairs
    judge_options: bool = False   # --judge-mode and --judge-template apply (and go into its job key)
    architecture: str | None = None   # what its weights are (ARCHITECTURES); None for the model-free baselines
    weights: bool = True     # False: a model-free baseline (no placement, seed, fingerprint or alias)
    chat_template: bool = False   # renders the model's chat template: --tokenization applies
    quick: bool = False      # scores the shipped sample in seconds on a CPU (prb report draws its profile curve)
    counter: str | None = None   # the weightless token counter of ``prb plan`` (None: no model, no tokens)
    model_type: str = "Baseline"   # reward-bench's model type, in ``prb export --format rewardbench``
    reads_profile: bool = True   # False: the profile never reaches its score (no lift, ablation or oracle to show)

    @property
    def label(self) -> str:
        """How tables group the kind: ``baseline`` for the model-free ones, else its name."""
        return self.name if self.weights else "baseline"

    def load_adapter(self) -> Callable[..., Any]:
        """The adapter class of this kind in this process."""
        return load_class(self.adapter)


def load_class(path: str) -> Any:
    """The object named ``module:attribute``.

    >>> load_class("prb_utils.models.baselines:LengthBaseline").method
    'length:characters.v1'
    """
    module, _, attribute = path.partition(":")
    return getattr(importlib.import_module(module), attribute)


MODEL_KINDS: dict[str, ModelKind] = {kind.name: kind for kind in (
    ModelKind("classifier", "sequence-classification reward model; score = single logit (or softmax of the last "
              "class)", "prb_utils.models.classifier:ClassifierRM", CHAT_OPTIONS, chat_template=True,
              architecture=SEQUENCE_CLASSIFIER,
              counter="prb_utils.models.token_counts:ClassifierTokens", model_type="Seq. Classifier"),
    ModelKind("judge", "causal LM comparing both responses, both A/B orders; P(A) vs P(B) or generate + parse",
              "prb_utils.models.judge:JudgeRM", (*CHAT_OPTIONS, "judge_mode", "judge_template"), pairwise=True,
              judge_options=True, architecture=CAUSAL_LM,
              chat_template=True, counter="prb_utils.models.token_counts:JudgeTokens", model_type="Generative"),
    ModelKind("implicit", "causal LM; score = mean token log-prob of the response given the prompt",
              "prb_utils.models.implicit:ImplicitRM", CHAT_OPTIONS, chat_template=True, architecture=CAUSAL_LM,
              counter="prb_utils.models.token_counts:ImplicitTokens", model_type="Implicit (log-likelihood)"),
    ModelKind("embedding", "encoder; score = cosine similarity of RM input and response (mean pooling)",
              "prb_utils.models.embedding:EmbeddingRM", WEIGHT_OPTIONS, quick=True, architecture=ENCODER,
              counter="prb_utils.models.token_counts:EmbeddingTokens", model_type="Embedding similarity"),
    ModelKind("length", "baseline: the longer response wins (characters)",
              "prb_utils.models.baselines:LengthBaseline", weights=False, quick=True, reads_profile=False),
    ModelKind("lexical", "baseline: the response sharing more of the RM input's content words wins",
              "prb_utils.models.baselines:LexicalBaseline", weights=False, quick=True),
)}

def kind_names() -> tuple[str, ...]:
    """The kinds' names, in the order ``prb models`` lists them (read from the records each time, so a kind
    registered later is there too)."""
    return tuple(MODEL_KINDS)


def baseline_names() -> tuple[str, ...]:
    """The model-free kinds (no weights).

    >>> baseline_names()
    ('length', 'lexical')
    """
    return tuple(name for name, kind in MODEL_KINDS.items() if not kind.weights)


def kinds_of(architecture: str) -> tuple[str, ...]:
    """The kinds whose weights are of ``architecture`` (:data:`ARCHITECTURES`), in record order: the first is how a
    loader names a model of that architecture (a Best-of-N policy, an LLM judge, an encoder).

    >>> kinds_of(CAUSAL_LM), kinds_of(ENCODER)
    (('judge', 'implicit'), ('embedding',))
    """
    if architecture not in ARCHITECTURES:
        raise PRBError(f"Unknown architecture {architecture!r}; use one of {', '.join(ARCHITECTURES)}.")
    return tuple(name for name, kind in MODEL_KINDS.items() if kind.architecture == architecture)


def loader_kind(architecture: str) -> str:
    """The kind a model of ``architecture`` that is no reward model is loaded, fingerprinted and placed as (a
    Best-of-N policy, an LLM judge, a dense retriever's or the proxy judge's encoder): the first of
    :func:`kinds_of`, so its alias resolution and its engine (a server that serves the kind serves it too) are
    that kind's.

    >>> loader_kind(CAUSAL_LM), loader_kind(ENCODER)
    ('judge', 'embedding')
    """
    return kinds_of(architecture)[0]


def model_kind(name: str) -> ModelKind:
    """The record of the kind ``name``; PRBError naming the kinds for another.

    >>> model_kind("judge").pairwise
    True
    """
    try:
        return MODEL_KINDS[name]
    except KeyError:
        raise PRBError(f"Unknown model kind '{name}'; use one of {', '.join(kind_names())}.") from None
