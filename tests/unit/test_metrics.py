"""Metric functions against hand-computed values."""

import datetime as dt
import math

import pytest

from udfs import metrics
from udfs.metrics import LRAECounts


def test_uniform_forecasts_give_the_papers_brier_values():
    assert metrics.brier_sum([0.5, 0.5], 0) == pytest.approx(0.5)
    assert metrics.brier_sum([0.25] * 4, 3) == pytest.approx(0.75)
    assert metrics.uniform_brier_sum(2) == 0.5 and metrics.uniform_brier_sum(4) == 0.75
    assert metrics.brier_binary(0.5, 1.0) == 0.25 and metrics.brier_binary(0.5, 0.0) == 0.25
    assert metrics.scale_brier(0.2542, "binary_x100") == pytest.approx(25.42)


def test_brier_sum_is_twice_binary_on_binary_items_and_bounded():
    for p, y in ((0.9, 1.0), (0.3, 1.0), (0.7, 0.0)):
        assert metrics.brier_sum([p, 1 - p], 0 if y == 1.0 else 1) == pytest.approx(
            2 * metrics.brier_binary(p, y)
        )
    assert metrics.brier_sum([1.0, 0.0, 0.0, 0.0], 0) == 0.0
    assert metrics.brier_sum([0.0, 1.0, 0.0, 0.0], 0) == 2.0  # certain and wrong
    assert metrics.brier_sum([0.7, 0.1, 0.1, 0.1], 0) == pytest.approx(0.09 + 3 * 0.01)
    with pytest.raises(ValueError):
        metrics.scale_brier(0.1, "sum")


def test_argmax_ties_go_to_the_lowest_index_and_are_flagged():
    assert metrics.argmax_first([0.2, 0.4, 0.4]) == (1, True)
    assert metrics.argmax_first([0.5, 0.3, 0.2]) == (0, False)


def test_levenshtein_and_ordering_metrics():
    assert metrics.levenshtein("ACB", "ABC") == 2
    assert metrics.levenshtein("", "ABC") == 3 and metrics.levenshtein("ABC", "ABC") == 0
    assert metrics.order_metrics([[0, 1, 2]], [[0, 1, 2]]) == {
        "accuracy": 1.0,
        "weighted_f1": 1.0,
        "levenshtein": 0.0,
    }
    # one exact, one swap (positions 2-3 wrong), one invalid (all wrong, distance 3)
    scores = metrics.order_metrics([[0, 1, 2], [0, 2, 1], None], [[0, 1, 2]] * 3)
    assert scores["accuracy"] == pytest.approx(1 / 3)
    assert scores["levenshtein"] == pytest.approx((0 + 2 + 3) / 3)
    # per label (pooled positions): label 0 recall 2/3 precision 1; labels 1, 2 recall 1/3 precision 1/2
    f1 = [2 * 1 * (2 / 3) / (1 + 2 / 3), 2 * 0.5 * (1 / 3) / (0.5 + 1 / 3), 2 * 0.5 * (1 / 3) / (0.5 + 1 / 3)]
    assert scores["weighted_f1"] == pytest.approx(sum(f1) / 3)


def test_uniform_ordering_expectations():
    import itertools

    perms = [list(p) for p in itertools.permutations(range(3))]
    scores = metrics.order_metrics(perms, [[0, 1, 2]] * 6, weights=[1 / 6] * 6)
    assert scores["accuracy"] == pytest.approx(1 / 6) and scores["levenshtein"] == pytest.approx(10 / 6)


def test_lrae_test_vector_of_the_spec():
    # 4 predictions, 3 labels: p1 and p2 match l1 in stage 1, p3 accepted in stage 2, p4 fails both
    stage1, stage2 = [0, 0, None, None], [False, False, True, False]
    paper = metrics.lrae_counts(stage1, stage2, 3, "paper")
    assert paper == LRAECounts(tp=2, mtp=1, fp=1, fn=2)
    p, r, f1 = metrics.open_prf(paper)
    assert (p, r) == (pytest.approx(0.75), pytest.approx(0.60)) and f1 == pytest.approx(0.6667, abs=1e-4)
    code = metrics.open_prf(metrics.lrae_counts(stage1, stage2, 3, "code"))
    assert code == (pytest.approx(0.5), pytest.approx(0.5), pytest.approx(0.5))
    # without retrieval augmentation (MTP = 0): eq. 1
    assert metrics.open_prf(metrics.lrae_counts(stage1, [False] * 4, 3, "paper"))[0] == pytest.approx(0.5)


def test_lrae_empty_prediction_scores_zero_and_bad_input_is_refused():
    assert metrics.open_prf(metrics.lrae_counts([], [], 2)) == (0.0, 0.0, 0.0)
    with pytest.raises(ValueError, match="names no gold label"):
        metrics.lrae_counts([3], [False], 2)
    with pytest.raises(ValueError, match="tp_mode"):
        metrics.lrae_counts([0], [False], 2, "other")


def test_micro_and_macro_all_match_forecastqa_table_6():
    parts = [(584, 73.6), (508, 80.7)]
    assert round(metrics.micro_all(parts), 1) == 76.9
    assert metrics.macro_all(parts) == pytest.approx(77.15)
    # integrated model, Table 3: micro 60.1, macro 59.35
    assert round(metrics.micro_all([(584, 70.3), (508, 48.4)]), 1) == 60.1
    assert metrics.macro_all([(584, 70.3), (508, 48.4)]) == pytest.approx(59.35)


def test_bootstrap_intervals_are_seeded_and_cover_the_mean():
    values = [1.0] * 30 + [0.0] * 70
    low, high = metrics.mean_ci(values, seed=7)
    assert (low, high) == metrics.mean_ci(values, seed=7)
    assert low < 0.3 < high and low > 0.15 and high < 0.45
    generic = metrics.bootstrap_ci(len(values), lambda idx: sum(values[i] for i in idx) / len(idx), seed=7)
    assert generic[0] < 0.3 < generic[1]
    assert metrics.mean_ci([0.5] * 10, seed=1) == (0.5, 0.5)


def test_monthly_drift_ma5_yearly_and_yoy_by_hand():
    # accuracies for 2020-01..2021-02; 2020-03 has no questions
    acc = {(2020, m): 0.5 + m / 100 for m in range(1, 13) if m != 3} | {(2021, 1): 0.4, (2021, 2): 0.6}
    months, correct = [], []
    for (y, m), a in acc.items():
        n = 100
        months += [dt.date(y, m, 15)] * n
        correct += [1.0] * round(a * n) + [0.0] * (n - round(a * n))
    rows = metrics.monthly_drift(months, correct)
    assert [r.month for r in rows][:4] == [dt.date(2020, m, 1) for m in (1, 2, 3, 4)]
    march = rows[2]
    assert march.n == 0 and march.accuracy is None and march.ma5 == pytest.approx((0.51 + 0.52) / 2)
    may = rows[4]  # trailing window Jan..May, March missing: min_periods=1 means the mean of what exists
    assert may.ma5 == pytest.approx((0.51 + 0.52 + 0.54 + 0.55) / 4)
    jan21 = rows[12]
    assert jan21.yoy == pytest.approx(100 * (0.40 - 0.51) / 0.51)
    assert rows[13].yoy == pytest.approx(100 * (0.60 - 0.52) / 0.52)
    yearly = metrics.yearly_accuracy(rows)
    assert yearly[2020] == pytest.approx(sum(0.5 + m / 100 for m in range(1, 13) if m != 3) / 11)
    assert yearly[2021] == pytest.approx(0.5)
    summary = metrics.yoy_summary(rows, dt.date(2021, 2, 10))
    assert summary["yoy_avg"] == pytest.approx((jan21.yoy + rows[13].yoy) / 2)
    assert summary["yoy_pre"] == pytest.approx(jan21.yoy) and summary["yoy_post"] == pytest.approx(
        rows[13].yoy
    )
    assert metrics.yoy_summary(rows, None)["yoy_pre"] is None


def test_monthly_drift_brier_and_month_of():
    rows = metrics.monthly_drift([dt.date(2024, 1, 2), dt.date(2024, 1, 30)], [1.0, 0.0], [0.1, 0.3])
    assert len(rows) == 1 and rows[0].brier == pytest.approx(0.2) and rows[0].accuracy == 0.5
    assert metrics.month_of(dt.datetime(2024, 2, 29, 23, tzinfo=dt.UTC)) == dt.date(2024, 2, 1)
    assert metrics.monthly_drift([], []) == []
    assert math.isclose(metrics.accuracy([1.0, 0.0, 0.0, 1.0]), 0.5) and metrics.accuracy([]) is None
