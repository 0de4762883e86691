"""Passage tables: full text only unless their vectors are asked for (``--passage-vectors``); a dense
or hybrid search of one without vectors is refused at once in one line that names the flag (the
engine, the batched retrieval command); the judge's evidence is the same from vectors computed at
the search or stored; a table asked with vectors that has none is built again, and one built with
them keeps them."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipelines import retrieve
from pipelines.index.build import run
from pipelines.index.config import Config
from pipelines.index.engine import ArticleIndex, passage_table
from tests.fixtures.evaluate.data import ARTICLE_ROWS, utc, write_articles
from udfs.cli import InputError
from udfs.index_docs import pack_passages
from udfs.schemas import UTC_TS

WORDS = 6
CUTOFF = utc(2024, 6, 1)
PASSAGES = sum(len(pack_passages(text, WORDS)) for _, when, _, text in ARTICLE_ROWS if when)


def evidence(root: str) -> list[tuple[str, float]]:
    """The judge's five passages for a claim, from January to May 2024."""
    index = ArticleIndex(root, passage_table(WORDS))
    found = index.nearest("the river port reopened to cargo ships", utc(2024, 1, 1), utc(2024, 5, 31), 5)
    return [(h.doc_id, h.score) for h in found]


def test_passage_vectors_are_opt_in_and_dense_searches_need_them(tmp_path, ray_local, capsys):
    root = str(tmp_path / "root")
    write_articles(root)
    plain = run(Config(root=root, passage_words=(WORDS,)))
    assert plain.metrics[f"passages_{WORDS} rows written"] == PASSAGES
    assert f"passages_{WORDS} documents embedded" not in plain.metrics  # only the articles were
    index = ArticleIndex(root, passage_table(WORDS))
    assert not index.embedded and index.search("quay repairs", CUTOFF, 3, "bm25")
    for mode in ("dense", "hybrid"):
        with pytest.raises(InputError, match=rf"has no vectors .* --passage-vectors {WORDS} to embed them"):
            index.search("quay repairs", CUTOFF, 3, mode)
        with pytest.raises(InputError, match=f"--passage-vectors {WORDS}"):
            index.search_many([("quay repairs", CUTOFF, None)], 3, mode)
    queries = tmp_path / "queries.parquet"
    pq.write_table(
        pa.table({"query_id": ["q"], "query": ["quay"], "cutoff": pa.array([CUTOFF], UTC_TS)}), queries
    )
    argv = ["--root", root, "--queries", str(queries), "--out", str(tmp_path / "hits"), "--mode", "dense"]
    with pytest.raises(SystemExit) as stopped:
        retrieve.main([*argv, "--passage-words", str(WORDS)])
    (line,) = capsys.readouterr().err.strip().splitlines()[-1:]
    assert stopped.value.code == 2 and f"--passage-vectors {WORDS}" in line
    assert not (tmp_path / "hits").exists()  # refused before any work
    computed = evidence(root)
    assert computed[0][0].startswith("a-reopen#") and all(d.split("#")[0] != "a-late" for d, _ in computed)

    embedded = run(Config(root=root, passage_words=(WORDS,), passage_vectors=(WORDS,)))
    assert embedded.metrics[f"passages_{WORDS} documents embedded"] == PASSAGES  # the table built again
    assert "articles documents embedded" not in embedded.metrics and embedded.rows_written == 0
    index = ArticleIndex(root, passage_table(WORDS))
    assert index.embedded and len(index.search("quay repairs", CUTOFF, 3, "hybrid")) == 3
    stored = evidence(root)
    assert [d for d, _ in stored] == [d for d, _ in computed]
    assert [s for _, s in stored] == pytest.approx([s for _, s in computed], abs=1e-4)

    kept = run(Config(root=root, passage_words=(WORDS,)))  # asked for no vectors: the table keeps them
    assert kept.metrics["partitions changed"] == 0 and ArticleIndex(root, passage_table(WORDS)).embedded


def test_vectors_of_a_passage_size_not_indexed_are_refused():
    with pytest.raises(ValueError, match="--passage-vectors 512 names no table of --passage-words"):
        Config(root="r", passage_words=(100,), passage_vectors=(512,))
