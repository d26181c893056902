"""Reward-model adapters: one module per kind, a registry of ``KIND:NAME`` specs, offline aliases.

>>> from prb_utils.models import load_model, PairInput
>>> load_model("lexical").score_pairs([PairInput("k", "cheap pans", "a cheap pan", "a wok")])[0].score_chosen
0.5
"""

from prb_utils.models.base import ModelSpec, PairInput, PairScore, RewardModel, parse_spec
from prb_utils.models.engines import ENGINES, EngineConfig
from prb_utils.models.kinds import MODEL_KINDS, kind_names
from prb_utils.models.registry import ModelOptions, list_models, load_model

__all__ = ["ENGINES", "MODEL_KINDS", "kind_names", "EngineConfig", "ModelOptions", "ModelSpec", "PairInput", "PairScore",
           "RewardModel", "list_models", "load_model", "parse_spec"]
