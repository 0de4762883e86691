"""The corpus index: dated articles in a LanceDB table with full-text (BM25), vector and
publication-time indexes, built by a Ray job and searched with the cutoff inside every query."""
