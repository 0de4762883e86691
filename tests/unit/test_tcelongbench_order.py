"""S7 TLB-order: entity parsing and normalisation, the window builder and the order dedup."""

import contextlib
import datetime as dt
import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from udfs.llm_parsing import ParseError
from udfs.tcelongbench import order

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "tcelongbench"
D0 = dt.date(2015, 9, 1)


def test_normalize_entity():
    assert order.normalize_entity("  The European   Union. ") == "european union"
    assert order.normalize_entity("U.S.") == "u s"
    assert order.normalize_entity("Theresa May") == "theresa may"


def test_parse_entities_keeps_allowed_types():
    text = "Entities:\nGPE: Croatia\n- ORG: the UNHCR\nDATE: Thursday\nCARDINAL: 13,000\nGPE: croatia\nPERSON: 42"
    assert order.parse_entities(text) == {"entities": ["croatia", "unhcr"]}
    assert order.parse_entities("Entities: NONE") == {"entities": []}
    assert order.parse_entities("NONE") == {"entities": []}
    assert order.parse_entities("DATE: Monday") == {"entities": []}
    for bad in ("", "Croatia, Serbia", "Entities:"):
        with pytest.raises(ParseError):
            order.parse_entities(bad)


@given(st.text(max_size=200))
def test_parse_entities_never_crashes(text):
    with contextlib.suppress(ParseError):
        order.parse_entities(text)


def test_captured_real_entities_parse_or_fail_cleanly():
    cases = json.loads((FIXTURES / "entities.json").read_text())
    assert cases
    for case in cases:
        if case["ok"]:
            assert order.parse_entities(case["text"]) == case["parsed"]
        else:
            with pytest.raises(ParseError):
                order.parse_entities(case["text"])


def point(kp, day, j, entities):
    return {
        "kp_id": kp,
        "k": day,
        "date": D0 + dt.timedelta(days=day),
        "j": j,
        "text": f"text {kp}",
        "entities": entities,
    }


def test_entity_on_five_dates_gives_three_windows_with_increasing_dates():
    points = [point(f"p{d}", d, 1, ["croatia"]) for d in range(1, 6)]
    points.append(point("p3b", 3, 0, ["croatia", "croatia"]))  # lower j wins on day 3
    points.append(point("x", 2, 1, ["serbia"]))  # an entity on one date only: no window
    windows = order.order_windows(points)
    assert len(windows) == 3
    for w in windows:
        assert w["entity"] == "croatia" and len(w["kp_ids"]) == 3
        assert w["dates"][0] < w["dates"][1] < w["dates"][2]
    assert [w["kp_ids"] for w in windows] == [["p1", "p2", "p3b"], ["p2", "p3b", "p4"], ["p3b", "p4", "p5"]]


def test_two_dates_give_no_window():
    assert (
        order.order_windows([point("a", 1, 1, ["x"]), point("b", 2, 1, ["x"]), point("c", 2, 2, ["x"])]) == []
    )


def test_order_dedup_drops_two_shared_keeps_one_shared():
    problems = [["a", "b", "c"], ["b", "c", "d"], ["c", "d", "e"], ["a", "b", "c"]]
    assert order.dedup_order(problems) == [None, 0, None, 0]
