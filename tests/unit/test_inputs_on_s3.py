"""Entry points whose user-given input files live on S3 (a moto server): every one is read through
``udfs.storage``, as a ``ray job submit`` driver on a head node needs (the submitting machine's
disk is not there)."""

from __future__ import annotations

from pathlib import Path

import pytest

from udfs import storage
from udfs.cli import read_settings
from udfs.questions import forecastbench_questions, load_questions_file

pytestmark = pytest.mark.s3

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
FQA = FIXTURES / "evaluate" / "forecastqa_sample.json"
QSET = "forecastbench_2024-07-21-human.json"
RSET = "forecastbench_2024-07-21_resolution_set.json"


def upload(local: Path, uri: str) -> str:
    storage.write_bytes(uri, local.read_bytes())
    return uri


@pytest.fixture
def forecastbench_on_s3(s3_root, shared_data) -> tuple[str, str]:
    questions = shared_data / "questions"
    return (
        upload(questions / QSET, storage.join(s3_root, "inputs", QSET)),
        upload(questions / RSET, storage.join(s3_root, "inputs", RSET)),
    )


def test_forecastbench_files_on_s3_import_as_from_disk(forecastbench_on_s3, shared_data):
    from_s3, skipped_s3 = forecastbench_questions(*forecastbench_on_s3)
    local = shared_data / "questions"
    from_disk, skipped_disk = forecastbench_questions(str(local / QSET), str(local / RSET))
    assert from_s3.num_rows > 0
    assert from_s3.equals(from_disk) and skipped_s3 == skipped_disk


def test_question_file_on_s3_keeps_its_name_as_source(s3_root):
    uri = storage.join(s3_root, "inputs", "my_questions.jsonl")
    storage.write_bytes(
        uri, b'{"id": "q1", "question": "Will it rain?", "resolution_date": "2024-08-01", "answer": 1}\n'
    )
    table = load_questions_file(uri)
    assert table.column("source").to_pylist() == ["my_questions"]


def test_evaluate_reads_every_input_kind_from_s3(forecastbench_on_s3, s3_root):
    from pipelines.evaluate.inputs import load_items

    fqa = upload(FQA, storage.join(s3_root, "inputs", FQA.name))
    questions = storage.join(s3_root, "inputs", "asked.jsonl")
    storage.write_bytes(
        questions,
        b'{"id": "q1", "question": "Will it rain?", "resolution_date": "2024-08-01", "answer": 1, '
        b'"freeze_at": "2024-07-01T00:00:00Z"}\n',
    )
    storage.write_bytes(storage.join(s3_root, "root", "corpus", ".keep"), b"")
    items, summary = load_items(
        storage.join(s3_root, "root"), None, (forecastbench_on_s3,), (questions,), (fqa,), "test"
    )
    benchmarks = {i["benchmark"] for i in items}
    assert {"forecastbench", "forecastqa", "asked"} <= benchmarks
    assert summary.rows_written == len(items) > 0


def test_prophet_reads_forecastbench_from_s3(forecastbench_on_s3, s3_root):
    from pipelines.prophet.config import Config
    from pipelines.prophet.questions import load_questions

    config = Config(root=storage.join(s3_root, "root"), forecastbench=forecastbench_on_s3, limit=2)
    table, _ = load_questions(config)
    assert table.num_rows == 2


def test_a_settings_file_on_s3_is_read(s3_root):
    from pipelines.llm.config import LLMConfig

    uri = storage.join(s3_root, "conf", "llm.yaml")
    storage.write_bytes(uri, b"backend: local\nmax_new_tokens: 7\n")
    assert read_settings(uri, LLMConfig) == {"backend": "local", "max_new_tokens": 7}
