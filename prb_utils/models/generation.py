"""Chat generation with a causal LM (transformers): the BoN policy and the LLM rubric judge.

``ChatGenerator(name)`` takes an offline alias (``smollm2``), a local folder or a hub id. Generation is
batched with left padding; sampling is seeded per call (``seed``), so the same call gives the same text on
the same machine and library versions.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from prb_utils.errors import PRBError
from prb_utils.models.base import spec_of
from prb_utils.models.batching import BudgetBatcher, token_budget_batches
from prb_utils.models.device import configure_threads, resolve_placement
from prb_utils.models.hf import (
    DEFAULT_BATCH_TOKENS,
    load_pretrained,
    load_tokenizer,
    newly_initialized,
    resolve_source,
)
from prb_utils.models.kinds import CAUSAL_LM, kind_names
from prb_utils.models.lm import DecoderRunner, Group, lm_logits
from prb_utils.schema import stable_hash

GENERATIVE_ARCHITECTURES = ("ForCausalLM", "LMHeadModel", "ForConditionalGeneration")


def together_seed(seeds: Sequence[int]) -> int:
    """The one seed of a generation call that samples several messages together: a stable hash of their own
    seeds, in order (the same messages in the same order get the same seed on every run).

    >>> together_seed([1, 2]) == together_seed([1, 2]) != together_seed([2, 1])
    True
    >>> 0 <= together_seed([7]) < 2**32
    True
    """
    return int(stable_hash([int(s) for s in seeds], length=8), 16)


def check_causal_lm(name: str, *, given: str | None = None, option: str | None = None) -> None:
    """PRBError, in one sentence and before anything is loaded, when the model ``name`` names (alias, folder
    or hub id) is declared in its config as something other than a generative LM: a reward model
    (``...ForSequenceClassification``) or a bare encoder would sample or judge from a random head. A config
    that declares no architecture is let through (the weights are checked when they load). Messages name
    the model as ``given`` (what the user wrote; default ``name``). ``option`` (``--policy``): the option that
    takes a model's name alone, named when it is given a reward-model spec (``implicit:smollm2``)."""
    from transformers import AutoConfig

    kind, colon, rest = name.partition(":")
    if option and colon and kind in kind_names() and rest and not Path(name).expanduser().exists():
        raise PRBError(f"{option} takes a model's name (an alias, folder or hub id), not a reward-model spec: "
                       f"give {option} {rest}, not {option} {name}.")

    spec = spec_of(CAUSAL_LM, name, given or name)
    config = load_pretrained(spec, resolve_source(spec), AutoConfig.from_pretrained)
    declared = list(getattr(config, "architectures", None) or [])
    if declared and not any(a.endswith(GENERATIVE_ARCHITECTURES) for a in declared):
        raise PRBError(f"Model '{spec.canonical}' is a {declared[0]}, not a causal language model: it cannot "
                       "sample answers or judge them; give a chat (instruct) model.")


class ChatGeneration:
    """What the chat generators of every engine share (:class:`ChatGenerator` in process,
    :class:`~prb_utils.models.serve.connection.ServedChatGenerator` on a server): the chat rendering, and
    :meth:`sample_n` and :meth:`sample_each` over the engine's own ``sample_batch``."""

    tokenizer: Any

    def render(self, user: str, system: str | None) -> str:
        messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": user}]
        if getattr(self.tokenizer, "chat_template", None):
            return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        return (f"{system}\n\n" if system else "") + f"User: {user}\nAssistant:"

    def sample_n(self, user: str, n: int, *, system: str | None = None, max_new_tokens: int = 128,
                 temperature: float = 1.0, top_p: float = 0.9, seed: int = 0) -> list[str]:
        """``n`` sampled replies to one user message (:meth:`sample_batch` with one message)."""
        return self.sample_batch([user], n, system=system, max_new_tokens=max_new_tokens, temperature=temperature,
                                 top_p=top_p, seed=seed)[0]

    def sample_each(self, users: Sequence[str], n: int, *, seeds: Sequence[int], system: str | None = None,
                    max_new_tokens: int = 128, temperature: float = 1.0, top_p: float = 0.9) -> list[list[str]]:
        """``n`` sampled replies to each user message, each message seeded on its own (``seeds``): a message's
        replies depend only on it, ``n``, the options and its seed, never on the messages beside it. In process
        that means one :meth:`sample_batch` call per message (a padded batch is not bit-stable); on a server, one
        request after the other (requests in flight together are batched by the server, and a batched forward
        pass is not bit-stable either)."""
        if len(seeds) != len(users):
            raise PRBError(f"sample_each needs one seed per message, got {len(seeds)} for {len(users)}.")
        return [self.sample_batch([user], n, system=system, max_new_tokens=max_new_tokens, temperature=temperature,
                                  top_p=top_p, seed=int(one))[0] for user, one in zip(users, seeds, strict=True)]

    def sampling_groups(self, users: Sequence[str], *, system: str | None = None, max_new_tokens: int = 128,
                        batch_tokens: int | None = None) -> list[list[int]]:
        """Which messages (indices into ``users``) :meth:`sample_together` samples in one call; here each alone
        (an engine's generator plans bigger groups)."""
        return [[i] for i in range(len(users))]

    def sample_together(self, users: Sequence[str], n: int, *, seeds: Sequence[int], system: str | None = None,
                        max_new_tokens: int = 128, temperature: float = 1.0, top_p: float = 0.9,
                        on_step: Callable[[], None] | None = None) -> list[list[str]]:
        """``n`` sampled replies to each user message, the messages sampled together (one group of
        :meth:`sampling_groups`), which is fast; a message's replies may depend on the messages beside it (for
        replies that never do, :meth:`sample_each`). Here: one :meth:`sample_batch` call seeded by
        :func:`together_seed` of ``seeds``, ``on_step()`` after each decoding step (a progress bar's tick)."""
        if len(seeds) != len(users):
            raise PRBError(f"sample_together needs one seed per message, got {len(seeds)} for {len(users)}.")
        return self.sample_batch(users, n, system=system, max_new_tokens=max_new_tokens, temperature=temperature,
                                 top_p=top_p, seed=together_seed(seeds), on_step=on_step)

    def sample_batch(self, users: Sequence[str], n: int, *, system: str | None = None, max_new_tokens: int = 128,
                     temperature: float = 1.0, top_p: float = 0.9, seed: int = 0,
                     on_step: Callable[[], None] | None = None) -> list[list[str]]:
        raise NotImplementedError   # pragma: no cover - every engine's generator defines it


class ChatGenerator(ChatGeneration):
    """Generate replies to chat messages with a causal LM.

    ``generate(users, system=..., max_new_tokens=..., temperature=0 (greedy) or >0, top_p, seed,
    num_return_sequences)`` returns, per user message, a list of ``num_return_sequences`` replies.
    """

    def __init__(self, name: str, *, device: str = "auto", dtype: str = "auto", batch_size: int = 8) -> None:
        from transformers import AutoModelForCausalLM


        spec = spec_of(CAUSAL_LM, name)
        self.name = name
        self.source = resolve_source(spec)
        self.placement = resolve_placement(device, dtype)
        if self.placement.device == "cpu":
            configure_threads()
        check_causal_lm(name)
        self.tokenizer = load_tokenizer(spec, self.source)
        self.tokenizer.padding_side = "left"
        self.model, info = load_pretrained(spec, self.source, AutoModelForCausalLM.from_pretrained,
                                           dtype=self.placement.dtype, device_map=self.placement.device_map,
                                           output_loading_info=True)
        untrained = newly_initialized(info)
        if untrained:
            raise PRBError(f"Model '{name}' is not a causal language model checkpoint: loading it as one leaves "
                           f"{', '.join(untrained[:3])}{' and more' if len(untrained) > 3 else ''} newly initialised "
                           "at random; give a chat (instruct) model.")
        self.model.eval()
        self.batch_size = int(batch_size)

    def next_token_probabilities(self, groups: Sequence[Sequence[Sequence[int]]],
                                 candidates: Sequence[Sequence[int]], *,
                                 batch_tokens: int | None = None) -> list[list[tuple[float, ...]]]:
        """Per group of prompts (token ids), per prompt, the probability that the next token is one of each
        candidate set's ids; the prefix a group's prompts share runs once, on the prompt cache
        (:class:`~prb_utils.models.lm.DecoderRunner`, ``batch_tokens`` tokens a batch)."""
        import torch

        budget = batch_tokens or DEFAULT_BATCH_TOKENS.get(self.placement.device.split(":")[0], 4096)
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        runner = DecoderRunner(self.model, pad_id=pad, batcher=BudgetBatcher(budget))

        def probabilities(group: Group, hidden: list[Any]) -> list[tuple[float, ...]]:
            logp = torch.log_softmax(lm_logits(self.model, torch.stack([h[-1] for h in hidden])), dim=-1)
            per = torch.stack([torch.logsumexp(logp[:, list(ids)], dim=-1) for ids in candidates], dim=-1).exp()
            return [tuple(row) for row in per.tolist()]

        packed = [Group(tuple(tuple(p) for p in group), tuple(len(p) - 1 for p in group)) for group in groups]
        return runner.hidden(packed, reduce=probabilities)

    def sampling_groups(self, users: Sequence[str], *, system: str | None = None, max_new_tokens: int = 128,
                        batch_tokens: int | None = None) -> list[list[int]]:
        """Messages sampled in one ``generate`` call by :meth:`sample_together`: packed, longest first, under a
        budget of ``batch_tokens`` padded tokens (default the device's scoring budget, 4,096 on a CPU) where a
        message costs its prompt plus ``max_new_tokens``: each prompt is encoded once whatever ``n`` is, so the
        budget bounds the prefill and the length of every decoded row, not their number (``len(group) * n``).

        >>> from types import SimpleNamespace
        >>> fake = SimpleNamespace(render=lambda u, s: u, tokenizer=lambda t, **_: {"input_ids": t.split()},
        ...                        placement=SimpleNamespace(device="cpu"))
        >>> ChatGenerator.sampling_groups(fake, ["a b", "a", "a b c"], max_new_tokens=1, batch_tokens=8)
        [[2, 0], [1]]
        """
        lengths = [len(self.tokenizer(self.render(u, system), add_special_tokens=False)["input_ids"]) + max_new_tokens
                   for u in users]
        budget = batch_tokens or DEFAULT_BATCH_TOKENS.get(self.placement.device.split(":")[0], 4096)
        return token_budget_batches(lengths, budget=int(budget))

    def metadata(self) -> dict[str, Any]:
        template = getattr(self.tokenizer, "chat_template", None) or ""
        return {"generator": self.name, "source": self.source, "device": self.placement.device,
                "dtype": str(self.placement.dtype).replace("torch.", ""),
                "chat_template_hash": stable_hash(str(template))}

    def generate(
        self,
        users: Sequence[str],
        *,
        system: str | None = None,
        max_new_tokens: int = 128,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int = 0,
        num_return_sequences: int = 1,
    ) -> list[list[str]]:
        import torch

        if temperature < 0:
            raise PRBError(f"temperature must be >= 0, got {temperature}.")
        device = self.model.device
        out: list[list[str]] = []
        per_batch = max(1, self.batch_size // max(1, num_return_sequences))
        for start in range(0, len(users), per_batch):
            chunk = [self.render(u, system) for u in users[start:start + per_batch]]
            enc = self.tokenizer(chunk, return_tensors="pt", padding=True, add_special_tokens=False).to(device)
            kwargs: dict[str, Any] = {"max_new_tokens": int(max_new_tokens),
                                      "pad_token_id": self.tokenizer.pad_token_id,
                                      "num_return_sequences": int(num_return_sequences)}
            if temperature > 0:
                kwargs.update(do_sample=True, temperature=float(temperature), top_p=float(top_p))
            else:
                kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
            torch.manual_seed(int(seed) + start)
            with torch.no_grad():
                ids = self.model.generate(**enc, **kwargs)
            new = ids[:, enc["input_ids"].shape[1]:]
            texts = self.tokenizer.batch_decode(new, skip_special_tokens=True)
            for i in range(len(chunk)):
                group = texts[i * num_return_sequences:(i + 1) * num_return_sequences]
                out.append([t.strip() for t in group])
        return out

    def sample_batch(
        self,
        users: Sequence[str],
        n: int,
        *,
        system: str | None = None,
        max_new_tokens: int = 128,
        temperature: float = 1.0,
        top_p: float = 0.9,
        seed: int = 0,
        on_step: Callable[[], None] | None = None,
    ) -> list[list[str]]:
        """``n`` sampled replies to each user message, all in one ``generate`` call (``on_step()`` after each
        decoding step: a progress bar's tick; it changes no reply).

        The messages are left-padded into one batch; each prompt is encoded once (one prefill row per
        message, not ``n``) and its KV cache is repeated for the ``n`` sequences, which then decode together
        (``len(users) * n`` rows per step). The text is what ``generate(users, num_return_sequences=n)`` gives
        for the same batch and seed, without the ``n``-fold prefill. Seeded per call: the same messages in
        the same order give the same replies on the same machine and library versions. A message's replies
        depend on its batch-mates (the random stream is shared, and a padded batch is not bit-stable), so
        the BoN pipeline calls this with one message at a time.
        """

        import torch

        if n < 1 or temperature <= 0:
            raise PRBError("sampling needs n >= 1 and a temperature > 0.")
        if not users:
            return []
        texts = [self.render(u, system) for u in users]
        enc = self.tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
        device = self.model.device
        ids, mask = enc["input_ids"].to(device), enc["attention_mask"].to(device)
        kwargs: dict[str, Any] = {"max_new_tokens": int(max_new_tokens), "pad_token_id": self.tokenizer.pad_token_id,
                                  "do_sample": True, "temperature": float(temperature), "top_p": float(top_p)}
        if on_step is not None:
            kwargs["stopping_criteria"] = _ticks(on_step)
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            if ids.shape[1] > 1:
                # the prompt minus its last token runs once per message; generate() feeds the last token itself
                positions = (mask.long().cumsum(-1) - 1).masked_fill(mask == 0, 0)
                prefix = self.model(ids[:, :-1], attention_mask=mask[:, :-1], position_ids=positions[:, :-1],
                                    use_cache=True, logits_to_keep=1)  # only the cache is needed, not the logits
                name = "cache" if getattr(prefix, "cache", None) is not None else "past_key_values"
                cache = getattr(prefix, name)  # transformers >= 5.x names it ``cache``
                cache.batch_repeat_interleave(n)
                kwargs[name] = cache
            torch.manual_seed(int(seed))
            out = self.model.generate(ids.repeat_interleave(n, dim=0), attention_mask=mask.repeat_interleave(n, dim=0),
                                      **kwargs)
        replies = self.tokenizer.batch_decode(out[:, ids.shape[1]:], skip_special_tokens=True)
        return [[t.strip() for t in replies[i * n:(i + 1) * n]] for i in range(len(users))]


def _ticks(on_step: Callable[[], None]) -> Any:
    """A transformers stopping-criteria list that calls ``on_step()`` after each decoding step and stops nothing."""
    import torch
    from transformers import StoppingCriteria, StoppingCriteriaList

    class Tick(StoppingCriteria):
        def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
            on_step()
            return torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)

    return StoppingCriteriaList([Tick()])
