"""A seeded synthetic news corpus in the real ``corpus/articles`` schema, written in chunks.

    summary = write_corpus(root, n=200_000, seed=0)     # ROOT/corpus/articles, one file per day
    queries = draw_queries(200, seed=0)                  # query text + a cutoff inside the span

    python -m bench.synthetic --root ROOT [--articles 200000] [--seed 0]

What it holds (the same for a seed whatever the chunk size):

* **publish times** uniform over three years (2021-01-01 to 2024-01-01 UTC, microsecond
  precision); about 1 % of the articles are **undated** (null ``published_at``, in the
  ``__HIVE_DEFAULT_PARTITION__`` partition, as the corpus job writes them);
* **text**: 300–800 words drawn from a fixed vocabulary: 40 English function words (40 % of the
  tokens, the words a stopword list removes) and 50,000 made-up content words (60 %) whose
  frequencies follow a Zipf law, p(rank r) ∝ 1/(r + 7) (Zipf–Mandelbrot: the most frequent content
  word is ~1.4 % of content tokens, as in news text, instead of the 9 % of a bare 1/r);
* a **title** of 5–10 content words, a **host** among 300 (Zipf-popular), a URL, an ``article_id``
  of the canonical URL, ``n_chars`` and ``text_hash`` like the corpus job's.

Articles are generated day by day (one random stream per day, one for each block of undated
articles) and written a chunk of whole days at a time, so memory holds one chunk
(``chunk_articles``), never the corpus: it runs at a million articles. The vocabulary is the
same for every seed; a seed picks the days' counts, texts, titles and hosts.

The benches write their corpora with it (``bench.retrieval``); the command writes one under a root
of your choice (to try the index job or a builder at scale) and ends with one JSON line: the
summary (articles, dated, undated, files, bytes, seconds).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.fs as pafs

from udfs import storage
from udfs.ids import stable_id
from udfs.schemas import ARTICLES

START = dt.datetime(2021, 1, 1, tzinfo=dt.UTC)
END = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
DAYS = (END - START).days  # 1095
DAY_US = 86_400_000_000
UNDATED_SHARE = 0.01
UNDATED_BLOCK = 1000  # undated articles come from their own random stream per block of this many
MIN_WORDS, MAX_WORDS = 300, 800
TITLE_WORDS = (5, 10)
CONTENT_WORDS = 50_000
ZIPF_SHIFT = 7
FUNCTION_SHARE = 0.4
HOSTS = 300
# Function words (all in the usual English stopword lists), most frequent first.
FUNCTION_WORDS = [
    "the", "of", "and", "to", "a", "in", "that", "is", "was", "for", "on", "it", "with", "as", "he",
    "be", "at", "by", "his", "this", "had", "not", "are", "but", "from", "or", "have", "an", "they",
    "which", "you", "were", "her", "she", "there", "been", "their", "has", "would", "will",
]  # fmt: skip
VOCAB_SEED = 20_240_101


@dataclass(frozen=True)
class Shape:
    """How the corpus is spread and how long its articles are (the defaults: the retrieval bench's)."""

    days: int = DAYS  # publication days from START
    words: tuple[int, int] = (MIN_WORDS, MAX_WORDS)  # body words, uniform in this range
    paragraph_words: int | None = None  # mean words of a paragraph (one per line); None: one line

    @classmethod
    def long_articles(cls, mean_words: int, days: int) -> Shape:
        """Bodies of ``mean_words`` words on average (from half to 1.5 times that) in paragraphs
        of about 60 words, over ``days`` days: a news corpus of long reports."""
        return cls(days, (max(1, mean_words // 2), mean_words * 3 // 2), 60)


@dataclass(frozen=True)
class Query:
    text: str
    cutoff: dt.datetime  # aware UTC, microseconds; articles strictly before it are eligible


@dataclass(frozen=True)
class Vocabulary:
    words: np.ndarray  # object array of str: function words, then content words by rank
    cdf: np.ndarray  # cumulative probabilities of ``words``
    content_cdf: np.ndarray  # cumulative probabilities of the content words alone
    hosts: np.ndarray  # object array of host names
    host_cdf: np.ndarray

    @property
    def content(self) -> np.ndarray:
        return self.words[len(FUNCTION_WORDS) :]

    def tokens(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` words of running text."""
        return self.words[np.searchsorted(self.cdf, rng.random(n), side="right")]

    def content_tokens(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return self.content[np.searchsorted(self.content_cdf, rng.random(n), side="right")]


def _made_up_words(rng: np.random.Generator, n: int, banned: set[str]) -> list[str]:
    """``n`` distinct pronounceable made-up words, shortest first (frequent words are short)."""
    onsets = [
        "b", "c", "d", "f", "g", "h", "j", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "z",
        "br", "dr", "gr", "kl", "pl", "st", "tr", "sk", "ch", "sh", "th",
    ]  # fmt: skip
    vowels = ["a", "e", "i", "o", "u", "ai", "ea", "ou"]
    codas = ["", "", "", "n", "r", "l", "s", "m", "k"]
    words: dict[str, None] = {}
    while len(words) < n:
        syllables = rng.choice([1, 2, 3], p=[0.1, 0.5, 0.4], size=4096)
        onset = rng.integers(0, len(onsets), (4096, 3))
        vowel = rng.integers(0, len(vowels), (4096, 3))
        coda = rng.integers(0, len(codas), 4096)
        for i, count in enumerate(syllables):
            word = "".join(onsets[onset[i, j]] + vowels[vowel[i, j]] for j in range(count)) + codas[coda[i]]
            if len(word) > 2 and word not in banned:
                words.setdefault(word, None)
    return sorted(list(words)[:n], key=len)


def vocabulary() -> Vocabulary:
    """The fixed vocabulary (function words, 50,000 Zipf-distributed made-up words, hosts)."""
    from bm25s.stopwords import STOPWORDS_EN

    rng = np.random.default_rng(VOCAB_SEED)
    content = _made_up_words(rng, CONTENT_WORDS + HOSTS, set(STOPWORDS_EN) | set(FUNCTION_WORDS))
    fw = 1.0 / np.arange(1, len(FUNCTION_WORDS) + 1)
    cw = 1.0 / (np.arange(1, CONTENT_WORDS + 1) + ZIPF_SHIFT)
    probs = np.concatenate([FUNCTION_SHARE * fw / fw.sum(), (1 - FUNCTION_SHARE) * cw / cw.sum()])
    hw = 1.0 / np.arange(1, HOSTS + 1)
    hosts = np.array([f"www.{w}.example" for w in content[CONTENT_WORDS:]], dtype=object)
    return Vocabulary(
        words=np.array(FUNCTION_WORDS + content[:CONTENT_WORDS], dtype=object),
        cdf=_cdf(probs),
        content_cdf=_cdf(cw),
        hosts=hosts,
        host_cdf=_cdf(hw),
    )


def _cdf(weights: np.ndarray) -> np.ndarray:
    cdf = np.cumsum(weights / weights.sum())
    cdf[-1] = 1.0
    return cdf


def day_counts(n: int, seed: int, days: int = DAYS) -> tuple[np.ndarray, int]:
    """Articles per day over the span, and the number of undated articles (sum = ``n``)."""
    rng = np.random.default_rng([seed, 0])
    p = np.full(days + 1, (1 - UNDATED_SHARE) / days)
    p[-1] = UNDATED_SHARE
    counts = rng.multinomial(n, p)
    return counts[:-1], int(counts[-1])


def _articles(
    vocab: Vocabulary,
    rng: np.random.Generator,
    n: int,
    times: np.ndarray | None,
    key: str,
    shape: Shape = Shape(),
) -> dict[str, list]:
    """``n`` articles: ``times`` are their publish times (µs since the epoch), None when undated;
    ``key`` makes their URLs unique."""
    lengths = rng.integers(shape.words[0], shape.words[1] + 1, n)
    words = vocab.tokens(rng, int(lengths.sum())).tolist()
    ends = np.cumsum(lengths).tolist()
    title_lengths = rng.integers(TITLE_WORDS[0], TITLE_WORDS[1] + 1, n)
    title_words = vocab.content_tokens(rng, int(title_lengths.sum())).tolist()
    title_ends = np.cumsum(title_lengths).tolist()
    hosts = vocab.hosts[np.searchsorted(vocab.host_cdf, rng.random(n), side="right")].tolist()
    crawl_lag = rng.integers(0, 3 * DAY_US, n)
    # the crawl time is all an undated article has
    end = _us(START) + shape.days * DAY_US
    crawled = (rng.integers(_us(START), end, n) if times is None else times) + crawl_lag
    breaks = None
    if shape.paragraph_words:  # a paragraph ends after a word with probability 1/mean
        breaks = (rng.random(len(words)) < 1 / shape.paragraph_words).tolist()
    cols: dict[str, list] = {c: [] for c in ARTICLES.schema.names}
    for i in range(n):
        span = range(ends[i] - lengths[i], ends[i])
        if breaks is None:
            text = " ".join(words[ends[i] - lengths[i] : ends[i]])
        else:
            text = "".join(words[j] + ("\n" if breaks[j] and j < span[-1] else " ") for j in span).strip()
        title = " ".join(title_words[title_ends[i] - title_lengths[i] : title_ends[i]]).capitalize()
        url = f"https://{hosts[i]}/news/{'-'.join(title.lower().split()[:4])}-{key}-{i}"
        published = None if times is None else _datetime(times[i])
        cols["article_id"].append(stable_id(url))
        cols["url"].append(url)
        cols["canonical_url"].append(url)
        cols["host"].append(hosts[i])
        cols["title"].append(title)
        cols["text"].append(text)
        cols["published_at"].append(published)
        cols["date_source"].append(None if published is None else "synthetic")
        cols["crawled_at"].append(_datetime(crawled[i]))
        cols["language"].append("en")
        cols["n_chars"].append(len(text))
        cols["text_hash"].append(stable_id(text))
        cols["near_duplicate_of"].append(None)
        cols["warc_file"].append(None)
        cols["warc_record_id"].append(None)
        cols["extractor"].append("synthetic")
        cols["published_date"].append(None if published is None else published.date())
    return cols


def _us(when: dt.datetime) -> int:
    return (when - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)) // dt.timedelta(microseconds=1)


def _datetime(us: int) -> dt.datetime:
    return dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(microseconds=int(us))


def day_articles(
    vocab: Vocabulary, seed: int, day: int, count: int, shape: Shape = Shape()
) -> dict[str, list]:
    """The ``count`` articles of day ``day`` (0 = START), in publish order."""
    rng = np.random.default_rng([seed, 1, day])
    times = np.sort(rng.integers(0, DAY_US, count)) + _us(START) + day * DAY_US
    return _articles(vocab, rng, count, times, f"d{day}", shape)


def undated_articles(
    vocab: Vocabulary, seed: int, block: int, count: int, shape: Shape = Shape()
) -> dict[str, list]:
    rng = np.random.default_rng([seed, 2, block])
    return _articles(vocab, rng, count, None, f"u{block}", shape)


def chunks(n: int, seed: int, chunk_articles: int = 20_000, shape: Shape = Shape()) -> Iterator[pa.Table]:
    """The corpus as tables of about ``chunk_articles`` articles (whole days; the undated articles
    spread over the chunks), in the ARTICLES schema."""
    vocab = vocabulary()
    counts, undated = day_counts(n, seed, shape.days)
    blocks = [min(UNDATED_BLOCK, undated - s) for s in range(0, undated, UNDATED_BLOCK)]
    pending: dict[str, list] = {c: [] for c in ARTICLES.schema.names}
    rows = blocks_done = 0

    def add(articles: dict[str, list]) -> int:
        for c, values in articles.items():
            pending[c].extend(values)
        return len(articles["article_id"])

    for days_done, count in enumerate(counts.tolist(), 1):
        rows += add(day_articles(vocab, seed, days_done - 1, count, shape))
        last = days_done == shape.days
        while blocks_done < len(blocks) and (last or blocks_done < len(blocks) * days_done // shape.days):
            rows += add(undated_articles(vocab, seed, blocks_done, blocks[blocks_done], shape))
            blocks_done += 1
        if rows >= chunk_articles or last:
            yield pa.Table.from_pydict(pending, schema=ARTICLES.schema)
            pending = {c: [] for c in ARTICLES.schema.names}
            rows = 0


def write_corpus(
    root: str, n: int, seed: int = 0, chunk_articles: int = 20_000, shape: Shape = Shape()
) -> dict[str, Any]:
    """Write ``n`` synthetic articles to ``ROOT/corpus/articles`` (replacing what was there), hive-
    partitioned by ``published_date``, one chunk at a time; returns a summary."""
    started = time.perf_counter()
    uri = ARTICLES.uri(root)
    fs, path = storage.filesystem(uri)
    if storage.exists(uri):
        fs.delete_dir(path)
    fs.create_dir(path, recursive=True)
    partitioning = ds.partitioning(pa.schema([ARTICLES.schema.field("published_date")]), flavor="hive")
    written = undated = chunk_count = 0
    for number, table in enumerate(chunks(n, seed, chunk_articles, shape)):
        ds.write_dataset(
            table,
            path,
            filesystem=fs,
            format="parquet",
            partitioning=partitioning,
            existing_data_behavior="overwrite_or_ignore",
            basename_template=f"part-{number:05d}-{{i}}.parquet",
            max_rows_per_group=64 * 1024,
            max_partitions=shape.days + 1,
        )
        written += table.num_rows
        undated += table["published_at"].null_count
        chunk_count += 1
    stored = [
        i for i in fs.get_file_info(pafs.FileSelector(path, recursive=True)) if i.type == pafs.FileType.File
    ]
    return {
        "articles": written,
        "dated": written - undated,
        "undated": undated,
        "chunks": chunk_count,
        "start": START.isoformat(),
        "end": (START + dt.timedelta(days=shape.days)).isoformat(),
        "seed": seed,
        "files": len(stored),
        "bytes": sum(i.size for i in stored),
        "seconds": round(time.perf_counter() - started, 1),
    }


def draw_queries(n: int, seed: int = 0, words: tuple[int, int] = (2, 6)) -> list[Query]:
    """``n`` queries: 2–6 distinct content words drawn like the articles' own (a forecaster's query
    names the topic of some story), each with a cutoff uniform over the span, microseconds
    included."""
    vocab = vocabulary()
    rng = np.random.default_rng([seed, 3])
    out = []
    for _ in range(n):
        size = int(rng.integers(words[0], words[1] + 1))
        picked: list[str] = []
        while len(picked) < size:
            word = vocab.content_tokens(rng, 1)[0]
            if word not in picked:
                picked.append(word)
        cutoff = _datetime(int(rng.integers(_us(START), _us(END))))
        out.append(Query(" ".join(picked), cutoff))
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.synthetic", description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--root", required=True, help="root URI: the corpus goes to ROOT/corpus/articles (replaced)"
    )
    p.add_argument("--articles", type=int, default=200_000, help="articles to write")
    p.add_argument("--seed", type=int, default=0, help="seed of the days' counts, texts, titles and hosts")
    args = p.parse_args(argv)
    print(json.dumps(write_corpus(args.root, args.articles, args.seed)))


if __name__ == "__main__":
    main()
