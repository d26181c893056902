"""prb: analysis package for Personalized RewardBench.

The curated public API is importable from the top-level package; heavy modules (torch, transformers) load
only when first used.

>>> import prb_utils
>>> prb_utils.expected_best_of_k([0.1, 0.9, 0.5], [0.0, 1.0, 0.5], 1)
0.5
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__version__ = "0.1.0"

_PUBLIC = {
    # data and profiles
    "load_benchmark": "prb_utils.data",
    "read_benchmark": "prb_utils.data",
    "data_fingerprint": "prb_utils.data",
    "parse_condition": "prb_utils.profile",
    "rm_user_message": "prb_utils.profile",
    # models and scoring
    "load_model": "prb_utils.models",
    "list_models": "prb_utils.models",
    "ModelOptions": "prb_utils.models",
    "EngineConfig": "prb_utils.models",
    "score_benchmark": "prb_utils.scoring",
    "plan_frame": "prb_utils.plan",
    "load_results": "prb_utils.store",
    "load_run_metadata": "prb_utils.store",
    # analysis
    "accuracy_table": "prb_utils.analysis.metrics",
    "compare": "prb_utils.analysis.metrics",
    "profile_lift": "prb_utils.analysis.metrics",
    "summarize": "prb_utils.analysis.metrics",
    "macro_accuracy": "prb_utils.analysis.metrics",
    "profile_size_curve": "prb_utils.analysis.profile_curves",
    "profile_size_plot": "prb_utils.analysis.profile_curves",
    "retrieval_ablation": "prb_utils.analysis.profile_curves",
    "oracle_gap": "prb_utils.analysis.profile_curves",
    "leaderboard": "prb_utils.analysis.leaderboard",
    # downstream
    "rank_agreement_ci": "prb_utils.downstream.correlation",
    "no_ranking": "prb_utils.downstream.correlation",
    "compare_benchmarks": "prb_utils.downstream.correlation",
    "correlation_difference": "prb_utils.downstream.correlation",
    "bon_curves": "prb_utils.downstream.bon",
    "run_bon_pipeline": "prb_utils.downstream.pipeline",
    "SamplingOptions": "prb_utils.downstream.policy",
    # reports
    "build_report": "prb_utils.notebook.report",
    "rank_agreement": "prb_utils.downstream.correlation",
    "expected_best_of_k": "prb_utils.downstream.bon",
    "best_of_first_k": "prb_utils.downstream.bon",
    # exports
    "export_results": "prb_utils.export",
    # errors
    "PRBError": "prb_utils.errors",
    "DataError": "prb_utils.errors",
}

__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> Any:
    if name in _PUBLIC:
        value = getattr(import_module(_PUBLIC[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'prb_utils' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
