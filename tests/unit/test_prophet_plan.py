"""Request planning (spec §6): the planner's counts against the cost formulas on both worked
examples, joint tables shared per window, and prompts built for the prefix cache."""

import datetime as dt
import math
import random

import pytest

from udfs.prompts import load_prompt
from udfs.prophet.cil import EvidenceArticle
from udfs.prophet.layout import (
    PromptArticle,
    conditional_variables,
    joint_variables,
    prompt_ids,
    snippet,
)
from udfs.prophet.plan import (
    ConditionalTerm,
    assemble,
    cost_formulas,
    naive_joint_terms,
    plan_question,
    window_sizes,
)
from udfs.prophet.worked_examples import RESOLUTION_DATE, SURGE, UNIFORM, example_articles, example_texts


def commonprefix(texts: list[str]) -> str:
    """The longest common character prefix of the texts."""
    first, last = min(texts), max(texts)
    n = next(
        (i for i, (a, b) in enumerate(zip(first, last, strict=False)) if a != b), min(len(first), len(last))
    )
    return first[:n]


SPEC = {  # spec §6, per repeat: C, J_naive, J_shared
    "uniform": (UNIFORM, 12_116, 6_056, 3_028),
    "surge": (SURGE, 123_486, 61_742, 2_198),
}


@pytest.mark.parametrize("name", SPEC)
def test_formulas_reproduce_the_worked_examples(name):
    counts, c, j_naive, j_shared = SPEC[name]
    f = cost_formulas(counts, w=3, k_max=10, r=1)
    assert (f.conditionals, f.joint_naive, f.joint_shared) == (c, j_naive, j_shared)
    f2 = cost_formulas(counts, w=3, k_max=10, r=2)
    assert (f2.naive, f2.shared) == (2 * (c + j_naive), 2 * (c + j_shared))


@pytest.mark.parametrize("name", SPEC)
def test_planner_counts_match_the_formulas(name):
    counts, c, j_naive, j_shared = SPEC[name]
    plan = plan_question(name, RESOLUTION_DATE, example_articles(counts), w=3, k_max=10)
    assert {g: len(group) for g, group in plan.bins.items()} == counts
    assert {g: w.k for g, w in plan.windows.items()} == window_sizes(counts, 3, 10)
    assert len(plan.conditionals) == c
    assert len(plan.joints) == j_shared
    assert len(naive_joint_terms(plan)) == j_naive
    assert len({t.key for t in plan.conditionals}) == c  # every term once


def test_surge_windows_are_capped_and_recorded():
    plan = plan_question("surge", RESOLUTION_DATE, example_articles(SURGE), w=3, k_max=10)
    assert (plan.windows[0].k_raw, plan.windows[0].k, plan.windows[0].truncated) == (51, 10, True)
    assert (plan.windows[1].k_raw, plan.windows[1].k) == (22, 10)
    assert not plan.windows[2].truncated and plan.windows[22].k == 0


def test_planner_counts_match_the_formulas_on_random_instances():
    rng = random.Random(11)
    for _ in range(200):
        counts = {g: rng.randint(1, 4) for g in rng.sample(range(30), rng.randint(1, 12))}
        w, k_max, r = rng.randint(1, 4), rng.randint(0, 6), rng.randint(1, 3)
        plan = plan_question("q", RESOLUTION_DATE, example_articles(counts), w, k_max)
        f = cost_formulas(counts, w, k_max, r)
        assert r * len(plan.conditionals) == f.conditionals
        assert r * len(naive_joint_terms(plan)) == f.joint_naive
        assert len({t.key for t in plan.joints}) == len(plan.joints)
        distinct = {win.article_ids: win.k for win in plan.windows.values() if win.k > 0}
        assert len(plan.joints) == sum(2**k for k in distinct.values())
        shared = sum(1 for win in plan.windows.values() if win.k > 0) > len(distinct)
        assert r * len(plan.joints) < f.joint_shared if shared else r * len(plan.joints) == f.joint_shared


def test_capped_windows_shared_by_two_bins_are_requested_once():
    d = dt.date(2024, 7, 28)
    limit = dt.datetime.combine(d, dt.time(6), tzinfo=dt.UTC)  # 06:00: not read as date-only
    arts = [
        EvidenceArticle(name, limit - dt.timedelta(days=days), rating)
        for name, days, rating in (("a", 2, 3), ("b", 12, 2), ("c", 22, 6), ("d", 32, 6))
    ]
    plan = plan_question("q", d, arts, w=3, k_max=2)
    assert {g: [a.article_id for a in group] for g, group in plan.bins.items()} == {
        0: ["a"],
        1: ["b"],
        2: ["c"],
        3: ["d"],
    }
    assert plan.windows[0].article_ids == plan.windows[1].article_ids == ("d", "c")
    assert plan.windows[0].truncated and not plan.windows[1].truncated
    assert len({t.key for t in plan.joints}) == len(plan.joints) == 4 + 2  # (d, c) once, then (d,)
    assert {t.bin for t in plan.joints} == {0, 2}
    f = cost_formulas({0: 1, 1: 1, 2: 1, 3: 1}, w=3, k_max=2, r=1)
    assert f.joint_shared == 4 + 4 + 2 > len(plan.joints)  # §6 counts a table per bin
    assert len(plan.conditionals) == f.conditionals
    joints = {t.key: 0.25 for t in plan.joints}
    conditionals = {t.key: 0.5 + 0.1 * t.x for t in plan.conditionals}
    rows, table = assemble(plan, 1, joints, conditionals)
    assert all(r["status"] == "ok" and math.isclose(r["cil"], 0.1) for r in rows if r["k"] == 2)
    assert len([t for t in table if t["bin"] in (0, 1)]) == 8  # each bin still reports its table


def test_planner_refuses_repeated_article_ids():
    a = EvidenceArticle("x", dt.datetime(2024, 7, 1, tzinfo=dt.UTC), 3)
    with pytest.raises(ValueError, match="repeat"):
        plan_question("q", dt.date(2024, 7, 28), [a, a], 3, 10)


# ------------------------------------------------------------------------------ prompts
def _render(prompt_id: str, variables: dict) -> str:
    return load_prompt(prompt_id).render(variables).plain_text()


@pytest.mark.parametrize("estimator", ["verbalized", "logprob"])
def test_listed_layout_puts_the_shared_parts_first(estimator):
    arts = example_articles({0: 2, 1: 1, 2: 1})
    shown = example_texts(arts, words=30)
    plan = plan_question("q", RESOLUTION_DATE, arts, 3, 10)
    joint_id, cond_id = prompt_ids(estimator, "listed")
    joints = [_render(joint_id, joint_variables(t, shown, "listed")) for t in plan.joints if t.bin == 0]
    conds = [
        _render(cond_id, conditional_variables(t, shown, "Q?", "listed"))
        for t in plan.conditionals
        if t.bin == 0
    ]
    window_text = "".join(f"] {shown[i].date}: {shown[i].text}\n" for i in plan.windows[0].article_ids)
    shared = commonprefix(joints + conds)
    assert all(shown[i].text in shared for i in plan.windows[0].article_ids) and window_text
    per_article = {}
    for term, text in zip([t for t in plan.conditionals if t.bin == 0], conds, strict=True):
        per_article.setdefault(term.article_id, []).append(text)
    for article_id, texts in per_article.items():
        prefix = commonprefix(texts)
        assert shown[article_id].text in prefix and "Question: Q?" in prefix
        assert all(len(t) - len(prefix) < 120 for t in texts)  # only the scenario lines differ


def test_grouped_layout_moves_article_texts_with_the_assignment():
    arts = example_articles({0: 1, 1: 2})
    shown = example_texts(arts, words=30)
    plan = plan_question("q", RESOLUTION_DATE, arts, 3, 10)
    _, cond_id = prompt_ids("verbalized", "grouped")
    texts = [
        _render(cond_id, conditional_variables(t, shown, "Q?", "grouped"))
        for t in plan.conditionals
        if t.bin == 0
    ]
    assert len(set(texts)) == len(texts) == 2 * 4
    first_window = shown[plan.windows[0].article_ids[0]].text
    assert len(commonprefix(texts)) < texts[0].index(first_window) + len(first_window)


@pytest.mark.parametrize(
    ("estimator", "layout"), [(e, lay) for e in ("verbalized", "logprob") for lay in ("listed", "grouped")]
)
def test_prompts_encode_the_assignment_and_the_intervention(estimator, layout):
    shown = {
        "a": PromptArticle("2024-07-01", "Alpha report."),
        "b": PromptArticle("2024-07-02", "Beta report."),
    }
    shown["f"] = PromptArticle("2024-07-20", "Focal report.")
    _, cond_id = prompt_ids(estimator, layout)
    yes = _render(
        cond_id, conditional_variables(ConditionalTerm("f", 0, 1, ("a", "b"), "10"), shown, "Q?", layout)
    )
    no = _render(
        cond_id, conditional_variables(ConditionalTerm("f", 0, 0, ("a", "b"), "10"), shown, "Q?", layout)
    )
    assert yes != no and "Focal report." in yes and "Focal report." in no  # do(X=0) keeps the article
    if layout == "listed":
        assert "[1] happened\n[2] did not happen\n[K] happened" in yes
        assert "[K] did not happen (most important)" in no
    else:
        assert yes.index("Alpha report.") < yes.index("did not happen:") < yes.index("Beta report.")
        assert "this event did not happen:" in no


def test_snippet_keeps_title_and_first_words():
    assert snippet("Storm hits coast", "Storm hits coast. Winds of 100 km/h", 4) == "Storm hits coast. Winds"
    assert snippet("Title", "one two three four five", 3) == "Title. one two three"
    assert snippet(None, "one two", 5) == "one two" and snippet("Only title", "", 5) == "Only title"


def test_prompt_ids_reject_unknown_modes():
    assert prompt_ids("logprob", "grouped") == (
        "prophet.joint_grouped_yesno",
        "prophet.conditional_grouped_yesno",
    )
    with pytest.raises(ValueError):
        prompt_ids("sampled", "listed")
