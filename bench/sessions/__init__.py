"""Session search at scale: a synthetic transcript generator (``generator``, ``vocabulary``)
and the benchmark that imports and queries it (``run``: ``python -m bench sessions``)."""
