import datetime as dt
import json

import pytest

from udfs.questions import forecastbench_questions, load_questions_file, records_questions


@pytest.fixture(scope="module")
def forecastbench(shared_data):
    q = shared_data / "questions" / "forecastbench_2024-07-21-human.json"
    r = shared_data / "questions" / "forecastbench_2024-07-21_resolution_set.json"
    return forecastbench_questions(q, r)


def test_forecastbench_keeps_resolved_binary_questions(forecastbench, shared_data):
    table, skipped = forecastbench
    rows = table.to_pylist()
    assert len(rows) > 100
    assert {r["answer"] for r in rows} == {0, 1}
    assert all(
        "{resolution_date}" not in r["question"] and "{forecast_due_date}" not in r["question"] for r in rows
    )
    assert all(r["freeze_at"] == dt.datetime(2024, 7, 12, tzinfo=dt.UTC) for r in rows)
    assert len({r["question_id"] for r in rows}) == len(rows)
    # independent count: resolved 0/1 rows of questions in the set (markets counted once)
    qs = json.loads((shared_data / "questions" / "forecastbench_2024-07-21-human.json").read_text())[
        "questions"
    ]
    rs = json.loads((shared_data / "questions" / "forecastbench_2024-07-21_resolution_set.json").read_text())[
        "resolutions"
    ]
    rs = [r for r in rs if isinstance(r["id"], str)]  # combined questions have list ids
    market = {(q["source"], q["id"]) for q in qs if not isinstance(q["resolution_dates"], list)}
    dataset = {(q["source"], q["id"]) for q in qs} - market
    ok = [r for r in rs if r["resolved"] and r["resolved_to"] in (0.0, 1.0) and r["direction"] is None]
    key = lambda r: (r["source"], r["id"])  # noqa: E731 - ids repeat across sources ("1348")
    expected = sum(key(r) in dataset for r in ok) + len({key(r) for r in ok if key(r) in market})
    assert len(rows) == expected
    assert skipped["no_resolution"] == 200 - len({key(r) for r in rs if key(r) in market | dataset})


def test_dataset_question_gets_one_row_per_horizon(forecastbench):
    table, _ = forecastbench
    ids = [r["question_id"] for r in table.to_pylist() if "@" in r["question_id"]]
    bases = {i.split("@")[0] for i in ids}
    assert len(ids) > len(bases)


def test_jsonl_importer_and_its_errors(tmp_path):
    good = tmp_path / "q.jsonl"
    good.write_text(
        json.dumps({"id": "a", "question": "Will X?", "resolution_date": "2024-05-01", "answer": 1})
        + "\n"
        + json.dumps(
            {"id": "b", "question": "Will Y?", "resolution_date": "2024-05-02", "answer": 0, "source": "mine"}
        )
    )
    table = load_questions_file(str(good))
    assert table.column("source").to_pylist() == ["q", "mine"]
    assert table.column("resolution_date").to_pylist() == [dt.date(2024, 5, 1), dt.date(2024, 5, 2)]
    with pytest.raises(ValueError, match="answer must be 0 or 1"):
        records_questions([{"id": "a", "question": "?", "resolution_date": "2024-01-01", "answer": 0.5}], "x")
    with pytest.raises(ValueError, match="missing"):
        records_questions([{"id": "a", "question": "?"}], "x")
    with pytest.raises(ValueError, match="repeat"):
        records_questions(
            [{"id": "a", "question": "?", "resolution_date": "2024-01-01", "answer": 1}] * 2, "x"
        )


def test_an_id_two_platforms_share_gets_its_platform_prefix(tmp_path):
    """ForecastBench ids are unique per platform only ("1348" is on metaculus and infer)."""
    market = {"resolution_dates": "N/A", "background": "", "freeze_datetime": "2024-07-12T00:00:00Z"}
    questions = {
        "forecast_due_date": "2024-07-21",
        "questions": [
            {**market, "id": "1348", "source": "metaculus", "question": "Will A?"},
            {**market, "id": "1348", "source": "infer", "question": "Will B?"},
            {**market, "id": "77", "source": "infer", "question": "Will C?"},
        ],
    }
    resolved = {"resolved": True, "direction": None, "resolution_date": "2024-08-01"}
    resolutions = {
        "resolutions": [
            {**resolved, "id": "1348", "source": "metaculus", "resolved_to": 1.0},
            {**resolved, "id": "1348", "source": "infer", "resolved_to": 0.0},
            {**resolved, "id": "77", "source": "infer", "resolved_to": 1.0},
        ]
    }
    (tmp_path / "q.json").write_text(json.dumps(questions))
    (tmp_path / "r.json").write_text(json.dumps(resolutions))
    table, _ = forecastbench_questions(tmp_path / "q.json", tmp_path / "r.json")
    got = {r["question_id"]: (r["question"], r["answer"]) for r in table.to_pylist()}
    assert got == {"metaculus:1348": ("Will A?", 1), "infer:1348": ("Will B?", 0), "77": ("Will C?", 1)}
