"""Where the article index lives: the LanceDB database of a root and the names of its tables.

The job (``build``), the statistics (``statistics``) and the searches (``engine``) all open the
index through ``connect``; this module imports none of them.
"""

from __future__ import annotations

import os

from udfs import storage
from udfs.cli import InputError
from udfs.layout import Layout

TABLE = "articles"
# Lance file format 2.1, made for reading a few rows (a search's hits): on a 200k-article table a
# BM25 search with its prefilter and fetch measured ~0.4 ms faster than on format 2.0
STORAGE_VERSION = "2.1"
S3_ENV = {  # environment variable → LanceDB storage option
    "AWS_ENDPOINT_URL": "aws_endpoint",
    "AWS_ACCESS_KEY_ID": "aws_access_key_id",
    "AWS_SECRET_ACCESS_KEY": "aws_secret_access_key",
    "AWS_DEFAULT_REGION": "aws_region",
}


def worker_env() -> dict:
    """The driver's S3 endpoint and credentials, for Ray workers that open the index themselves."""
    return {"env_vars": {k: os.environ[k] for k in S3_ENV if k in os.environ}}


def passage_table(words: int) -> str:
    """The table of passages of at most ``words`` words."""
    return f"passages_{words}"


def connect(root: str):
    """The LanceDB database of ``root``'s index (a path or ``s3://``; S3 through the same
    endpoint and credentials as s3fs, ``AWS_ENDPOINT_URL`` included)."""
    import lancedb

    uri = Layout(root).index()
    if not storage.is_s3(uri):
        return lancedb.connect(storage.local_path(uri))
    options = {"allow_http": "true"} if os.environ.get("AWS_ENDPOINT_URL", "").startswith("http:") else {}
    for env, key in S3_ENV.items():
        if os.environ.get(env):
            options[key] = os.environ[env]
    return lancedb.connect(storage.normalize_uri(uri), storage_options=options)


def has_index(root: str) -> bool:
    """Whether ``root`` holds a built article index (asking creates nothing)."""
    if not storage.exists(Layout(root).index()):
        return False
    return TABLE in connect(root).list_tables().tables


def require_index(root: str) -> None:
    """An ``InputError`` that says how to build the index when ``root`` has none."""
    if not has_index(root):
        raise InputError(f"no article index at {root}: run python -m pipelines.index --root {root} first")


def has_title_index(table) -> bool:
    """Whether ``table`` has the full-text index on ``title`` that ``bm25_title`` searches."""
    return any(i.index_type == "FTS" and list(i.columns) == ["title"] for i in table.list_indices())


def has_vectors(table) -> bool:
    """Whether ``table`` holds embeddings: the articles table does, a passage table when it was
    built with ``--passage-vectors``."""
    return "vector" in table.schema.names
