"""OpenForecast dates, splits, cut times and question sampling: ranges, seeds, option rules,
VQA balance, the leak filter, and temporal assertions that fire on injected violations."""

import datetime as dt
import json

import pytest

from udfs.eval_items import items_table
from udfs.openforecast import questions as q
from udfs.openforecast.dates import add_months, extract_date, period
from udfs.openforecast.items import LTF_QUESTION, eval_item, search_query
from udfs.openforecast.structured import really_happened
from udfs.openforecast.temporal import (
    PAPER_CUTOFFS,
    NoCutError,
    SplitCutoffs,
    TemporalLeakError,
    assert_before_cut,
    cut_time,
)

D = dt.date


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2023-08-31", "2023-08-31"),
        ("It ended in 2023-08, on 2023-08-31.", "2023-08-31"),  # a full date wins wherever it is
        ("around 2023-8", "2023-08"),
        ("in 1999 and 2023-07", "2023-07"),  # year-month before a bare year
        ("The year 1987.", "1987"),
        ("2023-02-30", "2023-02"),  # invalid day: the year-month still counts
        ("2023-13-01", "2023"),
        ("Unknown", None),
        ("10/10/2010", "2010"),
        ("12345 people", None),
        ("", None),
        (None, None),
    ],
)
def test_date_regex_preference(text, expected):
    assert extract_date(text) == expected


def test_periods_of_partial_dates():
    assert period("2023") == period("2023-01").__class__(D(2023, 1, 1), D(2024, 1, 1))
    assert period("2023-12").end == D(2024, 1, 1) and period("2023-12").last_day == D(2023, 12, 31)
    assert period("2024-02-29").last_day == D(2024, 2, 29) and period(None) is None
    assert add_months(D(2026, 3, 31), -1) == D(2026, 2, 28) and add_months(D(2026, 1, 15), 12) == D(
        2027, 1, 15
    )


def test_paper_splits_resolve_partial_dates_to_their_last_day():
    c = PAPER_CUTOFFS
    assert c.assign(period("2023-06-30")) == "train"
    assert c.assign(period("2023-07-01")) == "dev"
    assert (
        c.assign(period("2023-08-31")) == "dev"
    )  # the code put this day in test; the paper's dates are inclusive
    assert c.assign(period("2023-09-01")) == "test"
    assert c.assign(period("2023")) == "test"  # 2023 counts as 2023-12-31
    assert c.assign(period("2023-06")) == "train"
    assert c.assign(period("2024-04-01")) is None
    with pytest.raises(TemporalLeakError):
        c.check_ce("train", period("2023-07-01"))
    with pytest.raises(TemporalLeakError):
        c.check_ce("test", period("2023-08-31"))


def test_newer_corpora_rule():
    c = SplitCutoffs.from_test_start(D(2026, 3, 1))
    assert (c.train_end, c.dev_end, c.test_end) == (D(2025, 12, 31), D(2026, 2, 28), D(2026, 9, 30))
    assert c.start("dev") == D(2026, 1, 1) and c.start("test") == D(2026, 3, 1) and c.start("train") is None
    with pytest.raises(ValueError, match="train_end < dev_end"):
        SplitCutoffs(D(2024, 1, 1), D(2023, 1, 1), D(2025, 1, 1))


def periods(*values):
    return [period(v) for v in values]


def test_cut_time_rules():
    assert cut_time(periods("2026-01-01", "2026-01-03", "2026-01-05"), 1) == D(2026, 1, 3)  # e[k]'s day
    assert cut_time(periods("2026-01-01", None, "2026-01-05"), 1) == D(
        2026, 1, 2
    )  # the day after the background
    assert cut_time(periods("2026-01", "2026-03-02"), 1) == D(2026, 3, 2)
    with pytest.raises(NoCutError, match="undated_cut"):
        cut_time(periods(None, None, "2026-01-05"), 1)
    with pytest.raises(NoCutError, match="not_chronological"):
        cut_time(periods("2026-01-01", "2026-01-01"), 1)  # same day: no cut can separate them
    with pytest.raises(NoCutError, match="not_chronological"):
        cut_time(periods("2026-01-05", None, "2026-01-02"), 1)
    with pytest.raises(NoCutError, match="before_split_start"):
        cut_time(periods("2026-01-01", "2026-01-03"), 1, split_start=D(2026, 2, 1))
    with pytest.raises(NoCutError, match="cut_out_of_range"):
        cut_time(periods("2026-01-01"), 0)


def _timeline(n, split="train", split_start=None, dated=True, structured=True, ce="ce1"):
    events = []
    for i in range(n):
        day = (D(2026, 1, 1) + dt.timedelta(days=i)).isoformat()
        shape = (
            {"type": "attack", "trigger": "attacks", "time": day, "location": f"Town {i}", "subject": "Army", "object": f"Post {i}"},
        )  # fmt: skip
        events.append(
            q.AtomicEvent(f"{day}: Event {i}." if dated else f"Event {i}.", day if dated else None, shape if structured else None)
        )  # fmt: skip
    return q.CETimeline(ce, split, split_start, "Armed conflicts and attacks", tuple(events))


@pytest.mark.parametrize("n", range(5, 25))
@pytest.mark.parametrize("split", ["train", "test"])
def test_ltf_cut_ranges(n, split):
    tl = _timeline(n, split)
    samples, reason = q.sample_ltf(tl, seed=1)
    assert reason is None and 1 <= len(samples) <= 2
    lo = 2 * n // 3
    for s in samples:
        k = s["cut_idx"]
        assert (lo if split == "train" and len(samples) == 2 else lo - 1) <= k <= n - 2
        assert s["background"] == [e.text for e in tl.events[:k]]
        assert s["gold_texts"] == [e.text for e in tl.events[k:]] and len(s["gold_texts"]) >= 2
        q.check_sample_time(s, tl)
    assert len({s["cut_idx"] for s in samples}) == len(samples)
    assert q.sample_ltf(tl, seed=1) == (samples, None)  # seeded


def test_too_short_and_undated_timelines_give_reasons():
    assert q.sample_ltf(_timeline(4), 0) == ([], "too_few_events")
    assert q.sample_ltf(_timeline(8, dated=False), 0) == ([], "undated_cut")
    assert q.sample_stf(_timeline(8, dated=False), 0) == ([], "no_dated_target_day")
    assert q.mcnc_targets(_timeline(6), 0) == ([], "no_cut_range")
    assert q.argument_targets(_timeline(8, structured=False), 0)[1] == "no_structured_target"


def test_stf_days_first_index_at_least_two_and_gold_is_every_event_of_the_day():
    tl = _timeline(6)
    events = list(tl.events)
    events[4] = q.AtomicEvent("Another event on day 3.", events[3].ts)
    tl = q.CETimeline("ce1", "train", None, None, tuple(events))
    samples, _ = q.sample_stf(tl, seed=3, max_dates=10)
    days = {s["target_day"] for s in samples}
    assert days == {"2026-01-03", "2026-01-04", "2026-01-06"}  # index 0 and 1 never; 4 shares day 3
    day3 = next(s for s in samples if s["target_day"] == "2026-01-04")
    assert day3["target_idx"] == [3, 4] and day3["cut_idx"] == 3 and day3["t_cut"] == D(2026, 1, 4)
    assert len(q.sample_stf(tl, seed=3)[0]) == 2
    for s in samples:
        q.check_sample_time(s, tl)


def test_dev_and_test_cuts_never_predate_the_split_start():
    tl = _timeline(12, "test", split_start=D(2026, 1, 9))
    for sampler in (q.sample_ltf, q.sample_stf, q.mcnc_targets, q.argument_targets):
        samples, _ = sampler(tl, 0)
        assert samples and all(s["t_cut"] >= D(2026, 1, 9) for s in samples)
    late = _timeline(12, "test", split_start=D(2026, 3, 1))
    assert q.sample_ltf(late, 0) == ([], "before_split_start")


def test_mcnc_cuts_and_true_events():
    train, _ = q.mcnc_targets(_timeline(12), seed=5)
    assert len({r["cut_idx"] for r in train}) == 1 and 2 <= len(train) <= 3
    test, _ = q.mcnc_targets(_timeline(12, "test", D(2026, 1, 1)), seed=5)
    assert len({r["cut_idx"] for r in test}) == 2
    for r in train + test:
        assert 8 <= r["cut_idx"] <= 9 and r["target_idx"][0] >= r["cut_idx"]
        assert r["true_event"] == f"2026-01-{r['target_idx'][0] + 1:02d}: Event {r['target_idx'][0]}."
    assert q.mcnc_targets(_timeline(9, "dev", D(2026, 1, 1)), 0) == ([], "too_few_cuts")


def test_argument_targets_pick_allowed_arguments():
    requests, _ = q.argument_targets(_timeline(9), seed=2)
    assert 1 <= len(requests) <= 2 and len({r["cut_idx"] for r in requests}) == 1
    for r in requests:
        assert r["argument"] in ("type", "time", "location", "subject", "object")
        assert r["target_event"] not in r["other_events"]
    sparse = _timeline(9)
    events = [
        q.AtomicEvent(e.text, e.ts, ({"type": "attack", "trigger": "x", "location": None},))
        for e in sparse.events
    ]
    only_type = q.CETimeline("ce1", "train", None, None, tuple(events))
    assert all(r["argument"] == "type" for r in q.argument_targets(only_type, 0)[0])
    drawn = [
        r["argument"] for seed in range(200) for r in q.argument_targets(_timeline(9, ce=f"c{seed}"), seed)[0]
    ]
    assert {"type", "time", "location", "subject", "object"} <= set(drawn)


def test_negatives_and_options():
    assert q.distractor_problem("A happens.", ["B", "C", "D"]) is None
    assert q.distractor_problem("A happens.", ["B", "C"]) == "not_three_candidates"
    assert q.distractor_problem("A happens.", ["B", " a happens ", "D"]) == "candidate_equals_gold"
    assert q.distractor_problem("A happens.", ["B", "b.", "D"]) == "candidates_repeat"
    assert q.distractor_problem("A happens.", ["B", "", "D"]) == "not_three_candidates"


def _mcnc_question(seed, ce="ce1"):
    request = q.mcnc_targets(_timeline(12, ce=ce), seed)[0][0]
    return q.build_mcnc(request, ["Wrong one.", "Wrong two.", "Wrong three."], seed), request


def test_mc_questions_have_four_distinct_options_and_one_gold():
    for seed in range(30):
        mcnc, request = _mcnc_question(seed, ce=f"c{seed}")
        assert len(mcnc["choices"]) == 4 and len(set(mcnc["choices"])) == 4
        assert [c == request["true_event"] for c in mcnc["choices"]].count(True) == 1
        assert mcnc["choices"][mcnc["gold_index"]] == request["true_event"]
    golds = {_mcnc_question(seed, ce=f"c{seed}")[0]["gold_index"] for seed in range(30)}
    assert golds == {0, 1, 2, 3}  # shuffled


def test_vqa_labels_are_near_balanced_and_match_mcnc():
    vqas = []
    for seed in range(600):
        mcnc, _ = _mcnc_question(0, ce=f"ce{seed}")
        vqa = q.build_vqa(mcnc, seed=7)
        expected = mcnc["choices"][mcnc["gold_index"]]
        assert (vqa["candidate"] == expected) == (vqa["gold_index"] == 0)
        assert vqa["candidate"] in mcnc["choices"] and vqa["background"] == mcnc["background"]
        vqas.append(vqa["gold_index"])
    share_yes = vqas.count(0) / len(vqas)
    assert 0.45 <= share_yes <= 0.55


def test_aqa_and_mcac_pair_up():
    request = q.argument_targets(_timeline(9), seed=2)[0][0]
    parsed = {
        "question": "Who attacks?",
        "true_answer": "Army",
        "wrong_answers": ["Navy", "Police", "Rebels"],
    }
    aqa, mcac = q.build_argument_pair(request, parsed, seed=0)
    assert aqa["gold_texts"] == ["Army"] and aqa["question"] == mcac["question"]
    assert mcac["choices"][mcac["gold_index"]] == "Army" and sorted(mcac["choices"]) == [
        "Army",
        "Navy",
        "Police",
        "Rebels",
    ]
    assert aqa["sample_id"] != mcac["sample_id"] and aqa["target_idx"] == mcac["target_idx"]


def test_leak_filter_compares_events_without_time():
    future = [[{"type": "attack", "trigger": "attacks", "time": "2026-01-05", "location": "Town", "subject": "Army", "object": "Post"}]]  # fmt: skip
    same_but_later = [{"type": "Attack", "trigger": "attacks", "time": "2027-01-01", "location": "town", "subject": "Army", "object": "Post"}]  # fmt: skip
    other = [{"type": "attack", "trigger": "attacks", "time": None, "location": "City", "subject": "Army", "object": "Post"}]  # fmt: skip
    assert really_happened(same_but_later, future)
    assert not really_happened(other, future)
    assert not really_happened(same_but_later + other, future)  # every event must have happened
    with pytest.raises(ValueError):
        really_happened([], future)


def test_injected_temporal_violations_fire():
    tl = _timeline(10)
    sample = q.sample_ltf(tl, 0)[0][0]
    q.check_sample_time(sample, tl)
    with pytest.raises(TemporalLeakError, match="background event"):
        q.check_sample_time({**sample, "t_cut": sample["t_cut"] - dt.timedelta(days=2)}, tl)
    late = list(tl.events)
    late[0] = q.AtomicEvent(late[0].text, "2026-02-01")  # the same event, now dated after the cut
    with pytest.raises(TemporalLeakError, match="background event 0"):
        q.check_sample_time(sample, q.CETimeline("ce1", "train", None, None, tuple(late)))
    with pytest.raises(TemporalLeakError, match="target event"):
        q.check_sample_time({**sample, "t_cut": sample["t_cut"] + dt.timedelta(days=30)}, tl)
    with pytest.raises(AssertionError, match="background is not"):
        q.check_sample_time({**sample, "background": [*sample["background"], tl.events[-1].text]}, tl)
    with pytest.raises(TemporalLeakError):
        assert_before_cut(periods("2026-01-01", "2026-01"), D(2026, 1, 15), "x")


def test_eval_items_from_every_task_validate():
    tl = _timeline(12)
    ltf = q.sample_ltf(tl, 0)[0][0]
    stf = q.sample_stf(tl, 0)[0][0]
    mcnc, _ = _mcnc_question(0)
    vqa = q.build_vqa(mcnc, 0)
    request = q.argument_targets(tl, 0)[0][0]
    parsed = {
        "question": "Who attacks?",
        "true_answer": "Army",
        "wrong_answers": ["Navy", "Police", "Rebels"],
    }
    aqa, mcac = q.build_argument_pair(request, parsed, 0)
    items = [eval_item(s, None, "Harbour dispute") for s in (ltf, stf, mcnc, vqa, aqa, mcac)]
    table = items_table(items)
    assert table.column("type").to_pylist() == ["open", "open", "mc", "yesno", "open", "mc"]
    for item, sample in zip(items, (ltf, stf, mcnc, vqa, aqa, mcac), strict=True):
        assert item["t_cut"] == dt.datetime.combine(sample["t_cut"], dt.time(), dt.UTC)
        assert item["background"] == sample["background"] and item["t_cut"] is not None
        assert item["query"].startswith("Harbour dispute ")
    json.dumps(items, default=str)


def test_search_queries_carry_the_event_and_the_question_content():
    """The fixed LTF/STF/MCNC question texts never reach the query; what varies per item does."""
    tl = _timeline(12)
    ltf, stf = q.sample_ltf(tl, 0)[0][0], q.sample_stf(tl, 0)[0][0]
    mcnc, _ = _mcnc_question(0)
    vqa = q.build_vqa(mcnc, 0)
    assert search_query(ltf, "Title") == " ".join(["Title", *ltf["background"][-2:]])
    assert search_query(stf, "Title") == " ".join(["Title", *stf["background"][-2:]])
    assert search_query(mcnc, "Title") == " ".join(["Title", *mcnc["choices"]])
    assert search_query(vqa, None) == vqa["question"]
    for sample in (ltf, stf, mcnc):
        question = sample.get("question") or LTF_QUESTION
        assert question not in search_query(sample, "Title")


def _ledger(tmp_path):
    from pipelines.llm.config import LLMConfig
    from pipelines.llm.ledger import Ledger
    from pipelines.llm.stage import StageRunner
    from pipelines.openforecast import Config

    config = Config(root=str(tmp_path), llm=LLMConfig(backend="scripted", script={}))
    return config, Ledger(StageRunner(config.root, "openforecast", config.llm))


def test_the_builder_refuses_leaking_questions_and_generator_inputs(tmp_path, monkeypatch):
    from pipelines.openforecast import tasks

    config, ledger = _ledger(tmp_path)
    short = _timeline(4)  # STF only: no model call is needed
    assert tasks.build_questions(config, ledger, {short.ce_id: short})["stf"]
    real_stf, real_mcnc = q.sample_stf, q.mcnc_targets

    def late_cut(sampler):
        def draw(tl, seed):
            samples, reason = sampler(tl, seed)
            return [{**s, "t_cut": s["t_cut"] - dt.timedelta(days=3)} for s in samples], reason

        return draw

    monkeypatch.setattr(q, "sample_stf", late_cut(real_stf))
    with pytest.raises(TemporalLeakError, match="stf"):
        tasks.build_questions(config, ledger, {short.ce_id: short})
    monkeypatch.setattr(q, "sample_stf", real_stf)
    monkeypatch.setattr(q, "mcnc_targets", late_cut(real_mcnc))
    longer = _timeline(12)
    with pytest.raises(TemporalLeakError, match="mcnc"):  # before the negatives are generated
        tasks.build_questions(config, ledger, {longer.ce_id: longer})
