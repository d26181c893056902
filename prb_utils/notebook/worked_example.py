"""Page 03's worked example on published figures (a per-RM table of benchmark scores and downstream outcomes): each
section shows its table or figure and returns what the page records."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from prb_utils.downstream import correlation
from prb_utils.downstream import plots as downstream_plots
from prb_utils.notebook.sections import missing_section

#: The columns of a downstream table that hold a benchmark's scores (the table's first of them ranks the RMs).
BENCHMARK_COLUMNS = ("prb", "rewardbench", "rm_bench", "rbv2")
#: The columns that hold a downstream outcome.
DOWNSTREAM_COLUMNS = ("ppo", "bon")
#: The command that runs page 03 on the published table shipped in ``data/``.
EXAMPLE_RERUN = (".venv/bin/papermill notebooks/03_downstream_correlation.ipynb out.ipynb -p interactive False "
                 "-p downstream_csv example")
#: The sets of the study's RMs whose agreement page 03 shows apart: name -> (the groups, kept or left out).
GROUP_SETS = {"all RMs": ((), False), "without on-policy-poor": (("on-policy-poor",), False),
              "on-policy, the paper's group (with the 3 poor)": (("on-policy", "on-policy-poor"), True),
              "on-policy without the 3 poor": (("on-policy",), True)}


def show_example(path: Path | None) -> pd.DataFrame | None:
    """The per-RM table at ``path`` (shown), or None and the missing section when there is none."""
    from IPython.display import Markdown, display

    example = pd.read_csv(path, comment="#", index_col=0) if path else None
    display(example if example is not None else Markdown(missing_section(
        "No downstream table (`downstream_csv` is empty): this section and the three below need one", EXAMPLE_RERUN,
        fill="Use the published RewardBench 2 table shipped in `data/`, or your own CSV in its place",
        cost="under a minute")))
    return example


def benchmark_column(example: pd.DataFrame) -> str:
    """The benchmark column that ranks the RMs: the first column of ``example`` named in :data:`BENCHMARK_COLUMNS`.

    >>> benchmark_column(pd.DataFrame(columns=["ppo", "rbv2", "prb"]))
    'rbv2'
    """
    return [c for c in example.columns if c in BENCHMARK_COLUMNS][0]


def show_agreement(example: pd.DataFrame, *, n_boot: int | None = None) -> pd.DataFrame:
    """Each benchmark's agreement with each downstream outcome (table and bars)."""
    import matplotlib.pyplot as plt
    from IPython.display import display

    benchmarks = example[[c for c in example.columns if c in BENCHMARK_COLUMNS]]
    downstream = example[[c for c in DOWNSTREAM_COLUMNS if c in example.columns]]
    agreement = correlation.compare_benchmarks(benchmarks, downstream, n_boot=n_boot)
    display(correlation.p_display(agreement))
    downstream_plots.coefficient_bars(agreement, hue="downstream", title="Agreement with downstream outcomes")
    plt.show()
    return agreement


def show_scatter(example: pd.DataFrame) -> None:
    """Benchmark score against PPO outcome with an OLS fit, and rank against rank, each RM marked by its group."""
    import matplotlib.pyplot as plt

    column, groups = benchmark_column(example), example["group"] if "group" in example.columns else None
    _, (left, right) = plt.subplots(1, 2, figsize=(11, 4.5))
    downstream_plots.scatter_fit(example[column], example["ppo"], ax=left, xlabel=f"{column} score",
                                 ylabel="PPO score", groups=groups, title="Published figures (RewardBench 2, Table 8)")
    downstream_plots.rank_rank(example[column], example["ppo"], ax=right, xlabel=f"{column} rank", ylabel="PPO rank",
                               groups=groups)
    plt.show()


def show_by_group(example: pd.DataFrame, *, n_boot: int | None = None) -> pd.DataFrame | None:
    """The agreement with PPO within each set of :data:`GROUP_SETS` (None without a ``group`` column)."""
    from IPython.display import display

    if "group" not in example.columns:
        return None
    column = benchmark_column(example)
    sets = {name: example[example["group"].isin(groups) == kept] for name, (groups, kept) in GROUP_SETS.items()}
    by_group = pd.concat([correlation.compare_benchmarks(rms[[column]], rms[["ppo"]], n_boot=n_boot).assign(rms=name)
                          for name, rms in sets.items()], ignore_index=True)
    shown = correlation.p_display(by_group[by_group["metric"].isin(["spearman", "kendall", "pearson", "ndcg"])])
    display(shown.pivot_table(index=["rms", "n"], columns="metric", values=["estimate", "ci_low", "ci_high", "chance",
                                                                              "p_perm"], aggfunc="first", sort=False))
    return by_group


def show_leave_one_out(example: pd.DataFrame) -> pd.DataFrame:
    """Spearman and Pearson recomputed without each RM (table by |delta| and bars)."""
    import matplotlib.pyplot as plt
    from IPython.display import display

    column = benchmark_column(example)
    loo = correlation.leave_one_out(example[column], example["ppo"])
    if "group" in example.columns:
        loo["group"] = loo["left_out"].map(example["group"].rename(index=str))
    wide = loo[loo["metric"].isin(["spearman", "pearson"])].pivot_table(
        index=[c for c in ("left_out", "group") if c in loo.columns], columns="metric", values="delta")
    display(wide.sort_values("pearson", key=abs, ascending=False))
    ax = wide.sort_values("pearson").plot.barh(figsize=(7, 5.5), color=["0.35", "0.7"])
    ax.set_xlabel("change of the coefficient when this RM is left out")
    ax.set_ylabel("RM left out (id, group)")
    ax.set_title(f"{column} vs PPO: leave one RM out")
    plt.show()
    return loo


def show_difference(example: pd.DataFrame, *, n_boot: int | None = None) -> dict | None:
    """The benchmark against Best-of-N as predictors of PPO (:func:`~prb_utils.downstream.correlation.
    correlation_difference`); None without both outcomes."""
    from IPython.display import display

    if not {"ppo", "bon"} <= set(example.columns):
        return None
    column = benchmark_column(example)
    difference = correlation.correlation_difference(example, "ppo", column, "bon", n_boot=n_boot)
    display(correlation.p_display(pd.DataFrame([{"predictor a": column, "predictor b": "bon", **difference}])))
    return difference
