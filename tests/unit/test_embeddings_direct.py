"""The bundled MiniLM runs through transformers alone (``udfs.embeddings.MeanPooled``): the very
vectors sentence-transformers gives, on real text, in a process that never imports it; a model
of other modules still goes through sentence-transformers."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from udfs.embeddings import DEFAULT_ENCODER, MeanPooled, _encoder, bundled_encoder_path, embed, load_encoder

EDGES = ["", " ", "  padded  ", "tabs\tand\n\nnew lines", "Zürich, Kraków — 東京 🎉", "a", "b"]


def _texts(shared_data: Path) -> list[str]:
    """Real text of every length: reported.ly articles (past the 256-token cut), WikiTimes
    events, ForecastBench questions, and some edge strings (ties in length included)."""
    wcep = shared_data / "wcep"
    articles = [json.loads(line) for line in (wcep / "reportedly_articles_2015-09.json").open()]
    texts = ["\n".join(a["text"]) for a in articles[:8]]
    texts += [e["description"] for e in json.loads((wcep / "wikitimes_CEP_2015-09.json").read_text())[:60]]
    questions = json.loads((shared_data / "questions" / "forecastbench_2024-07-21-human.json").read_text())
    texts += [q["question"] for q in questions["questions"][:60]]
    return texts + EDGES


@pytest.mark.llm  # a model: not in ``make test-fast``
def test_the_bundled_encoder_gives_sentence_transformers_vectors_exactly(shared_data):
    assert isinstance(_encoder(DEFAULT_ENCODER), MeanPooled)
    texts = _texts(shared_data)
    assert len(texts) > 120 and sum(len(t) > 2_000 for t in texts) >= 6  # cut at 256 tokens
    library = load_encoder(DEFAULT_ENCODER)
    for batch_size in (16, 7):  # two batchings (ties in length split differently)
        expected = library.encode(
            texts,
            batch_size=batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        vectors = embed(texts, DEFAULT_ENCODER, batch_size=batch_size)
        assert vectors.dtype == np.float32 and vectors.shape == (len(texts), 384)
        assert np.array_equal(vectors, expected), batch_size


@pytest.mark.llm
def test_embedding_with_the_bundled_encoder_imports_no_sentence_transformers():
    code = (
        "import sys\nfrom udfs.embeddings import embed\n"
        "assert embed(['harbour board', 'ferries late']).shape == (2, 384)\n"
        "print('sentence_transformers' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize(
    ("change", "fits"),
    [
        (lambda d: None, True),
        (lambda d: _edit(d / "1_Pooling" / "config.json", pooling_mode_cls_token=True), False),
        (
            lambda d: _edit(
                d / "1_Pooling" / "config.json", pooling_mode_mean_tokens=False, pooling_mode_max_tokens=True
            ),
            False,
        ),
        (lambda d: _edit(d / "sentence_bert_config.json", do_lower_case=True), False),
        (
            lambda d: (d / "modules.json").write_text(
                json.dumps(json.loads((d / "modules.json").read_text())[:2])
            ),
            False,
        ),
        (lambda d: (d / "1_Pooling" / "config.json").unlink(), False),
    ],
    ids=["bundled", "cls-too", "max", "lower-case", "no-normalize", "no-pooling-config"],
)
def test_only_a_transformer_mean_pooled_and_normalised_is_run_directly(tmp_path, change, fits):
    model = tmp_path / "model"  # the files ``fits`` reads
    for name in ("modules.json", "sentence_bert_config.json", "1_Pooling/config.json"):
        (model / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(Path(bundled_encoder_path(), name), model / name)
    change(model)
    assert MeanPooled.fits(model) is fits


def _edit(path: Path, **values) -> None:
    path.write_text(json.dumps({**json.loads(path.read_text()), **values}))
