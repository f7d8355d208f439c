"""Theme discovery's quality: a labelled fixture of paraphrase groups (``paraphrases``, which
writes ``tests/fixtures/themes/paraphrases.jsonl``) and the scores of mcpd's clustering and a
library baseline on it (``quality``: ``python -m bench.intelligence.quality``)."""
