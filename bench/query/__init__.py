"""``bench/query``: trace list, trace detail and analytics latency at 1M spans, per backend."""
