"""The policy both downstream runs share: Best-of-N samples its answers, RL trains it and greedily answers the
held-out questions. One prompt (:data:`POLICY_SYSTEM`, :data:`POLICY_PROMPT`, :func:`policy_prompt`: the question
and the user's most relevant posts, never the rubric or the narrative), one way of sampling it
(:class:`SamplingOptions`, :data:`SAMPLING_MODES`, :func:`question_seed`) and one way of loading it
(:func:`policy_generator`: on the run's engine, device and dtype, taken whole from the run's
:class:`~prb_utils.models.ModelOptions`).

>>> POLICY_PROMPT.count("{posts}"), POLICY_PROMPT.count("{question}")
(1, 1)
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from prb_utils.errors import PRBError
from prb_utils.models import ModelOptions
from prb_utils.models.base import ModelSpec, spec_of
from prb_utils.models.kinds import CAUSAL_LM, loader_kind
from prb_utils.profile import rm_visible_fields, selected_posts
from prb_utils.schema import stable_hash

#: How the policy's answers were sampled, as ``run.json`` (``sampling``) names it and pages say it.
SAMPLING_MODES = {
    "batched": "several questions sampled together (in process: one generate call, as many as the token budget "
               "takes; on a server: many requests in flight, each seeded by its question): fast, but a question's "
               "answers can depend on the questions sampled beside it",
    "exact": "each question sampled on its own, seeded by its id (--exact-sampling): its answers depend only on it, "
             "the policy, N, the options and the seed, whatever ran before or beside it",
}
POLICY_SYSTEM = "You are a helpful assistant who writes personalized answers."
POLICY_PROMPT = """Answer the question below so that it suits this particular user. Their earlier posts \
show their interests, constraints and preferred style: use what is relevant, and do not mention that you \
read them. Keep the answer under 100 words.

The user's earlier posts:
{posts}

Question:
{question}"""


@dataclass(frozen=True)
class SamplingOptions:
    """How the policy writes its answers: ``n_samples`` per question, seeing the question and its user's
    ``policy_posts`` most relevant posts. ``exact``: each question sampled on its own (:data:`SAMPLING_MODES`),
    ``batch_questions`` questions between two writes of the cache; otherwise the engine's generator groups the
    questions (:meth:`~prb_utils.models.generation.ChatGeneration.sampling_groups`) and the cache is written
    after each group."""

    policy: str = "smollm2"
    n_samples: int = 8
    max_new_tokens: int = 80
    temperature: float = 1.0
    top_p: float = 0.9
    policy_posts: int = 5
    batch_questions: int = 8
    exact: bool = False

    @property
    def mode(self) -> str:
        """``exact`` or ``batched`` (:data:`SAMPLING_MODES`)."""
        return "exact" if self.exact else "batched"

    def __post_init__(self) -> None:
        if self.n_samples < 1:
            raise PRBError(f"n_samples must be at least 1, got {self.n_samples}.")
        if self.batch_questions < 1:
            raise PRBError(f"batch_questions must be at least 1, got {self.batch_questions}.")


def policy_prompt(record: dict[str, Any], *, posts: int = 5) -> str:
    """The policy's user message: the instruction, the ``posts`` most relevant profile posts, the question."""

    question, all_posts = rm_visible_fields(record)
    chosen = selected_posts(record, f"top{posts}") if posts > 0 else []
    lines = [f"- [{all_posts[i][0]}] {all_posts[i][1]}" if all_posts[i][0] else f"- {all_posts[i][1]}"
             for i in chosen]
    return POLICY_PROMPT.format(posts="\n".join(lines) or "(none)", question=question)


def question_seed(seed: int, subset: str, qid: str) -> int:
    """The sampling seed of one question: a stable hash of ``seed`` and the question's subset and id, so that
    its answers never depend on the questions sampled before or beside it.

    >>> question_seed(0, "Travel", "q1") == question_seed(0, "Travel", "q1") != question_seed(1, "Travel", "q1")
    True
    >>> 0 <= question_seed(5, "Travel", "q1") < 2**32
    True
    """
    return int(stable_hash([int(seed), str(subset), str(qid)], length=8), 16)


def policy_spec(policy: str) -> ModelSpec:
    """The policy as a model spec of the causal-LM kind (:data:`prb_utils.models.kinds.CAUSAL_LM`), for its
    fingerprint and loading.

    >>> policy_spec("smollm2").name
    'smollm2'
    """
    return spec_of(CAUSAL_LM, policy)


def policy_placement(options: ModelOptions) -> dict[str, str]:
    """The device type and dtype the policy runs with under ``options``
    (:meth:`~prb_utils.models.ModelOptions.placement`: ``server`` on a server engine), for cache keys and run
    records.

    >>> policy_placement(ModelOptions(device="cpu", dtype="bfloat16"))
    {'device': 'cpu', 'dtype': 'bfloat16'}
    """
    return options.placement(loader_kind(CAUSAL_LM))


def policy_generator(policy: str, options: ModelOptions, *, out: str | os.PathLike = ".", progress: bool = False,
                     **generator_options: Any) -> Any:
    """A chat generator of ``policy`` on ``options``' engine, device and dtype
    (:meth:`~prb_utils.models.engines.EngineConfig.chat_generator`); PRBError when the policy has no chat
    template (Best-of-N and RL need an instruct model)."""
    engine = options.engine.for_run(out, progress=progress)
    generator = engine.chat_generator(policy, device=options.device, dtype=options.dtype, **generator_options)
    if not getattr(generator.tokenizer, "chat_template", None):
        raise PRBError(f"The policy '{policy}' has no chat template; Best-of-N and RL need a chat (instruct) model.")
    return generator
