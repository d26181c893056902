"""``judge:`` a causal LM comparing the two responses, in both A/B orders.

Mode ``logprob`` (default): after the judge prompt (chat template, generation prompt, then the answer prefix
``**Result:**``), P(A) and P(B) are the next-token probabilities of the letters (with and without a leading
space, summed); the order's P(chosen) is P(letter of chosen) / (P(A) + P(B)). Mode ``generate``: greedy
decoding of a short answer parsed for ``**Result:** A|B``; an unparseable answer is the verdict
``invalid`` (never a guess) and makes the pair invalid.

Both orders always run: AB = (chosen as A, rejected as B) and BA = (rejected as A, chosen as B). The pair's
``score_chosen`` is the mean of the two orders' P(chosen), ``score_rejected`` the mean P(rejected).
``extra`` carries ``p_chosen_ab``, ``p_chosen_ba`` and the per-order verdicts ``verdict_ab``/``verdict_ba``:
``chosen`` (P(chosen) > 0.5), ``rejected`` (< 0.5), ``tie`` (exactly 0.5) or ``invalid`` (NaN, or an
unparseable generated answer); logprob mode adds ``p_letters_ab``/``p_letters_ba`` (P(A) + P(B), how much the
model follows the answer format), generate mode the raw answers ``answer_ab``/``answer_ba``.

The prompt is a :class:`~prb_utils.models.prompts.JudgeTemplate` (``judge_template``: ``default``,
``reference`` = the benchmark's own system + user prompt, or a file). Special tokens follow ``tokenization``:
``auto`` adds the tokenizer's leading tokens once; ``reference`` adds none, as vLLM's ``LLM.chat`` in the
reference judge script does.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from prb_utils.errors import PRBError
from prb_utils.models.base import ModelSpec, PairInput, PairScore
from prb_utils.models.batching import BudgetBatcher
from prb_utils.models.hf import HFAdapter, fitted, nonfinite_reason
from prb_utils.models.lm import DecoderRunner, Group, lm_logits
from prb_utils.models.prompts import (
    fill_judge_template,
    load_judge_template,
    parse_verdict,
    render_chat,
    with_answer_prefix,
)
from prb_utils.schema import ATTENTIONS, stable_hash

MODES = ("logprob", "generate")
MAX_NEW_TOKENS = 24


@dataclass
class _Prepared:
    """A chunk's host work: both orders' token ids and truncation per pair; the batch plan (logprob mode)."""

    sequences: list[tuple[list[list[int]], bool]]
    plan: Any = None


def letter_ids(tokenizer: Any, letter: str) -> list[int]:
    """Single-token ids spelling ``letter``, with and without a leading space."""
    found: list[int] = []
    for text in (letter, " " + letter):
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        if len(ids) == 1 and ids[0] not in found:
            found.append(int(ids[0]))
    if not found:
        raise PRBError(f"The judge's tokenizer has no single token for the answer '{letter}'.")
    return found


def verdict(p_chosen: float) -> str:
    if math.isnan(p_chosen):
        return "invalid"
    return "chosen" if p_chosen > 0.5 else "rejected" if p_chosen < 0.5 else "tie"


class JudgeRM(HFAdapter):
    kind = "judge"
    reference_specials = "never"   # the reference judge runs vLLM's LLM.chat, which adds none
    cut_keeps_end = True   # an input too long keeps its end: the responses' ends and the answer format (_cut)

    def __init__(self, spec: ModelSpec, *, device: str = "auto", dtype: str = "auto",
                 batch_tokens: int | None = None, seed: int = 0, judge_mode: str = "logprob",
                 judge_template: str | None = None, kv_reuse: bool = True,
                 max_new_tokens: int = MAX_NEW_TOKENS, tokenization: str = "auto",
                 allow_untrained_head: bool = False, attention: str = ATTENTIONS[0]) -> None:
        from transformers import AutoModelForCausalLM

        if judge_mode not in MODES:
            raise PRBError(f"Unknown judge mode '{judge_mode}'; use logprob or generate.")
        self.template = load_judge_template(judge_template)
        super().__init__(spec, device=device, dtype=dtype, batch_tokens=batch_tokens, seed=seed,
                         tokenization=tokenization, allow_untrained_head=allow_untrained_head, attention=attention)
        self._load(AutoModelForCausalLM.from_pretrained)
        self.mode = judge_mode
        self.kv_reuse = kv_reuse
        self.max_new_tokens = max_new_tokens
        self.batcher = BudgetBatcher(self.batch_tokens)
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        self.runner = DecoderRunner(self.model, pad_id=self.pad_id, batcher=self.batcher, kv_reuse=kv_reuse)
        self.a_ids = letter_ids(self.tokenizer, "A")
        self.b_ids = letter_ids(self.tokenizer, "B")

    # ------------------------------------------------------------------ prompts

    def prompt_text(self, question: str, response_a: str, response_b: str) -> str:
        """The full judge input for one order, as text."""
        user = fill_judge_template(self.template.user, question=question, response_a=response_a,
                                   response_b=response_b)
        text = render_chat(self.tokenizer, user, system=self.template.system)
        return with_answer_prefix(text) if self.mode == "logprob" else text

    def _room(self) -> int:
        return self.max_length - (self.max_new_tokens if self.mode == "generate" else 0)

    #: What each of :meth:`input_texts` is (:mod:`prb_utils.models.rendered` shows them under these names).
    input_labels = ("order AB (chosen as A)", "order BA (chosen as B)")

    def input_texts(self, question: str, pair: PairInput) -> list[str]:
        """The judge's two inputs for ``pair`` with the user message ``question`` (AB, BA): the one place they
        are built (scoring and :mod:`prb_utils.models.rendered` both call it)."""
        return [self.prompt_text(question, pair.chosen, pair.rejected),
                self.prompt_text(question, pair.rejected, pair.chosen)]

    def _fitted(self, pair: PairInput) -> tuple[str, list[list[int]], bool]:
        """``(user message kept, token ids, truncated)`` of one pair, the user message cut from the left to fit."""
        return fitted(self.tokenizer, pair.prompt, lambda q: self.encode_many(self.input_texts(q, pair), continued=True),
                      lambda s: max(map(len, s)), self._room())

    def _sequences(self, pair: PairInput) -> tuple[list[list[int]], bool]:
        """One pair's two judge inputs (AB, BA) as token ids, fitted to the model's length: the reference that
        :meth:`_sequences_many` gives the same ids as."""
        _, seqs, truncated = self._fitted(pair)
        return self._cut(seqs, truncated)

    def _cut(self, seqs: list[list[int]], truncated: bool) -> tuple[list[list[int]], bool]:
        room = self._room()
        if any(len(s) > room for s in seqs):  # the responses alone are too long: keep the end
            return [s[-room:] for s in seqs], True
        return seqs, truncated

    def _build_many(self, questions: Sequence[str], pairs: Sequence[PairInput]) -> list[list[list[int]]]:
        """Both orders' token ids of each pair with its question text, in one batch call of the tokenizer."""
        ids = self.encode_many([t for q, p in zip(questions, pairs, strict=True) for t in self.input_texts(q, p)],
                               continued=True)
        return [ids[2 * i : 2 * i + 2] for i in range(len(questions))]

    def _sequences_many(self, pairs: Sequence[PairInput]) -> list[tuple[list[list[int]], bool]]:
        """:meth:`_sequences` of every pair, tokenized in one batch call; the long pairs fitted from their own
        tokens (:meth:`~prb_utils.models.hf.HFAdapter._fit_many`)."""
        found = self._fit_many(pairs, self._room(), self._build_many, lambda s: max(map(len, s)))
        return [self._cut(seqs, truncated) for seqs, truncated in found]

    # ------------------------------------------------------------------ scoring

    def _prepare(self, pairs: Sequence[PairInput]) -> _Prepared:
        """Host work of a chunk: both orders' token ids of every pair and, in logprob mode, the batch plan."""
        sequences = self._sequences_many(pairs)
        plan = self._plan([s for s, _ in sequences]) if self.mode == "logprob" else None
        return _Prepared(sequences, plan)

    def _plan(self, seqs: list[list[list[int]]]) -> Any:
        return self.runner.prepare([Group(tuple(s), tuple(len(x) - 1 for x in s)) for s in seqs])

    def run(self, prepared: _Prepared) -> list[PairScore]:
        n = len(prepared.sequences)
        if self.mode == "logprob":
            p_orders, masses = self._logprob(prepared.plan)
            answers: list[tuple[str, str]] = [("", "")] * n
        else:
            answers = self._generate([s for s, _ in prepared.sequences])
            p_orders = [tuple(_vote(text, chosen_letter) for text, chosen_letter in zip(pair, "AB", strict=True))
                        for pair in answers]
            masses = [(math.nan, math.nan)] * n
        scores = []
        for (seqs, truncated), (p_ab, p_ba), mass, answer in zip(prepared.sequences, p_orders, masses, answers,
                                                                 strict=True):
            v_ab, v_ba = verdict(p_ab), verdict(p_ba)
            score = (p_ab + p_ba) / 2
            reason = nonfinite_reason(p_ab, p_ba) if self.mode == "logprob" else None
            if self.mode == "generate" and "invalid" in (v_ab, v_ba):
                which = " and ".join(o for o, v in (("AB", v_ab), ("BA", v_ba)) if v == "invalid")
                reason = f"judge answer could not be parsed (order {which})"
            extra: dict[str, Any] = {"p_chosen_ab": p_ab, "p_chosen_ba": p_ba, "verdict_ab": v_ab, "verdict_ba": v_ba,
                                     "truncated": truncated, "n_tokens": sum(len(s) for s in seqs)}
            if self.mode == "logprob":
                extra.update(p_letters_ab=mass[0], p_letters_ba=mass[1])
            else:
                extra.update(answer_ab=answer[0], answer_ba=answer[1])
            self.n_truncated += int(truncated)
            scores.append(PairScore(score, 1 - score, reason, extra))
        self.n_pairs += n
        return scores

    def _logprob(self, plan: Any) -> tuple[list[tuple[float, float]], list[tuple[float, float]]]:
        results = self.runner.hidden(plan, reduce=self._letter_probs, gather=True)
        # AB: chosen is A; BA: chosen is B
        return [(r[0], 1 - r[1]) for r in results], [(r[2], r[3]) for r in results]

    def _letter_probs(self, group: Group, hidden: list[Any]) -> Any:
        """[P(A) / (P(A) + P(B)) in AB, the same in BA, P(A) + P(B) in AB, in BA] from the last positions, as a
        tensor left on the device (the runner gathers them once per call)."""
        import torch

        last = torch.stack([h[-1] for h in hidden])
        logp = torch.log_softmax(lm_logits(self.model, last), dim=-1)
        la = torch.logsumexp(logp[:, self.a_ids], dim=-1)
        lb = torch.logsumexp(logp[:, self.b_ids], dim=-1)
        return torch.cat([torch.sigmoid(la - lb), torch.logaddexp(la, lb).exp()])

    def _generate(self, seqs: list[list[list[int]]]) -> list[tuple[str, str]]:
        flat = [s for pair in seqs for s in pair]
        lengths = [len(s) + self.max_new_tokens for s in flat]
        texts = self.batcher.map(self._generate_batch, flat, lengths)
        return [(texts[2 * i], texts[2 * i + 1]) for i in range(len(seqs))]

    def _generate_batch(self, seqs: list[list[int]]) -> list[str]:
        import torch

        width = max(len(s) for s in seqs)
        ids = torch.full((len(seqs), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(seqs), width), dtype=torch.long)
        for row, s in enumerate(seqs):  # left padding for generation
            ids[row, width - len(s):] = torch.tensor(s, dtype=torch.long)
            mask[row, width - len(s):] = 1
        device = self.model.device
        with torch.inference_mode():
            out = self.model.generate(input_ids=ids.to(device), attention_mask=mask.to(device), do_sample=False,
                                      max_new_tokens=self.max_new_tokens, pad_token_id=self.pad_id,
                                      temperature=None, top_p=None, top_k=None)
        with self.tokenizer_lock:   # the next chunk may be tokenizing in the scorer's other thread
            return self.tokenizer.batch_decode(out[:, width:], skip_special_tokens=True)

    def run_metadata(self) -> dict[str, Any]:
        return {**super().run_metadata(), "judge_mode": self.mode, "kv_reuse": self.runner.kv_reuse,
                "calibration": self.runner.calibration_record(),
                "judge_template": self.template.name,
                "judge_template_hash": stable_hash([self.template.system, self.template.user]),
                "answer_prefix": "**Result:**" if self.mode == "logprob" else None,
                "max_new_tokens": self.max_new_tokens if self.mode == "generate" else None,
                "a_token_ids": self.a_ids, "b_token_ids": self.b_ids,
                "oom_halvings": self.batcher.oom_halvings, "tokens_computed": self.runner.tokens_computed}


def _vote(answer: str, chosen_letter: str) -> float:
    """1.0 when the parsed answer names the chosen response's letter, 0.0 for the other, NaN if unparsed."""
    found = parse_verdict(answer)
    if found is None:
        return math.nan
    return 1.0 if found == chosen_letter else 0.0
