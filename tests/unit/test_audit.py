"""The audit's checks on hand-built items, results and article dates."""

from __future__ import annotations

import datetime as dt

import pytest

from udfs import audit
from udfs.audit import BenchmarkAudit
from udfs.index_docs import article_of

CUT = dt.datetime(2024, 4, 1, tzinfo=dt.UTC)
BEFORE, AT = CUT - dt.timedelta(seconds=1), CUT
DATES = {"old": dt.datetime(2024, 3, 1, 9, tzinfo=dt.UTC), "late": AT, "undated": None, "gold": BEFORE}


def item(**kw):
    base = {"item_id": "q1", "split": "test", "type": "yesno", "question": "Will it?", "t_cut": CUT}
    return {**base, **kw}


def result(ids, dates=None, **kw):
    base = {"item_id": "q1", "model": "m", "setting": "retrieval-bm25.choice", "mode": "retrieval"}
    return {**base, "forecasting": True, "retrieved_ids": ids, "retrieved_dates": dates, **kw}


def violations(a: BenchmarkAudit) -> dict[str, list[str]]:
    return {k: [e["id"] for e in t.examples] for k, t in a.tallies.items() if t.violations}


def judge(items, results=()) -> BenchmarkAudit:
    a = BenchmarkAudit("b")
    by_id = {i["item_id"]: i for i in items}
    refs = audit.item_references(items) + audit.result_references(results, by_id)
    audit.check_references(refs, {k: v for k, v in DATES.items() if k in audit.referenced_articles(refs)}, a)
    return a


def test_passage_ids_map_to_their_article():
    assert article_of("abc#3") == "abc" and article_of("abc") == "abc" and article_of("a#b") == "a#b"
    assert audit.referenced_articles(audit.result_references([result(["old#0", "old#12"])], {})) == {"old"}


def test_missing_t_cut_is_reported_by_item():
    a = BenchmarkAudit("b")
    audit.check_cutoffs([item(), item(item_id="q2", t_cut=None)], a)
    assert a.tallies["missing_t_cut"].checked == 2 and violations(a) == {"missing_t_cut": ["q2"]}


def test_a_clean_context_counts_every_id_checked():
    a = judge([item(context_article_ids=["old", "gold#1"])], [result(["old"], [DATES["old"]])])
    assert not violations(a)
    assert {k: a.tallies[k].checked for k in ("after_cutoff", "missing", "undated", "date_mismatch")} == {
        "after_cutoff": 3,
        "missing": 3,
        "undated": 3,
        "date_mismatch": 1,
    }


def test_an_article_at_the_cutoff_is_a_leak_in_items_and_results():
    assert violations(judge([item(context_article_ids=["late"])])) == {"after_cutoff": ["q1"]}
    found = violations(judge([item()], [result(["late#0"], [AT])]))
    assert found == {"after_cutoff": ["q1 (m, retrieval-bm25.choice)"]}


def test_missing_and_undated_are_separate_kinds():
    a = judge([item(context_article_ids=["undated", "nowhere"])])
    assert violations(a) == {"undated": ["q1"], "missing": ["q1"]}
    assert "nowhere" in a.tallies["missing"].examples[0]["detail"]


def test_a_stored_date_that_disagrees_with_the_article():
    a = judge([item()], [result(["old", "gold"], [DATES["old"], DATES["old"]])])
    assert violations(a) == {"date_mismatch": ["q1 (m, retrieval-bm25.choice)"]}
    unstored = judge([item()], [result(["old", "gold"], [DATES["old"]])])
    assert unstored.tallies["date_mismatch"].checked == 2 and "gold stored none" in str(unstored.tallies)


def test_a_gold_article_in_a_context():
    assert violations(judge([item(gold_article_ids=["gold"])], [result(["gold"], [BEFORE])])) == {
        "gold_in_context": ["q1 (m, retrieval-bm25.choice)"]
    }
    assert violations(judge([item(gold_article_ids=["gold"], context_article_ids=["gold"])])) == {
        "gold_in_context": ["q1"]
    }


def test_gold_context_rows_are_exempt_but_only_when_not_forecasting():
    shown = dict(mode="gold_context", setting="gold_context.choice", forecasting=False)
    exempt = judge([item(gold_article_ids=["late"])], [result(["late", "undated"], [AT, None], **shown)])
    assert not violations(exempt) and exempt.tallies["date_mismatch"].checked == 2
    forecasting = judge(
        [item(gold_article_ids=["late"])], [result(["late"], [AT], **{**shown, "forecasting": True})]
    )
    assert set(violations(forecasting)) == {"gold_in_context", "after_cutoff"}


def test_a_result_without_its_item_is_judged_by_its_own_cutoff():
    a = judge([], [result(["late"], [AT], t_cut=CUT), result(["old"], [DATES["old"]], t_cut=CUT)])
    assert violations(a) == {"after_cutoff": ["q1 (m, retrieval-bm25.choice)"]}
    assert a.tallies["after_cutoff"].checked == 2


def test_one_event_in_two_splits():
    items = [
        item(item_id="q1", source_id="s1", split="train"),
        item(item_id="q2", source_id="s2", split="test"),
        item(item_id="q3", source_id="s3", split="test"),
        item(item_id="q4", source_id="unknown", split="dev"),
    ]
    a = BenchmarkAudit("b")
    unmapped = audit.check_splits(items, {"s1": "ce-A", "s2": "ce-A", "s3": "ce-B"}, "complex event", a)
    assert unmapped == 1 and a.tallies["split_overlap"].checked == 2
    assert violations(a) == {"split_overlap": ["ce-A"]}
    assert "test, train" in a.tallies["split_overlap"].examples[0]["detail"]


CHOICES = ["The dock workers' union", "The city council", "The ferry operator", "The port authority"]


@pytest.mark.parametrize(
    ("question", "leak"),
    [
        ("Will THE DOCK  workers' union strike in May?", True),
        ("Who will strike at the port in May?", False),
        ("Will the dock workers' unions strike?", False),  # whole words only
    ],
)
def test_mc_gold_choice_in_the_question(question, leak):
    a = BenchmarkAudit("b")
    audit.check_answers([item(type="mc", choices=CHOICES, gold_index=0, question=question)], a)
    assert a.tallies["answer_in_question"].checked == 1
    assert violations(a) == ({"answer_in_question": ["q1"]} if leak else {})


def test_short_and_shared_choices_are_not_searched():
    short = item(type="mc", choices=["Rain", "Snow", "Hail"], gold_index=0, question="Will rain fall?")
    shared = item(
        type="mc", choices=["Varna port", "Varna port closes", "Varna port opens"], gold_index=0,
        question="What happens to the Varna port?",
    )  # fmt: skip
    a = BenchmarkAudit("b")
    audit.check_answers([short, shared], a)
    assert a.tallies["answer_in_question"].checked == 2 and not violations(a)


def test_open_gold_texts_and_inapplicable_types():
    open_item = item(
        type="open", gold_texts=["a flood.", "The harbour reopens!"], question="Will the harbour reopens?"
    )
    others = [
        item(item_id=t, type=t, question="Will the harbour reopen?")
        for t in ("yesno", "binary_prob", "ordering")
    ]
    a = BenchmarkAudit("b")
    audit.check_answers([open_item, *others], a)
    assert a.tallies["answer_in_question"].checked == 1
    assert violations(a) == {"answer_in_question": ["q1"]}
    assert "the harbour reopens" in a.tallies["answer_in_question"].examples[0]["detail"]


def test_normalise():
    assert audit.normalise("  «The  Dock\tWorkers.» ") == "the dock workers"


def test_table_shows_each_kind_and_skipped_ones():
    a = judge([item(context_article_ids=["late"])])
    a.skipped.add("split_overlap")
    a.notes.append("split check skipped")
    text = audit.table(a)
    row = next(line for line in text.splitlines() if line.startswith(audit.KINDS["after_cutoff"]))
    assert row.split()[-3:] == ["1", "1", "q1"]
    assert (
        f"{audit.KINDS['split_overlap']}" in text
        and "skipped" in text
        and "note: split check skipped" in text
    )
    assert a.to_dict()["kinds"]["split_overlap"] == {"checked": None, "skipped": True}
