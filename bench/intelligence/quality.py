"""Theme discovery's quality on the labelled paraphrase fixture, against a library baseline.

``python -m bench.intelligence.quality`` reads ``tests/fixtures/themes/paraphrases.jsonl``
(:mod:`bench.intelligence.paraphrases`: sentences in known groups) and clusters its sentences
twice:

- **mcpd**: `mcpd.themes.sketch_of` under a fixed key, then `mcpd.themes.cluster`, as the
  product does for one entity and aspect.
- **HDBSCAN over TF-IDF**: scikit-learn's `TfidfVectorizer(ngram_range=(1, 2))` (word unigrams
  and bigrams, the shingles mcpd's sketch uses) and `HDBSCAN(min_cluster_size=5,
  min_samples=5, metric="cosine")`: a point is a core when five points, itself included, are
  around it, mcpd's own density rule (`MIN_NEIGHBOURS` others).

Each is scored against the known groups by the adjusted Rand index (`sklearn.metrics.
adjusted_rand_score`) and B-cubed precision, recall and F1 (:func:`bcubed`). A note in no theme
(mcpd's noise, HDBSCAN's label -1) is a cluster of its own for both metrics, so noise costs
recall and never buys precision. Output: a table (scores, seconds, themes and noise of each) and
``bench/results/intelligence_quality.json``. Nothing here asserts; the floors are in
``tests/libs/themes/test_quality.py``.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sklearn.cluster import HDBSCAN
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.metrics import adjusted_rand_score

from bench.config import BenchConfig, Benchmark
from bench.harness import RESULTS_DIR, print_table, repo_relative, write_result
from bench.intelligence.paraphrases import FIXTURE, Paraphrase, load
from mcpd.themes import Note, cluster, sketch_of

NAME = "intelligence_quality"
DESCRIPTION = "theme discovery on a labelled paraphrase fixture: mcpd vs HDBSCAN over TF-IDF"
KEY = b"bench-intelligence-quality"
MIN_CLUSTER_SIZE = 5


@dataclass(frozen=True, slots=True)
class BCubed:
    """B-cubed precision, recall and their harmonic mean F1."""

    precision: float
    recall: float
    f1: float


@dataclass(frozen=True, slots=True)
class Scores:
    """How one clustering of the fixture compares with its groups, and what it found."""

    system: str
    ari: float
    bcubed: BCubed
    themes: int
    noise: int
    seconds: float

    def row(self) -> dict[str, object]:
        return {
            "system": self.system,
            "ARI": self.ari,
            "B3 precision": self.bcubed.precision,
            "B3 recall": self.bcubed.recall,
            "B3 F1": self.bcubed.f1,
            "themes": self.themes,
            "noise": self.noise,
            "seconds": self.seconds,
        }


def bcubed(truth: Sequence[Hashable], predicted: Sequence[Hashable]) -> BCubed:
    """B-cubed scores of a clustering: item i's precision is the share of its predicted cluster
    that is in its true group, its recall the share of its true group that is in its predicted
    cluster; precision and recall are the means over items, F1 their harmonic mean.

    `truth[i]` and `predicted[i]` label item i; give an item in no cluster (noise) a label of
    its own, so it is a singleton.
    """
    if len(truth) != len(predicted) or not truth:
        raise ValueError("need one true and one predicted label for each of at least one item")
    both = Counter(zip(truth, predicted, strict=True))
    groups, clusters = Counter(truth), Counter(predicted)
    # Item i shares its cluster and group with both[g, c] items (itself included): summed over
    # the both[g, c] items of that cell, both[g, c] ** 2 / |cluster| and / |group|.
    precision = sum(n * n / clusters[c] for (_, c), n in both.items()) / len(truth)
    recall = sum(n * n / groups[g] for (g, _), n in both.items()) / len(truth)
    return BCubed(precision, recall, 2 * precision * recall / (precision + recall))


def score(system: str, truth: Sequence[str], predicted: Sequence[str], seconds: float) -> Scores:
    """`predicted` (one label a note, noise labelled "noise/<id>") scored against `truth`."""
    sizes = Counter(predicted)
    return Scores(
        system=system,
        ari=float(adjusted_rand_score(truth, predicted)),
        bcubed=bcubed(truth, predicted),
        themes=sum(1 for label in sizes if not label.startswith("noise/")),
        noise=sum(n for label, n in sizes.items() if label.startswith("noise/")),
        seconds=seconds,
    )


def mcpd_labels(paraphrases: Sequence[Paraphrase], key: bytes = KEY) -> list[str]:
    """Each note's theme under mcpd's clustering (named by its label note), or "noise/<id>"."""
    found = cluster(Note(p.id, sketch_of(p.text, key)) for p in paraphrases)
    theme_of = {note: theme.label_note_id for theme in found.themes for note in theme.note_ids}
    return [theme_of.get(p.id, f"noise/{p.id}") for p in paraphrases]


def hdbscan_labels(paraphrases: Sequence[Paraphrase]) -> list[str]:
    """Each note's cluster under HDBSCAN over TF-IDF vectors (cosine distance), or
    "noise/<id>" for its label -1."""
    vectors = TfidfVectorizer(ngram_range=(1, 2)).fit_transform([p.text for p in paraphrases])
    found = HDBSCAN(
        min_cluster_size=MIN_CLUSTER_SIZE,
        min_samples=MIN_CLUSTER_SIZE,
        metric="cosine",
        copy=True,
    ).fit_predict(vectors)
    return [
        f"noise/{p.id}" if label < 0 else f"cluster/{label}"
        for p, label in zip(paraphrases, found, strict=True)
    ]


def run(fixture: Path = FIXTURE, *, results_dir: Path = RESULTS_DIR) -> dict[str, Any]:
    """Cluster the fixture both ways, print the scores side by side and write them."""
    paraphrases = load(fixture)
    truth = [p.group for p in paraphrases]
    rows = []
    for system, labels_of in (
        ("mcpd (MinHash sketch, density clustering)", mcpd_labels),
        ("scikit-learn HDBSCAN over TF-IDF", hdbscan_labels),
    ):
        began = time.perf_counter()
        predicted = labels_of(paraphrases)
        rows.append(score(system, truth, predicted, time.perf_counter() - began))
    print_table(
        f"theme quality: {len(paraphrases):,} notes in {len(set(truth))} known groups",
        [row.row() for row in rows],
        float_digits=3,
    )
    document = {
        "description": DESCRIPTION,
        "config": {
            "fixture": repo_relative(fixture),
            "notes": len(paraphrases),
            "groups": len(set(truth)),
            "distinct_texts": len({p.text for p in paraphrases}),
            "mcpd_key": KEY.decode(),
            "hdbscan": {
                "min_cluster_size": MIN_CLUSTER_SIZE,
                "min_samples": MIN_CLUSTER_SIZE,
                "metric": "cosine",
                "tfidf_ngram_range": [1, 2],
            },
            "noise": "each noise note is a singleton cluster for every metric",
        },
        "results": rows,
    }
    path = write_result(NAME, document, results_dir)
    print(f"wrote {path}", flush=True)
    return document


def _run_from_bench(config: BenchConfig) -> Mapping[str, Any]:
    return run(results_dir=config.results_dir)


BENCHMARK = Benchmark(name=NAME, description=DESCRIPTION, run=_run_from_bench)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.intelligence.quality", description=DESCRIPTION
    )
    parser.add_argument("--fixture", type=Path, default=FIXTURE, help="labelled JSONL fixture")
    parser.add_argument("--results-dir", type=Path, default=RESULTS_DIR)
    args = parser.parse_args(argv)
    run(args.fixture, results_dir=args.results_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
