"""Signals on their way into and out of the trace store.

Ingest turns every signal it accepts (native IngestBatch protos or OTLP) into *rows*: plain
dicts keyed by the trace store's column names (`rows`), validated, redacted, priced and sampled
on the way. The trace store writes rows and reads them back; `messages` converts them to and
from the spec's protobuf entities. One representation in the middle keeps the hot path free of
protobuf JSON conversions and lets every backend share the projection and facet logic.
"""
