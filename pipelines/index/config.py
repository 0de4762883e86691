"""Options of the index job."""

from __future__ import annotations

from dataclasses import dataclass

from udfs.cli import check_options, option


@dataclass(frozen=True)
class Config:
    """Everything one index run needs; every field is also a command-line option."""

    root: str = option(help="root URI holding corpus/articles; the index goes to ROOT/index/articles")
    lead_words: int = option(
        200, min=1, help="words of the body after the title that are indexed and embedded"
    )
    encoder: str = option(
        "all-MiniLM-L6-v2",
        help="sentence encoder: the bundled all-MiniLM-L6-v2, a local model path, or hashing-<dim> "
        "(a model-free feature-hashing encoder the benches use on synthetic text)",
    )
    passage_words: tuple[int, ...] = option(
        (100, 512),
        help="also index passages of at most N words per article, one table each, full text (BM25) "
        "(100: the judge's evidence, 512: TCELongBench's chunks); empty: none",
    )
    passage_vectors: tuple[int, ...] = option(
        (),
        help="passage sizes (of --passage-words) whose passages are embedded too, for dense and "
        "hybrid searches of that table; a table built with vectors keeps them",
    )
    batch_size: int = option(
        256,
        min=1,
        help="documents (articles or passages) per embedding call: each call stays short whatever "
        "the articles' length",
    )
    embed_actors: int = option(
        0,
        min=0,
        help="embedding actors (Ray Data actor pool size); 0: from one up to one per CPU of the "
        "cluster but one (at most this machine's cores when Ray runs locally); a hashing encoder "
        "embeds in tasks and needs none",
    )
    embed_gpus: float = option(0.0, min=0, help="GPUs per embedding actor (0: CPU)")

    def __post_init__(self) -> None:
        check_options(self)
        extra = sorted(set(self.passage_vectors) - set(self.passage_words))
        if extra:
            raise ValueError(f"--passage-vectors {extra[0]} names no table of --passage-words")
