"""Full-text search over session events: the analyzer every backend shares (`analysis`),
snippets and score normalization (`snippet`), and the embedded tantivy index (`index`, with
its documents in `documents`) that the SQLite backend keeps beside its database."""
