"""A synthetic benchmark with the real size and shape of Personalized RewardBench, for scale benchmarks.

The real benchmark has 2,830 records in three subsets (767 / 989 / 1,074) and its users' profiles are long:
dozens of StackExchange-style posts per user, about 116 KB of JSON per record. The texts here are seeded
random words from a fixed vocabulary (no real content, so no accuracy means anything); only the sizes are
real. Writes one ``.jsonl`` per subset into a folder that ``prb validate`` / ``prb score --data`` read.

    python bench/synthetic_benchmark.py --out synthetic-prb                # full size
    python bench/synthetic_benchmark.py --out synthetic-small --scale 0.01   # 1% of the records

>>> import tempfile, json, pathlib
>>> folder = write_benchmark(tempfile.mkdtemp(), scale=0.002, posts=3, post_words=20)
>>> sorted(p.name for p in pathlib.Path(folder).iterdir())
['Art_and_Entertainment.jsonl', 'Lifestyle_and_Personal_Development.jsonl', 'Society_and_Culture.jsonl']
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

SUBSETS = {"Art_and_Entertainment": 767, "Lifestyle_and_Personal_Development": 989, "Society_and_Culture": 1074}
CATEGORIES = {
    "Art_and_Entertainment": ["anime", "movies", "music", "photo", "scifi", "gaming", "writing", "boardgames"],
    "Lifestyle_and_Personal_Development": ["cooking", "travel", "fitness", "parenting", "diy", "gardening", "pets"],
    "Society_and_Culture": ["law", "history", "philosophy", "christianity", "politics", "workplace", "academia"],
}
VOCABULARY = (
    "budget cheap quick simple detailed beginner expert plan recipe route schedule cost safety history source "
    "example step list guide reason evidence practice habit method tool option choice value risk advice time "
    "week money family friend work school city trip meal training game story character scene sound light "
    "camera lens setting law rule right court policy book author theory argument question answer problem "
    "idea context detail summary short long clear plain technical formal casual personal local global"
).split()
POSTS_PER_USER = 45  # dozens of posts: about 116 KB of JSON per record with the default post length
POST_WORDS = 380
ANSWER_WORDS = 100  # the benchmark's answers run to about 100 words


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choices(VOCABULARY, k=words)).capitalize() + "?"


def make_record(rng: random.Random, subset: str, index: int, *, posts: int, post_words: int) -> dict:
    """One record in the PRB format with realistic lengths (random words)."""
    record_id = f"{subset[:3].lower()}-{index:05d}"
    categories = CATEGORIES[subset]
    return {
        "id": record_id,
        "question": _text(rng, 40),
        "profile": [
            {"id": f"{record_id}-p{j + 1}", "category": rng.choice(categories), "text": _text(rng, post_words)}
            for j in range(posts)
        ],
        "rubric_aspects": [{"aspect": _text(rng, 8), "evidence": _text(rng, 12), "reason": _text(rng, 15)}
                           for _ in range(rng.randint(1, 4))],
        "narrative": _text(rng, 60),
        "category": rng.choice(categories),
        "chosen": _text(rng, ANSWER_WORDS),
        "rejected": _text(rng, ANSWER_WORDS + rng.randint(-15, 15)),
    }


def write_benchmark(out: str | Path, *, scale: float = 1.0, posts: int = POSTS_PER_USER,
                    post_words: int = POST_WORDS, seed: int = 0) -> Path:
    """Write the synthetic benchmark (``scale`` x the real record counts) into ``out``; returns the folder."""
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    for subset, count in SUBSETS.items():
        with open(folder / f"{subset}.jsonl", "w", encoding="utf-8") as fh:
            for index in range(max(1, round(count * scale))):
                record = make_record(rng, subset, index, posts=posts, post_words=post_words)
                fh.write(json.dumps(record, ensure_ascii=False) + "\n")
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="folder to write the .jsonl files into")
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of the real record counts")
    parser.add_argument("--posts", type=int, default=POSTS_PER_USER, help="profile posts per user")
    parser.add_argument("--post-words", type=int, default=POST_WORDS, help="words per profile post")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    folder = write_benchmark(args.out, scale=args.scale, posts=args.posts, post_words=args.post_words,
                             seed=args.seed)
    sizes = [p.stat().st_size for p in folder.glob("*.jsonl")]
    records = sum(1 for p in folder.glob("*.jsonl") for _ in p.open(encoding="utf-8"))
    print(f"wrote {records} records, {sum(sizes) / 1e6:.1f} MB ({sum(sizes) / records / 1e3:.1f} KB per record) "
          f"into {folder}")


if __name__ == "__main__":
    main()
