"""Importers: ForecastQA JSON (our fixture in the reported layout, and malformed variants) and
resolved binary questions (ForecastBench) as evaluation items."""

import copy
import datetime as dt
import json
from pathlib import Path

import pytest

from udfs.eval_items import EVAL_ITEM_SCHEMA
from udfs.evaluate.importers import (
    FORECASTQA_COUNTS,
    ForecastQAFormatError,
    forecastqa_items,
    load_forecastqa,
    question_items,
)
from udfs.questions import forecastbench_questions

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "evaluate" / "forecastqa_sample.json"


def sample() -> dict:
    return json.loads(FIXTURE.read_text())


def test_sample_file_imports_with_gold_and_cutoffs():
    table = load_forecastqa(str(FIXTURE), FIXTURE.read_bytes(), split="test")
    assert table.schema == EVAL_ITEM_SCHEMA
    rows = {r["source_id"]: r for r in table.to_pylist()}
    assert len(rows) == 5
    assert (
        rows["101"]["gold_index"] == 1 and rows["102"]["gold_index"] == 0 and rows["103"]["gold_index"] == 0
    )
    assert rows["201"]["type"] == "mc" and rows["201"]["choices"][rows["201"]["gold_index"]] == "Ana Petrova"
    assert rows["202"]["gold_index"] == 2
    assert rows["101"]["t_cut"] == dt.datetime(2019, 5, 1, tzinfo=dt.UTC)
    assert {r["benchmark"] for r in rows.values()} == {"forecastqa"} and {
        r["split"] for r in rows.values()
    } == {"test"}


def test_a_file_with_the_public_name_is_count_checked(tmp_path):
    path = tmp_path / "forecastQA_dev_public.json"
    path.write_text(FIXTURE.read_text())
    with pytest.raises(ForecastQAFormatError, match="differ from Table 2"):
        load_forecastqa(str(path), path.read_bytes())
    with pytest.raises(ForecastQAFormatError, match="give the split"):
        load_forecastqa(str(FIXTURE), FIXTURE.read_bytes())
    assert sum(FORECASTQA_COUNTS["test"].values()) == 1092


def _mutate(path: list, value):
    data = sample()
    target = data
    for key in path[:-1]:
        target = target[key]
    if value is KeyError:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return data


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (_mutate(["extra_questions"], []), "unknown"),
        (_mutate(["multichoice_questions"], KeyError), "missing"),
        (_mutate(["yesno_questions", 0, "source"], "x"), "unknown keys"),
        (_mutate(["yesno_questions", 0, "time_constraint"], KeyError), "missing"),
        (_mutate(["yesno_questions", 0, "answer"], "maybe"), "yes or no"),
        (_mutate(["yesno_questions", 0, "answer"], None), "no answer"),
        (_mutate(["yesno_questions", 1, "time_constraint"], "2018-12-31"), "outside"),
        (_mutate(["yesno_questions", 1, "time_constraint"], "2019-11-23"), "outside"),
        (_mutate(["yesno_questions", 1, "time_constraint"], "June 2019"), "unreadable"),
        (_mutate(["multichoice_questions", 0, "choices"], ["a", "b", "c"]), "exactly 4"),
        (_mutate(["multichoice_questions", 0, "choices"], ["a", "a", "b", "Ana Petrova"]), "exactly 4"),
        (_mutate(["multichoice_questions", 1, "answer"], "An earthquake"), "not one of the options"),
        (_mutate(["yesno_questions"], {"id": 1}), "must be a list"),
        ([], "top level"),
    ],
)
def test_malformed_variants_fail_with_a_reason(data, message):
    with pytest.raises(ForecastQAFormatError, match=message):
        forecastqa_items(copy.deepcopy(data), "test", check_counts=False)


def test_not_json_and_unknown_split(tmp_path):
    with pytest.raises(ForecastQAFormatError, match="not JSON"):
        load_forecastqa("x.json", b"{oops", split="dev")
    with pytest.raises(ForecastQAFormatError, match="unknown split"):
        load_forecastqa("x.json", FIXTURE.read_bytes(), split="holdout")


def test_boundary_dates_are_accepted():
    data = _mutate(["yesno_questions", 0, "time_constraint"], "2019-01-01")
    data["yesno_questions"][1]["time_constraint"] = "2019-11-22"
    items = forecastqa_items(data, "train", check_counts=False)
    assert items[1]["t_cut"] == dt.datetime(2019, 11, 22, tzinfo=dt.UTC)


def test_forecastbench_questions_become_binary_items(shared_data):
    q = shared_data / "questions" / "forecastbench_2024-07-21-human.json"
    r = shared_data / "questions" / "forecastbench_2024-07-21_resolution_set.json"
    questions, _ = forecastbench_questions(q, r)
    table, skipped = question_items(questions, "forecastbench")
    rows = table.to_pylist()
    assert len(rows) == questions.num_rows and skipped == {"no_freeze_time": 0}
    assert {r["type"] for r in rows} == {"binary_prob"} and {r["gold_value"] for r in rows} == {0.0, 1.0}
    assert all(r["t_cut"] == dt.datetime(2024, 7, 12, tzinfo=dt.UTC) for r in rows)
    answers = {q["question_id"]: q["answer"] for q in questions.to_pylist()}
    assert all(r["gold_value"] == answers[r["item_id"]] for r in rows)
    assert all(
        r["t_resolve"].date() == d
        for r, d in zip(rows, questions.column("resolution_date").to_pylist(), strict=True)
    )


def test_questions_without_freeze_time_are_skipped_and_counted():
    import pyarrow as pa

    from udfs.questions import QUESTIONS_SCHEMA

    q = {
        "question_id": "a",
        "source": "s",
        "question": "Will it?",
        "background": None,
        "resolution_criteria": "Rule.",
        "resolution_date": dt.date(2024, 5, 1),
        "answer": 1,
        "freeze_at": None,
        "url": None,
    }
    table, skipped = question_items(
        pa.Table.from_pylist(
            [q, {**q, "question_id": "b", "freeze_at": dt.datetime(2024, 4, 1, tzinfo=dt.UTC)}],
            QUESTIONS_SCHEMA,
        ),
        "mine",
    )
    assert table.num_rows == 1 and skipped == {"no_freeze_time": 1}
    assert table.to_pylist()[0]["background"] == ["Resolution criteria: Rule."]


def test_a_different_mc_layout_fails_naming_the_keys():
    """The MC keys are our assumption: a real file that names its options otherwise stops the
    import on its first MC item, naming what it has and what was expected."""
    data = sample()
    item = data["multichoice_questions"][0]
    item["options"] = item.pop("choices")
    with pytest.raises(
        ForecastQAFormatError,
        match=r"multichoice_questions\[0\]: unknown keys \['options'\], missing \[.choices.\] \(expected",
    ):
        forecastqa_items(data, "test", check_counts=False)
