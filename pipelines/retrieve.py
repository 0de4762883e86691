"""Batched retrieval: a table of queries with their own cutoffs through the article index, as a
Ray Data stage (one open index handle per actor, many queries per batch).

    python -m pipelines.retrieve --root ROOT --queries queries.parquet --out hits/ [--mode bm25] [--k 10]

Input rows: ``query_id``, ``query``, ``cutoff`` (a UTC timestamp; every hit is published strictly
before it) and optionally ``since``. Output: Parquet files under ``--out`` with one row per hit,
``query_id, rank, article_id, score, published_at`` (and ``passage_id`` for a passage table),
for builders to join against. The driver holds neither the queries nor the hits: Ray Data reads,
searches and writes them block by block; only the counts come back.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq

from pipelines.index.engine import MODES, TABLE, ArticleIndex, has_index, passage_table
from udfs import storage
from udfs.cli import InputError, check_options, option, run_cli
from udfs.layout import Layout
from udfs.report import RunSummary
from udfs.schemas import UTC_TS

log = logging.getLogger("augury.retrieve")
QUERY_COLUMNS = ("query_id", "query", "cutoff")
HITS = pa.schema(
    [
        pa.field("query_id", pa.string(), nullable=False),
        pa.field("rank", pa.int32(), nullable=False),
        pa.field("article_id", pa.string(), nullable=False),
        pa.field("passage_id", pa.string()),
        pa.field("score", pa.float64(), nullable=False),
        pa.field("published_at", UTC_TS, nullable=False),
    ]
)


@dataclass(frozen=True)
class Config:
    """One batched retrieval run."""

    root: str = option(help="root URI whose index was built by python -m pipelines.index")
    queries: str = option(help="Parquet file or directory of query_id, query, cutoff [, since]")
    out: str = option(
        help="directory (path or s3://) the hit table is written to; a previous hit table there is replaced"
    )
    mode: str = option(
        "bm25",
        choices=MODES,
        help="bm25, dense, hybrid (reciprocal rank fusion), bm25_title (a title match counts 1.25x) or tfidf",
    )
    k: int = option(10, min=1, help="hits per query")
    strict: bool = option(False, help="BM25 with term statistics of each query's window only")
    passage_words: int | None = option(None, min=1, help="search the passages of N words instead of articles")
    actors: int = option(1, min=1, help="search actors (each opens the index once)")
    batch_size: int = option(64, min=1, help="queries per batch")

    def __post_init__(self) -> None:
        check_options(self)


class Searcher:
    """Ray Data actor: one open index table, the queries of a batch searched together
    (``ArticleIndex.search_many``), each with its own cutoff."""

    def __init__(self, root: str, table: str, mode: str, k: int, strict: bool) -> None:
        self.index = ArticleIndex(root, table)
        self.mode, self.k, self.strict = mode, k, strict

    def __call__(self, batch: pa.Table) -> pa.Table:
        ids, cutoffs = batch["query_id"].to_pylist(), batch["cutoff"].to_pylist()
        since = batch["since"].to_pylist() if "since" in batch.column_names else [None] * batch.num_rows
        for query_id, cutoff in zip(ids, cutoffs, strict=True):
            if cutoff is None:
                raise ValueError(f"query {query_id} has no cutoff")
        found = self.index.search_many(
            list(zip(batch["query"].to_pylist(), cutoffs, since, strict=True)),
            self.k,
            self.mode,
            self.strict,
            text=False,  # the hit table holds ids, scores and times
        )
        rows = [
            {
                "query_id": query_id,
                "rank": h.rank,
                "article_id": h.source_id or h.doc_id,
                "passage_id": h.doc_id if h.source_id else None,
                "score": h.score,
                "published_at": h.published_at,
            }
            for query_id, hits in zip(ids, found, strict=True)
            for h in hits
        ]
        return pa.Table.from_pylist(rows, schema=HITS)


def run(config: Config) -> RunSummary:
    """Search every query of ``config.queries``; write the hits under ``config.out``."""
    import ray
    from ray.data import SaveMode

    from pipelines.llm.config import LLMConfig
    from pipelines.llm.ray_env import ensure_ray

    Layout(config.root).check_root()
    if not has_index(config.root):
        raise InputError(f"no index under {config.root}: run python -m pipelines.index --root {config.root}")
    if not storage.exists(config.queries):
        raise InputError(f"no such queries table: {config.queries}")
    table = passage_table(config.passage_words) if config.passage_words else TABLE
    # a missing passage table, or its vectors for a dense search: an error before any work
    ArticleIndex(config.root, table).check(config.mode, config.strict)
    _check_out(config)
    summary = RunSummary(f"retrieve: {table} ({config.mode}, k={config.k})")
    ensure_ray(LLMConfig())
    fs, path = storage.filesystem(config.queries)
    queries = ray.data.read_parquet(path, filesystem=fs)
    missing = set(QUERY_COLUMNS) - set(queries.schema().names)
    if missing:
        raise InputError(f"{config.queries} lacks the columns {', '.join(sorted(missing))}")
    summary.rows_read = queries.count()
    hits = queries.map_batches(
        Searcher,
        fn_constructor_args=(config.root, table, config.mode, config.k, config.strict),
        batch_size=config.batch_size,
        batch_format="pyarrow",
        compute=ray.data.ActorPoolStrategy(size=config.actors),
    )
    out_fs, out_path = storage.filesystem(config.out)
    # a rerun replaces the hit table: Ray Data's default mode appended, and every hit came twice
    hits.write_parquet(out_path, filesystem=out_fs, mode=SaveMode.OVERWRITE)
    summary.rows_written = summary.rows_read  # every query searched; one with no match has no hit rows
    summary.metrics["hits written"] = storage.count_rows(config.out)
    log.info(
        "stage=retrieve %d queries searched, %d hits", summary.rows_read, summary.metrics["hits written"]
    )
    summary.finish()
    print(summary.table())
    return summary


def _check_out(config: Config) -> None:
    """Refuse an ``--out`` the run must not replace: a file, the root or a directory holding it or
    the queries, or one that holds anything but a hit table (flat Parquet files of its columns) —
    a mistyped ``--out`` must not empty a corpus table or a root."""
    out = storage.normalize_uri(config.out).rstrip("/")
    if storage.is_file(out):
        raise InputError(f"--out {config.out} is a file, not a directory")
    for what, uri in (("--root", config.root), ("--queries", config.queries)):
        if (storage.normalize_uri(uri).rstrip("/") + "/").startswith(out + "/"):
            raise InputError(f"--out {config.out} holds {what} {uri}: give a directory of its own")
    files = storage.list_files(out)
    others = [f for f in files if not f.endswith(".parquet") or "/" in f[len(out) + 1 :]]
    if not others and files:
        fs, path = storage.filesystem(files[0])
        others = [] if set(HITS.names) <= set(pq.read_schema(path, filesystem=fs).names) else files[:1]
    if others:
        raise InputError(
            f"--out {config.out} holds files that are not a hit table (e.g. {others[0]}); give an empty or new directory"
        )


def main(argv: list[str] | None = None) -> None:
    run_cli(Config, run, "python -m pipelines.retrieve", __doc__.split("\n\n")[0], argv)


if __name__ == "__main__":
    main()
