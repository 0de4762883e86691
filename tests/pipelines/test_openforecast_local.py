"""The OpenForecast builder with the embedded Gemma 3 270M base model on the real sample corpus.

Every generate stage asks for its declared answer form (fitted to the run's token cap), so the
model's answers parse: the build must write non-empty timelines (the candidates the question
samplers read) and every generated answer must validate against the form its stage sent. What
the base model writes is poor (it repeats lines), so what is checked is shape, not content.
"""

import datetime as dt
import json

import pytest

from pipelines.llm.attempts import answer_budget, below_cap
from pipelines.llm.config import LLMConfig
from pipelines.openforecast import Config, run
from pipelines.openforecast.stages import REORDER_COLUMN
from udfs import storage
from udfs.llm_parsing import check_output
from udfs.openforecast import outputs
from udfs.prompts import load_prompt

pytestmark = [pytest.mark.llm, pytest.mark.ray, pytest.mark.spark]

STORIES = ("2025 Malagasy protests", "Syrian conflict|SDF–Syrian transitional government clashes")
CAP = 64  # three timeline items of up to 40 characters, one structured event
GENERATE = ("timeline_r00", "timeline_r01", "adjust", "timestamps", "structured", "wiki_date")


def _stage_rows(root: str, stage: str) -> list[dict]:
    uri = storage.join(root, "openforecast", stage, "output")
    return storage.read_table(uri).to_pylist() if storage.exists(uri) else []


def test_local_model_writes_timelines_whose_answers_all_validate(ray_local, root_with_corpus):
    config = Config(
        root=root_with_corpus,
        wiki_titles=("Asda",),
        wcep_stories=STORIES,
        max_docs=2,
        max_doc_words=60,
        timeline_samples=1,
        min_timeline_events=1,
        test_start=dt.date(2026, 3, 1),
        llm=LLMConfig(max_new_tokens=CAP),
    )
    result = run(config)
    names = [s.name.split("/", 1)[1] for s in result.summaries]
    for stage in ("wiki_category", "wiki_date", "wiki_heading", *GENERATE[:-1], "mcac_questions"):
        assert stage in names, stage
    assert all(s.reconciles for s in result.summaries)
    by_name = {s.name.split("/", 1)[1]: s for s in result.summaries}
    assert by_name["wiki_category"].rows_read == 1 and by_name["timeline_r00"].rows_read == 2

    # the candidates: timelines of both stories, their atomic events described
    assert result.tables["ce"].num_rows == 2 and result.tables["atomic_event"].num_rows >= 2
    assert {r["model"] for r in result.tables["timeline_rounds"].to_pylist() if r["model"]} == {
        "gemma-3-270m"
    }

    checked = 0
    for stage in GENERATE:
        for row in _stage_rows(config.root, stage):
            prompt = load_prompt(row["prompt_id"])
            form = below_cap(prompt.id, outputs.fitted)(answer_budget(prompt.id, CAP)) or prompt.output
            if stage == "adjust":
                form = json.loads(row[REORDER_COLUMN])
            check_output(form, row["raw_text"])  # raises on an answer outside the form
            assert row["parse_ok"], (stage, row["parse_error"])
            checked += 1
    assert checked >= 2 + 2 + 2 * by_name["timestamps"].rows_read > 4
    assert all(r["reason"] for r in result.tables["rejected"].to_pylist())
    assert storage.exists(storage.join(config.root, "benchmarks", "openforecast", "dataset_card.json"))
