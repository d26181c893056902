"""Per-pair and per-aspect features of prb_utils.analysis.features: themes, stems, inferability, lengths."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from prb_utils.analysis.features import (
    THEMES,
    aspect_themes,
    char_count,
    content_stems,
    inferability,
    pair_features,
    quantile_bins,
    stem,
    words,
)
from prb_utils.data import load_benchmark


def test_aspect_themes_keyword_scheme():
    assert aspect_themes("Uses an encouraging tone") == ["tone"]
    assert aspect_themes("Gives a short bulleted checklist") == ["format"]
    assert aspect_themes("Mentions safety risks and cheap fixes") == ["budget", "safety"]
    assert aspect_themes("History of jazz") == ["other"]
    assert aspect_themes("INJURY prevention") == ["safety"]  # case-insensitive, inflections match
    assert aspect_themes("a safety-minded, inexpensive plan") == ["budget", "safety"]
    assert aspect_themes("the unsafe option") == ["other"]  # whole words only


@pytest.mark.parametrize(("aspect", "not_theme"), [
    ("Suggests a costume for the party", "budget"),
    ("Quotes scripture", "format"),
    ("Thanks the veteran for serving", "safety"),
    ("Draws a timeline of the war", "constraints"),
    ("Suggests practice methods", "practicality"),  # "practice" is not "practical"
    ("Helps listen to the album", "format"),  # "listen" is not "list"
    ("Uses the underground scene", "depth"),
    ("Gives directions to the venue", "tone"),
])
def test_keywords_match_whole_words_not_prefixes(aspect: str, not_theme: str):
    assert not_theme not in aspect_themes(aspect)


def test_recommend_or_suggest_alone_is_not_specifics():
    for aspect in ("Recommends games for a toddler", "Suggests wearing bulky gear", "Recommends earplugs",
                   "Suggests something", "Gives a recommendation", "Offers suggestions"):
        assert "specifics" not in aspect_themes(aspect), aspect
    assert "specifics" in aspect_themes("Recommends specific brands")
    assert "specifics" in aspect_themes("Suggests concrete examples")
    assert not {"recommend", "suggest"} & set(THEMES["specifics"])


def test_on_the_sample_recommend_and_suggest_no_longer_fill_specifics():
    aspects = [a["aspect"] for r in load_benchmark("sample")["rubric_aspects"] for a in r]
    specifics = [a for a in aspects if "specifics" in aspect_themes(a)]
    assert len(aspects) == 89 and len(specifics) < 12
    assert all(any(stem(w) in {"specif", "concret", "exampl", "exact", "sampl", "analog"} for w in words(a))
               for a in specifics)


def test_multi_word_keywords_claim_their_words():
    assert aspect_themes("Avoids non-technical terms") == ["simplicity"]  # not depth via "technical"
    assert aspect_themes("Uses technical terms") == ["depth"]
    assert aspect_themes("Gives step-by-step instructions") == ["format"]


def test_every_keyword_matches_itself():
    for theme, keywords in THEMES.items():
        for keyword in keywords:
            assert theme in aspect_themes(keyword.lstrip("=")), (theme, keyword)


def test_stemmer_on_the_words_the_old_one_broke():
    assert stem("recipe") == stem("recipes")
    assert stem("notes") != stem("not")
    assert content_stems("recipes") == content_stems("recipe")
    assert content_stems("The walks, walking and walked") == {"walk"}
    assert content_stems("my notes") != content_stems("not")


def test_inferability():
    assert inferability(["Cheap travel"], ["cheap flights"]) == 0.5
    assert inferability("Shares recipes", ["My recipe"]) == 0.5  # recipe/recipes share a stem
    assert inferability("Budget travel", []) == 0.0
    assert np.isnan(inferability([], ["anything"]))
    assert inferability("Recommends recipes", ["Can you recommend a soup?"]) == 0.0  # rubric verbs say nothing


def test_quantile_bins_even_ties_and_nan():
    values = pd.Series([0.0, 0.0, 0.5, 0.5, 1.0, 1.0, np.nan])
    bins = quantile_bins(values)
    assert bins.tolist()[:6] == ["low", "low", "medium", "medium", "high", "high"]
    assert pd.isna(bins.iloc[6]) and list(bins.cat.categories) == ["low", "medium", "high"]
    tied = quantile_bins(pd.Series([0.0] * 5 + [0.4, 1.0]))
    assert tied.tolist() == ["low"] * 5 + ["high", "high"]


def test_lengths_are_characters_and_say_so():
    data = pd.DataFrame({"subset": "s", "id": ["a", "b"], "chosen": ["a b c d", "x" * 200],
                         "rejected": ["abcdefghij", "y"]})
    feats = pair_features(data)
    assert feats["chosen_chars"].tolist() == [7, 200] and feats["rejected_chars"].tolist() == [10, 1]
    assert feats["length_diff_chars"].tolist() == [-3, 199]  # "a b c d" has more words, fewer characters
    assert feats["length_bin"].astype(str).tolist() == ["-20..20", ">=121"]
    assert not any("words" in c for c in feats.columns)
    assert char_count(None) == 0
