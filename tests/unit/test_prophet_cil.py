"""CIL math (spec §3, §7): bin edges, windows and their cap, the 2^K enumeration, renormalization,
the §3.7 symmetry checks, the L1/L2 rule at its boundaries, and the brute-force reference test:
the planned-request path equals direct evaluation of the formula on random small instances."""

import datetime as dt
import itertools
import math
import random
from zoneinfo import ZoneInfo

import pytest

from udfs.ids import stable_id
from udfs.prophet.cil import (
    EvidenceArticle,
    assignments,
    bin_articles,
    bin_index,
    bin_windows,
    cil_terms,
    intervened_probability,
    normalize_joint,
    publication_instant,
    split_question,
)
from udfs.prophet.layout import (
    PromptArticle,
    conditional_variables,
    joint_variables,
)
from udfs.prophet.plan import assemble, plan_question

D = dt.date(2024, 7, 28)
UTC = dt.UTC


def art(article_id: str, when: dt.datetime | dt.date, rating: int = 3) -> EvidenceArticle:
    return EvidenceArticle(article_id, publication_instant(when), rating)


# ------------------------------------------------------------------------------ binning (§7.1)
@pytest.mark.parametrize(
    ("published", "expected"),
    [
        (dt.date(2024, 7, 27), 0),  # D−1
        (dt.date(2024, 7, 18), 0),  # D−10: noon, 9.5 days before D
        (dt.date(2024, 7, 17), 1),  # D−11
        (dt.date(2024, 7, 8), 1),  # D−20
        (dt.date(2024, 7, 7), 2),  # D−21
        (dt.datetime(2024, 7, 27, 23, 59, 59), 0),  # naive = UTC, a second before D
        (dt.datetime(2024, 7, 18, 0, 0, tzinfo=UTC), 0),  # D−10 at 00:00 UTC: the corpus's date-only form
        (dt.datetime(2024, 7, 18, 0, 0), 0),  # the same, naive
        (dt.datetime(2024, 7, 17, 0, 0, tzinfo=UTC), 1),  # D−11 at 00:00 UTC
        (dt.datetime(2024, 7, 17, 23, 59, 59, tzinfo=UTC), 1),  # a second more than 10 days before D
        (dt.datetime(2024, 7, 18, 0, 0, 1, tzinfo=UTC), 0),
        (dt.datetime(2024, 7, 18, 0, 0, 0, 1, tzinfo=UTC), 0),
        (dt.datetime(2024, 7, 28, 1, 0, tzinfo=ZoneInfo("Europe/Berlin")), 0),  # 23:00 UTC on D−1
    ],
)
def test_bin_edges(published, expected):
    assert bin_index(published, D) == expected


@pytest.mark.parametrize(
    "published",
    [dt.date(2024, 7, 28), dt.datetime(2024, 7, 28, 0, 0, tzinfo=UTC), dt.date(2024, 8, 1), None],
)
def test_articles_on_or_after_d_have_no_bin(published):
    with pytest.raises(ValueError, match="not strictly before D"):
        bin_index(published, D)


def test_date_only_publication_is_noon_utc():
    assert publication_instant(dt.date(2024, 7, 1)) == dt.datetime(2024, 7, 1, 12, tzinfo=UTC)
    assert publication_instant(dt.datetime(2024, 7, 1, 3)) == dt.datetime(2024, 7, 1, 3, tzinfo=UTC)
    assert publication_instant(None) is None


def test_midnight_utc_publication_is_read_as_date_only():
    noon = dt.datetime(2024, 7, 1, 12, tzinfo=UTC)
    assert publication_instant(dt.datetime(2024, 7, 1, tzinfo=UTC)) == noon
    assert publication_instant(dt.datetime(2024, 7, 1, 2, tzinfo=ZoneInfo("Europe/Berlin"))) == noon
    assert publication_instant(dt.datetime(2024, 7, 1, 0, 0, 0, 1, tzinfo=UTC)) == noon - dt.timedelta(
        hours=12, microseconds=-1
    )
    assert publication_instant(
        dt.datetime(2024, 7, 1, 0, 0, tzinfo=ZoneInfo("Europe/Berlin"))
    ) == dt.datetime(2024, 6, 30, 22, tzinfo=UTC)


# ------------------------------------------------------------------------------ windows (§7.3, §7.7)
def test_window_holds_the_w_older_bins_and_is_shared_within_a_bin():
    arts = [
        art("b0x", dt.date(2024, 7, 25)),
        art("b0y", dt.date(2024, 7, 20)),
        art("b1", dt.date(2024, 7, 10)),
        art("b3", dt.date(2024, 6, 25)),
        art("b4", dt.date(2024, 6, 15)),
    ]
    bins = bin_articles(arts, D)
    assert {g: [a.article_id for a in group] for g, group in bins.items()} == {
        0: ["b0y", "b0x"],  # prompt order: oldest first
        1: ["b1"],
        3: ["b3"],
        4: ["b4"],
    }
    windows = bin_windows(bins, w=3, k_max=10)
    assert windows[0].article_ids == ("b3", "b1")  # bins 1..3; same-bin b0x/b0y never in it
    assert windows[1].article_ids == ("b4", "b3")  # bins 2..4
    assert windows[3].article_ids == ("b4",) and windows[4].article_ids == ()
    plan = plan_question("q", D, arts, w=3, k_max=10)
    assert len([t for t in plan.joints if t.bin == 0]) == 4  # one table for both bin-0 articles
    assert {t.window_ids for t in plan.conditionals if t.article_id in ("b0x", "b0y")} == {("b3", "b1")}


def test_window_cap_keeps_highest_rating_then_most_recent_then_smallest_id():
    older = [
        art("r6", dt.datetime(2024, 7, 10, tzinfo=UTC), 6),
        art("r5new", dt.datetime(2024, 7, 12, tzinfo=UTC), 5),
        art("r5old", dt.datetime(2024, 7, 9, tzinfo=UTC), 5),
        art("r4b", dt.datetime(2024, 7, 11, tzinfo=UTC), 4),
        art("r4a", dt.datetime(2024, 7, 11, tzinfo=UTC), 4),  # same instant as r4b: id decides
    ]
    bins = bin_articles([art("focal", dt.date(2024, 7, 26)), *older], D)
    kept = {k: bin_windows(bins, 3, k)[0] for k in (1, 2, 3, 4, 5)}
    assert set(kept[1].article_ids) == {"r6"}
    assert set(kept[2].article_ids) == {"r6", "r5new"}
    assert set(kept[3].article_ids) == {"r6", "r5new", "r5old"}
    assert set(kept[4].article_ids) == {"r6", "r5new", "r5old", "r4a"}
    assert kept[4].truncated and kept[4].k_raw == 5 and kept[4].k == 4
    assert not kept[5].truncated
    assert kept[3].article_ids == ("r5old", "r6", "r5new")  # kept ones in chronological order


def test_assignments_enumerate_all_2_to_the_k():
    assert assignments(0) == [""]
    assert assignments(2) == ["00", "01", "10", "11"]
    for k in range(7):
        bits = assignments(k)
        assert len(bits) == len(set(bits)) == 2**k and all(len(b) == k for b in bits)


# ------------------------------------------------------------------------------ the sum (§3.7, §7.5)
def test_renormalization_and_the_uniform_fallback():
    pi, uniform = normalize_joint({"0": 0.25, "1": 0.75, "2": 1.0})
    assert pi == {"0": 0.125, "1": 0.375, "2": 0.5} and not uniform
    pi, uniform = normalize_joint({"00": 0.0, "01": 0.0, "10": 0.0, "11": 0.0})
    assert pi == dict.fromkeys(("00", "01", "10", "11"), 0.25) and uniform


def test_symmetry_checks_of_the_true_answer():
    rng = random.Random(7)
    bits = assignments(3)
    pi, _ = normalize_joint({a: rng.random() for a in bits})
    c1 = {a: rng.random() for a in bits}
    c0 = {a: rng.random() for a in bits}
    yes, no = cil_terms(pi, c1, c0, 1), cil_terms(pi, c1, c0, 0)
    assert no.cil == pytest.approx(-yes.cil, abs=1e-15)
    assert no.p_do1 == pytest.approx(1 - yes.p_do1, abs=1e-15)
    assert no.p_do0 == pytest.approx(1 - yes.p_do0, abs=1e-15)
    raw = {a: rng.random() for a in bits}  # without renormalization the second check breaks
    assert not math.isclose(intervened_probability(raw, c1, 0), 1 - intervened_probability(raw, c1, 1))


def test_a_constant_model_gives_zero_cil():
    arts = [art(f"a{n}", dt.date(2024, 7, 27) - dt.timedelta(days=4 * n)) for n in range(8)]
    plan = plan_question("q", D, arts, 3, 10)
    rows, _ = assemble(plan, 1, {t.key: 0.37 for t in plan.joints}, {t.key: 0.81 for t in plan.conditionals})
    assert len(rows) == 8 and all(
        r["status"] == "ok" and r["cil"] == pytest.approx(0, abs=1e-15) for r in rows
    )


def test_failed_terms_make_cil_null_with_a_reason():
    arts = [art("new", dt.date(2024, 7, 27)), art("old", dt.date(2024, 7, 15))]
    plan = plan_question("q", D, arts, 3, 10)
    joints = {t.key: 0.5 for t in plan.joints}
    conditionals = {t.key: 0.5 for t in plan.conditionals}
    rows, table = assemble(plan, 1, {**joints, plan.joints[0].key: None}, conditionals)
    by_id = {r["article_id"]: r for r in rows}
    assert by_id["new"]["status"] == "failed" and by_id["new"]["reason"] == "joint_term_failed"
    assert by_id["new"]["cil"] is None and by_id["old"]["status"] == "ok"
    assert all(r["pi"] is None for r in table)
    rows, _ = assemble(plan, 1, joints, {**conditionals, ("old", 0, ""): None})
    assert {r["article_id"]: r["reason"] for r in rows} == {"new": None, "old": "conditional_term_failed"}


# ------------------------------------------------------------------------------ L1/L2 (§7.8, §7.10)
def test_l1_rule_at_its_boundaries():
    assert split_question([0.1, 0.2, 0.3], 0.0, 3)[:2] == ("L1", 3)
    assert split_question([0.1, 0.2, 0.0], 0.0, 3)[:2] == ("L2", 2)  # CIL = tau is not counted
    assert split_question([0.1, 0.2, None, 0.5], 0.0, 3)[:2] == ("L1", 3)  # a failed CIL never counts
    assert split_question([0.3, 0.3, 0.3], 0.3, 1)[:2] == ("L2", 0)
    assert split_question([], 0.0, 3) == ("none", 0, "no_evidence_before_D")


# ------------------------------------------------------------------------------ brute force
def stand_in(kind: str, focal: str | None, x: int | None, statuses: dict[str, int]) -> float:
    """A deterministic probability that depends only on the meaning of a term: which articles
    happened and which did not (order-free), the focal article and x."""
    key = stable_id(kind, focal, x, sorted(statuses.items()))
    value = int(key[:13], 16) / 16**13
    return 0.0 if kind == "joint" and value < 0.03 else value  # some zero joint entries


def direct_cils(arts, answer, w, k_max):
    """CIL straight from the definitions, sharing no code with the planner."""
    limit = dt.datetime.combine(D, dt.time(), tzinfo=UTC)
    noon = dt.timedelta(hours=12)  # 00:00 UTC stands for a date-only publication: read as noon
    t = {
        a.article_id: a.published_at + (noon if a.published_at.time() == dt.time() else dt.timedelta())
        for a in arts
    }
    group = {a.article_id: (limit - t[a.article_id]) // dt.timedelta(days=10) for a in arts}
    result = {}
    for i in arts:
        window = [j for j in arts if 1 <= group[j.article_id] - group[i.article_id] <= w]
        window.sort(key=lambda j: (-j.rating, -j.published_at.timestamp(), j.article_id))
        window = window[:k_max]
        values = list(itertools.product((0, 1), repeat=len(window)))
        q = [
            stand_in("joint", None, None, {j.article_id: v for j, v in zip(window, a, strict=True)})
            for a in values
        ]
        total = sum(q)
        pi = [v / total for v in q] if total > 0 else [1 / len(q)] * len(q)
        do = {}
        for x in (1, 0):
            p = 0.0
            for weight, a in zip(pi, values, strict=True):
                c = stand_in(
                    "cond", i.article_id, x, {j.article_id: v for j, v in zip(window, a, strict=True)}
                )
                p += weight * (c if answer == 1 else 1 - c)
            do[x] = p
        result[i.article_id] = do[1] - do[0]
    return result


def model_from_variables(kind: str, variables: dict) -> float:
    """The stand-in, read back from a rendered prompt's variables (either layout): article ids are
    the texts, statuses the scenario lines or the happened / not happened groups."""
    if "scenario" in variables:
        statuses = {
            a["text"]: int(s["happened"])
            for a, s in zip(variables["window"], variables["scenario"], strict=True)
        }
    else:
        statuses = {a["text"]: 1 for a in variables["happened"]} | {
            a["text"]: 0 for a in variables["not_happened"]
        }
    if kind == "joint":
        return stand_in("joint", None, None, statuses)
    return stand_in("cond", variables["focal"]["text"], int(variables["focal_happened"]), statuses)


def random_instance(rng: random.Random):
    n = rng.randint(1, 12)
    days = [rng.randint(1, 70) for _ in range(n)]
    arts = [
        EvidenceArticle(
            f"a{k}",
            dt.datetime.combine(D, dt.time(), tzinfo=UTC)
            - dt.timedelta(days=days[k], hours=rng.choice([0, 6, 12])),
            rng.randint(1, 6),
        )
        for k in range(n)
    ]
    return arts, rng.choice([0, 1]), rng.randint(1, 4), rng.randint(0, 6)


@pytest.mark.parametrize("layout", ["listed", "grouped"])
def test_planned_requests_equal_direct_evaluation(layout):
    rng = random.Random(20250401)
    checked = 0
    for _ in range(150):
        arts, answer, w, k_max = random_instance(rng)
        plan = plan_question("q", D, arts, w, k_max)
        assert max(win.k for win in plan.windows.values()) <= 6
        shown = {a.article_id: PromptArticle(a.published_at.date().isoformat(), a.article_id) for a in arts}
        joints = {
            t.key: model_from_variables("joint", joint_variables(t, shown, layout)) for t in plan.joints
        }
        conditionals = {
            t.key: model_from_variables("cond", conditional_variables(t, shown, "Q?", layout))
            for t in plan.conditionals
        }
        rows, _ = assemble(plan, answer, joints, conditionals)
        expected = direct_cils(arts, answer, w, k_max)
        got = {r["article_id"]: r["cil"] for r in rows}
        assert got.keys() == expected.keys()
        for article_id, value in expected.items():
            assert abs(got[article_id] - value) <= 1e-12
        for tau, k in ((0.0, 1), (0.0, 3), (0.05, 2)):
            direct_split = "L1" if sum(v > tau for v in expected.values()) >= k else "L2"
            assert split_question(list(got.values()), tau, k)[0] == direct_split
        checked += len(rows)
    assert checked > 500
