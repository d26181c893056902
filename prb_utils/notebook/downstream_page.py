"""Page 03's words: the commands that fill an empty section, and how a downstream run was made, in one place.

>>> prb_command("score", data="sample", models=["length", "judge:smollm2"], profile="top3", store="results")
'prb score --data sample --model length --model judge:smollm2 --profile top3 --out results'
>>> prb_command("bon", data="sample", models=["length"], store="my results")
"prb bon --data sample --model length --results 'my results'"
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from prb_utils.downstream.policy import SAMPLING_MODES
from prb_utils.downstream.results import BonResults, RLResults
from prb_utils.downstream.rubric_judge import QUALITY_RULES
from prb_utils.notebook.markup import display_path, md_code

#: How an answer's quality is read from a proxy judge (MiniLM similarity), in the pages' words.
PROXY_QUALITY = "the proxy's similarity of the answer to each aspect, clipped at 0 and averaged"
#: Where each command writes: ``prb score`` a store (``--out``), the downstream commands into one (``--results``).
STORE_OPTION = {"score": "--out", "bon": "--results", "ppo": "--results"}


def prb_command(verb: str, *, data: object, store: object, models: Sequence[str] = (), profile: str | None = None,
                ) -> str:
    """The shell command ``prb VERB`` on ``data`` into the store ``store`` (paths as pages show them: never an
    absolute local path), for ``models`` and the profile condition ``profile``, quoted for a shell."""
    parts = ["prb", verb, "--data", shlex.quote(display_path(data))]
    parts += [f"--model {shlex.quote(m)}" for m in models]
    parts += [f"--profile {shlex.quote(profile)}"] if profile else []
    parts += [STORE_OPTION[verb], shlex.quote(display_path(store))]
    return " ".join(parts)


def chain(*commands: str) -> str:
    """Commands run one after the other, each only if the one before succeeded."""
    return " && ".join(c for c in commands if c)


def bon_how_judged(run: BonResults) -> str:
    """One sentence: the judge's protocol and how an answer's quality is read."""
    quality = PROXY_QUALITY if run.proxy else QUALITY_RULES[run.quality_rule]
    return f"*Judged by {run.protocol}. An answer's quality: {quality}.*"


def bon_how_made(run: BonResults) -> str:
    """The run's record in two sentences (its questions, answers, policy, the RMs' condition and the sampling
    mode); empty for a folder without ``run.json``."""
    if not run.run:
        return ""
    record = run.run
    return (f"*The run in* {md_code(display_path(run.folder))}*: {record['n_questions']} questions, "
            f"{record['n_samples']} answers each from* {md_code(record['policy'])}*; the RMs saw the profile "
            f"condition* {md_code(record['rm_profile'])}*; quality from* {md_code(run.label)}*.*\n\n"
            f"*Answers sampled in the* **{run.sampling}** *mode: {SAMPLING_MODES[run.sampling]}.*")


def rl_how_made(run: RLResults) -> str:
    """The trainer and, where the run's record says it, how an answer's quality was read."""
    rule = run.quality_rule
    quality = f" *An answer's quality: {QUALITY_RULES[rule]}.*" if rule in QUALITY_RULES else ""
    return f"*Policies trained with* **{run.trainer}**.{quality}"
