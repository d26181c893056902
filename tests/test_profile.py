"""Profile conditions, BM25 retrieval, and the leakage guard."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prb_utils.bm25 import bm25_retrieve, tokenize
from prb_utils.data import load_benchmark
from prb_utils.errors import PRBError
from prb_utils.models.base import PairInput
from prb_utils.models.baselines import LexicalBaseline
from prb_utils.profile import (
    PROFILE_HEADER,
    SEED_MAX,
    make_retriever,
    parse_condition,
    parse_seed,
    rm_user_message,
    selected_posts,
    user_text,
)

CONDITIONS = ["none", "top1", "top3", "top50", "full"]


def record_with_posts(texts: list[str], **extra) -> dict:
    return {
        "id": "x1",
        "question": "Which budget tent is good for rainy hiking trips?",
        "profile": [{"id": f"p{i}", "category": "outdoors", "text": t} for i, t in enumerate(texts)],
        **extra,
    }


@pytest.mark.parametrize(
    ("text", "name", "k"), [("none", "none", 0), ("full", "full", None), ("top3", "top3", 3), (" TOP10 ", "top10", 10)]
)
def test_parse_condition(text: str, name: str, k: int | None):
    condition = parse_condition(text)
    assert (condition.name, condition.k) == (name, k)


@pytest.mark.parametrize("text", ["top0", "topx", "top", "all", "", "top-1"])
def test_bad_conditions_are_plain_errors(text: str):
    with pytest.raises(PRBError, match="Unknown profile condition"):
        parse_condition(text)


@pytest.mark.parametrize("text", ["top3:dense:BAAI/bge-small-en-v1.5", "TOP3:Dense:/data/Encoders/MiniLM+SWAP"])
def test_a_dense_retrievers_folder_or_hub_id_keeps_its_case(text: str):
    condition = parse_condition(text)
    name = text.split(":", 2)[2].partition("+")[0]
    assert condition.retriever == f"dense:{name}"
    assert condition.spelling.startswith(f"top3:dense:{name}") and condition.name.startswith("top3")
    assert parse_condition(condition.spelling) == condition


@pytest.mark.parametrize("seed", ["", "²", "٣", "1_0", "-1", "+1", " 3", "4294967296", "1" * 26, "9" * 5000])
def test_a_seed_is_digits_in_range_in_one_sentence_wherever_it_is_written(seed: str):
    with pytest.raises(PRBError, match="expected a seed of digits 0-9 from 0 to 4294967295") as refused:
        parse_seed(seed)
    assert "\n" not in str(refused.value)
    with pytest.raises(PRBError, match=r"Profile condition 'top3:random:.*' has a bad seed") as refused:
        parse_condition(f"top3:random:{seed}")
    assert "\n" not in str(refused.value)


def test_every_seed_in_range_is_accepted():
    assert [parse_seed(s) for s in ("0", "007", str(SEED_MAX))] == [0, 7, SEED_MAX]
    assert parse_condition(f"top3:random:{SEED_MAX}").retriever_seed == SEED_MAX


def test_bm25_prefers_posts_sharing_the_question_words():
    posts = ["Sourdough starter smells odd", "Cheap rainy weather tent for hiking", "Tent poles snapped", "Knitting"]
    assert bm25_retrieve("budget tent for rainy hiking", posts, 1) == [1]
    assert bm25_retrieve("budget tent for rainy hiking", posts, 2) == [1, 2]
    assert bm25_retrieve("anything", posts, 10) == [0, 1, 2, 3]


def test_conditions_select_the_right_posts():
    record = record_with_posts(["Knitting needles?", "Rainy hiking tent?", "Budget hiking boots?"])
    assert selected_posts(record, "none") == []
    assert selected_posts(record, "full") == [0, 1, 2]
    assert selected_posts(record, "top2") == [1, 2]
    message = rm_user_message(record, "top1")
    assert message.startswith(PROFILE_HEADER) and "Rainy hiking tent?" in message
    assert "Knitting" not in message and message.endswith("Question: " + record["question"])
    assert rm_user_message(record, "none") == record["question"]


def test_empty_profile_gives_the_bare_question():
    assert rm_user_message(record_with_posts([]), "full") == "Which budget tent is good for rainy hiking trips?"


def test_unknown_retriever_is_a_plain_error():
    with pytest.raises(PRBError, match="Unknown retriever"):
        make_retriever("tfidf")


def test_user_text_strips_only_prbs_wrapper():
    record = record_with_posts(["Rainy hiking tent?", "Budget hiking\nboots?"])
    record["profile"][1]["category"] = ""
    message = rm_user_message(record, "full")
    assert user_text(message) == "Rainy hiking tent?\nBudget hiking\nboots?\n" + record["question"]
    assert "outdoors" not in user_text(message)  # community tags are the site's words, not the user's
    assert user_text(rm_user_message(record, "none")) == record["question"]
    assert user_text("Question: what is a question?") == "Question: what is a question?"  # no header: all the user's


@pytest.mark.parametrize("condition", ["top1", "full"])
def test_lexical_baseline_gives_nothing_for_echoing_the_wrapper(condition: str):
    record = record_with_posts(["Knitting needles?", "Rainy hiking tent?"])
    prompt = rm_user_message(record, condition)
    echo = PROFILE_HEADER + " Question: [outdoors]"
    assert set(tokenize(echo)) - set(tokenize(record["question"]))  # the wrapper has words of its own
    score = LexicalBaseline().score_pairs([PairInput("k", prompt, "A tent.", "A tent. " + echo)])[0]
    assert score.score_chosen == score.score_rejected > 0
    assert score.extra["n_prompt_words"] == len(set(tokenize(user_text(prompt))))


SECRETS = ("rubric_aspects", "narrative", "rubric_inferable")


def _with_canaries(record: dict) -> tuple[dict, list[str]]:
    canaries = []
    aspects = []
    for i, _ in enumerate(record.get("rubric_aspects") or [{}]):
        fields = {f: f"CANARY{f.upper()}{i}" for f in ("aspect", "evidence", "reason")}
        canaries += fields.values()
        aspects.append(fields)
    leaked = dict(record, rubric_aspects=aspects, narrative="CANARYNARRATIVE", rubric_inferable="CANARYFLAG")
    return leaked, [*canaries, "CANARYNARRATIVE", "CANARYFLAG"]


@pytest.mark.parametrize("condition", CONDITIONS)
def test_leakage_guard_on_every_sample_record(condition: str):
    frame = load_benchmark("sample")
    for record in frame.to_dict("records"):
        leaked, canaries = _with_canaries(record)
        for retriever in (None, make_retriever("bm25")):
            message = rm_user_message(leaked, condition, retriever=retriever)
            assert not any(c in message for c in canaries)
            # the real answer key never appears either
            for aspect in record["rubric_aspects"]:
                assert aspect["reason"] not in message
            assert record["narrative"] not in message


@settings(max_examples=60, deadline=None)
@given(
    question=st.text(min_size=1, max_size=40),
    posts=st.lists(st.text(max_size=30), max_size=6),
    condition=st.sampled_from(CONDITIONS),
)
def test_leakage_guard_for_arbitrary_records(question: str, posts: list[str], condition: str):
    record, canaries = _with_canaries(record_with_posts(posts, rubric_aspects=[{}, {}]))
    record["question"] = question
    message = rm_user_message(record, condition)
    assert not any(c in message for c in canaries)
    assert question in message


_PLAIN = st.text(alphabet="abcQqu :?,.", min_size=1, max_size=30)


@settings(max_examples=60, deadline=None)
@given(question=_PLAIN, posts=st.lists(_PLAIN, max_size=5), condition=st.sampled_from(CONDITIONS))
def test_user_text_keeps_exactly_the_users_words(question: str, posts: list[str], condition: str):
    record = record_with_posts(posts)
    record["question"] = question
    shown = [posts[i] for i in selected_posts(record, condition)]
    assert sorted(tokenize(user_text(rm_user_message(record, condition)))) == sorted(
        tokenize(" ".join([*shown, question])))


POSTS = ["cheap cast iron pans", "hiking boots for rain", "pans and pots on a budget", "lisbon hostels", "anime"]


def test_least_retriever_picks_the_complement_end_of_the_bm25_ranking():
    best = make_retriever("bm25")("cheap pans budget", POSTS, 2)
    least = make_retriever("least")("cheap pans budget", POSTS, 2)
    assert best == [0, 2]
    assert not set(best) & set(least) and len(least) == 2


def test_random_retriever_is_seeded_uniform_and_differs_from_bm25():
    first = make_retriever("random", seed=0)
    again = make_retriever("random", seed=0)
    picks = [tuple(first(f"question {i}", POSTS, 2)) for i in range(200)]
    assert picks == [tuple(again(f"question {i}", POSTS, 2)) for i in range(200)]
    assert picks != [tuple(make_retriever("random", seed=1)(f"question {i}", POSTS, 2)) for i in range(200)]
    counts = [sum(i in p for p in picks) for i in range(len(POSTS))]
    assert all(50 < c < 110 for c in counts), counts  # each post is drawn about 2/5 of 200 = 80 times


def test_unknown_retriever_names_the_choices():
    with pytest.raises(PRBError, match="random, least"):
        make_retriever("worst")


def test_the_rubric_oracle_shows_only_the_aspects_and_is_marked_as_oracle():
    record = load_benchmark("sample").to_dict("records")[0]
    leaked, canaries = _with_canaries(record)
    message = rm_user_message(leaked, "rubric")
    assert parse_condition("rubric").oracle and not parse_condition("full").oracle
    aspect_canaries = [c for c in canaries if c.startswith("CANARYASPECT")]
    assert aspect_canaries and all(c in message for c in aspect_canaries)
    assert not any(c in message for c in canaries if c not in aspect_canaries)
    assert all(post["text"] not in message for post in record["profile"])
    assert message.endswith(f"Question: {record['question']}")
    assert "CANARYASPECT0" in user_text(message) and "expects" not in user_text(message)


_BM25_WORDS = st.sampled_from("a the pan pans cheap cast iron boots hiking trip law É café x42 42 _ naïve".split())


@settings(max_examples=300, deadline=None)
@given(question=st.lists(_BM25_WORDS, max_size=6).map(" ".join),
       posts=st.lists(st.lists(_BM25_WORDS, max_size=10).map(" ".join), min_size=1, max_size=6))
def test_bm25_scores_are_rank_bm25s_bm25plus_exactly(question, posts):
    """The word-count BM25+ gives rank_bm25's scores to the last bit (empty posts and unknown words too)."""
    from rank_bm25 import BM25Plus

    from prb_utils.bm25 import bm25_scores

    expected = list(BM25Plus([tokenize(p) or ["_"] for p in posts]).get_scores(tokenize(question)))
    assert bm25_scores(question, posts) == expected


def test_no_code_outside_the_condition_record_tests_a_condition_by_its_spelling():
    """Every question about a profile condition (does it retrieve, is it the oracle, which probe) is a property of
    the parsed record: no module but profile.py compares a condition with "none", "full", "rubric" or tests
    ``startswith("top")`` (the baseline condition is schema.NO_PROFILE)."""
    import ast
    from pathlib import Path

    import prb_utils

    package = Path(prb_utils.__file__).parent
    spelled = {"none", "full", "rubric"}
    found = []
    for path in package.rglob("*.py"):
        if path.name in ("profile.py", "schema.py"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            literals = []
            if isinstance(node, ast.Compare):
                for side in (node.left, *node.comparators):
                    items = side.elts if isinstance(side, (ast.Tuple, ast.List, ast.Set)) else [side]
                    literals += [i.value for i in items if isinstance(i, ast.Constant) and isinstance(i.value, str)]
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "startswith"
                    and node.args and isinstance(node.args[0], ast.Constant) and node.args[0].value == "top"):
                literals.append("top")
            if spelled & set(literals) or "top" in literals:
                found.append(f"{path.relative_to(package)}:{node.lineno}")
    assert found == []
