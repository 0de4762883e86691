import datetime as dt

import pytest

from udfs.eval_items import YES_NO, InvalidItemError, items_table, validate_item

CUT = dt.datetime(2024, 5, 1, tzinfo=dt.UTC)


def item(**kw):
    base = {
        "item_id": "q1",
        "benchmark": "b",
        "task": "tf",
        "split": "test",
        "type": "yesno",
        "question": "Will?",
        "choices": YES_NO,
        "gold_index": 0,
        "t_cut": CUT,
    }
    return {**base, **kw}


def test_valid_items_of_every_type_build_a_table():
    items = [
        item(),
        item(item_id="q2", type="mc", choices=["a", "b", "c", "d"], gold_index=3),
        item(item_id="q3", type="binary_prob", choices=None, gold_index=None, gold_value=1.0),
        item(item_id="q4", type="ordering", choices=["x", "y", "z"], gold_index=None, gold_order=[2, 0, 1]),
        item(item_id="q5", type="open", choices=None, gold_index=None, gold_texts=["an event"]),
    ]
    table = items_table(items)
    assert table.num_rows == 5 and table.column("gold_order").to_pylist()[3] == [2, 0, 1]


@pytest.mark.parametrize(
    "bad",
    [
        item(type="trivia"),
        item(t_cut=None),
        item(choices=["Yes", "Maybe"]),
        item(gold_index=2),
        item(type="mc", choices=["a", "a", "b", "c"]),
        item(type="binary_prob", gold_value=0.4),
        item(type="ordering", choices=["x", "y"], gold_order=[0, 0]),
        item(type="open", gold_texts=[]),
        item(context_article_ids=["a1", "a2"], gold_article_ids=["a2"]),
    ],
)
def test_broken_items_are_refused(bad):
    with pytest.raises(InvalidItemError):
        validate_item(bad)


def test_repeated_ids_are_refused():
    with pytest.raises(InvalidItemError, match="repeats"):
        items_table([item(), item()])
