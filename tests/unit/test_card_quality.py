"""The dataset card's quality section, on a small table of items with hand-computed figures."""

from __future__ import annotations

import datetime as dt

from udfs.card_quality import quality_markdown, quality_section
from udfs.eval_items import items_table

UTC = dt.UTC


def _item(n: int, **kw) -> dict:
    base = {
        "item_id": f"i{n}",
        "benchmark": "demo",
        "task": "tf",
        "split": "test",
        "type": "yesno",
        "question": "Will the mayor of Chicago resign by May 2024?",  # 9 words
        "choices": ["Yes", "No"],
        "gold_index": 0,
        "t_cut": dt.datetime(2024, 5, 1, tzinfo=UTC),
        "t_resolve": dt.datetime(2024, 5, 11, tzinfo=UTC),
        "source_id": f"a{n % 2}",
    }
    return base | kw


def _items():
    return items_table(
        [
            _item(0),
            _item(1, gold_index=1, category="Politics"),
            _item(2, category="Politics", t_resolve=dt.datetime(2024, 5, 31, tzinfo=UTC)),
            _item(
                3,
                task="mc",
                type="mc",
                question="Who will win?",
                choices=["a", "b", "c", "d"],
                gold_index=2,
                category="Sports",
                t_resolve=None,
            ),
        ]
    )


def test_figures_by_hand() -> None:
    section = quality_section(
        _items(),
        {"quality_near_duplicate": 1, "quality_truncated": 2, "parse_error": 5},
        event_key=lambda r: r["source_id"],
        paper={"questions per day": "17.2"},
    )
    assert section["items"] == 4
    assert section["tasks"] == {"mc": 1, "tf": 3}
    assert section["rejected_by_quality_check"] == {"quality_near_duplicate": 1, "quality_truncated": 2}
    assert section["near_duplicate_rate"] == 0.2  # 1 of the 5 items that reached the check
    assert section["yes_no_balance"] == {"No": {"n": 1, "share": 0.333}, "Yes": {"n": 2, "share": 0.667}}
    assert section["gold_option_position"] == {"c": {"n": 1, "share": 1.0}}
    assert section["category_mix"]["Politics"] == {"n": 2, "share": 0.667}
    assert section["question_words"] == {"min": 3.0, "median": 9.0, "mean": 7.5, "p90": 9.0, "max": 9.0}
    assert section["horizon_days"] == {"min": 10.0, "median": 10.0, "mean": 16.67, "p90": 30.0, "max": 30.0}
    assert section["items_per_source"] == {
        "sources": 2,
        "min": 2.0,
        "median": 2.0,
        "mean": 2.0,
        "p90": 2.0,
        "max": 2.0,
    }
    assert section["paper"] == {"questions per day": "17.2"}


def test_markdown_lists_every_figure() -> None:
    section = quality_section(_items(), {}, paper={"questions per day": "17.2"})
    text = "\n".join(quality_markdown(section))
    assert text.startswith("## Quality")
    for expected in (
        "- items: 4",
        "rejected by the question checks: none",
        "yes/no answers: No 1 (33%), Yes 2 (67%)",
        "gold option position: c 1 (100%)",
        "question length (words): min 3.0",
        "- questions per day: 17.2",
    ):
        assert expected in text


def test_empty_benchmark() -> None:
    section = quality_section(items_table([]), {"quality_truncated": 3})
    assert section["items"] == 0 and section["near_duplicate_rate"] == 0.0
    assert section["question_words"] is None
    assert "- items: 0" in quality_markdown(section)
