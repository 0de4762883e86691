"""OpenForecast collection and timeline rules: Wikipedia filters and texts, WCEP story grouping
and document lookup, the merge fallback, the permutation guard and sample selection."""

import datetime as dt

import pytest

from udfs.openforecast import stories, timeline, wiki
from udfs.text import first_words
from udfs.urls import norm_url


def _page(**kw):
    base = {
        "page_id": 1,
        "title": "2026 Test floods",
        "ns": 0,
        "is_redirect": False,
        "n_words": 500,
        "lead": "Floods hit the coast.",
        "sections": [],
        "categories": ["2026 floods"],
    }
    return {**base, **kw}


def _sec(title, text="words here", level=2):
    return {"level": level, "title": title, "text": text}


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"ns": 14}, "not_article"),
        ({"is_redirect": True}, "redirect"),
        ({"n_words": 199}, "too_short"),
        ({"n_words": 200}, None),
    ],
)
def test_base_filter(change, reason):
    assert wiki.base_reject_reason(_page(**change), 200) == reason


def test_category_heuristic_needs_a_year_from_1950_or_event_words():
    assert wiki.has_event_category(["2026 in American football"])
    assert wiki.has_event_category(["Mass shooting incidents"])
    assert wiki.has_event_category(["Sporting EVENTS in Peru"])
    assert not wiki.has_event_category(["1949 births", "Living people"])
    assert not wiki.has_event_category(["1888 establishments", "Companies"])
    assert not wiki.has_event_category(None)


def test_section_heuristic_is_an_exact_match_after_strip():
    assert wiki.has_event_section([_sec(" Aftermath ")])
    assert wiki.has_event_section([_sec("Results")])  # the code's " Results" never matched; ours does
    assert not wiki.has_event_section([_sec("Background and early life")])
    assert not wiki.has_event_section([])


def test_timeline_text_drops_reference_sections_and_their_subsections():
    page = _page(
        sections=[
            _sec("Background", "Rain fell."),
            _sec("Aftermath", "Aid came."),
            _sec("References", "Smith 2020"),
            _sec("Books", "A book", level=3),
            _sec("Legacy", "Remembered."),
        ]
    )
    text = wiki.timeline_text(page)
    assert "Rain fell." in text and "Aid came." in text and "Remembered." in text
    assert "Smith 2020" not in text and "A book" not in text
    assert text.startswith("Floods hit the coast.")


def test_long_pages_keep_only_the_evolution_sections():
    long = " ".join(["word"] * 6001)
    page = _page(sections=[_sec("Aftermath", "Aid came."), _sec("Geography", long)])
    text = wiki.timeline_text(page)
    assert "Aid came." in text and "word word" not in text


def test_classification_and_date_inputs():
    page = _page(
        sections=[_sec("Background", "B" * 6000), _sec("Description", "D"), _sec("Aftermath", "After")]
    )
    assert len(wiki.classification_text(page)) == wiki.CATEGORY_INPUT_CHARS
    date = wiki.date_text(page)
    assert "After" in date and "BBB" not in date  # the date input skips Background
    assert first_words("a b c d", 2) == "a b" and first_words("a\nb", None) == "a\nb"
    assert first_words("a\nb", 5) == "a\nb" and first_words(None, 3) == ""


def _event(text, day, position=0, path=(), urls=(), category="Law and crime"):
    return {
        "event_id": f"id-{text}-{day}",
        "text": text,
        "date": dt.date.fromisoformat(day),
        "position": position,
        "story_path": list(path),
        "source_urls": list(urls),
        "category": category,
    }


def test_every_story_prefix_collects_the_event_and_singletons_use_their_text():
    events = [
        _event("Child event.", "2026-01-02", path=["War", "Battle of X"]),
        _event("Parent event.", "2026-01-01", path=["War"]),
        _event("Lonely event.", "2026-01-01"),
    ]
    groups = stories.group_by_story(events)
    assert sorted(groups) == ["Lonely event.", "War", "War|Battle of X"]
    assert [e["text"] for e in groups["War"]] == ["Parent event.", "Child event."]  # sorted by day
    assert stories.is_singleton(groups["Lonely event."]) and not stories.is_singleton(groups["War"])


def _article(url, words=150, language="en", article_id="a1"):
    return {
        "article_id": article_id,
        "canonical_url": norm_url(url),
        "title": "Headline",
        "text": " ".join(["word"] * words),
        "language": language,
    }


def test_document_lookup_joins_on_norm_url_and_falls_back_to_the_event_text():
    index = stories.article_index(
        [
            _article("https://news.example/a", words=80, article_id="short"),
            _article("https://news.example/b?utm_source=x", article_id="good"),
            _article("https://news.example/c", language="de", article_id="german"),
        ]
    )
    event = _event(
        "Something happens.",
        "2026-01-01",
        urls=["http://www.news.example/a", "https://news.example/c", "https://NEWS.example/b/#top"],
    )
    doc = stories.lookup_document(event, index)
    assert doc["article_id"] == "good" and not doc["is_fallback"]
    missing = stories.lookup_document(_event("Nothing cited.", "2026-01-01", urls=["https://x.org/1"]), index)
    assert (
        missing["is_fallback"]
        and missing["text"] == "Nothing cited."
        and missing["title"] == "Nothing cited."
    )


def test_assemble_dedupes_caps_documents_and_drops_fallback_singletons():
    events = [
        _event(f"Event {i}.", f"2026-01-{i + 1:02d}", path=["Story"], category=c)
        for i, c in enumerate(["Law and crime", "Law and Crime", "Sports", "Sports", "Sports"])
    ]
    events.insert(2, _event("Event 0.", "2026-01-02", path=["Story"]))  # exact repeat
    ce = stories.assemble("Story", events, {}, max_docs=3)
    assert ce.reject_reason is None and ce.n_events == 5
    assert [d["seq"] for d in ce.docs] == [0, 1, 2] and ce.ce_date == dt.date(2026, 1, 3)
    assert sorted(r for _, r in ce.dropped_docs) == ["beyond_max_docs", "beyond_max_docs", "duplicate_event"]
    assert ce.category == "Law and crime"  # "Law and Crime" folds into it and outnumbers Sports
    assert stories.assemble("Story", events, {}, max_docs=10, min_events=6).reject_reason == "too_few_events"
    single = [_event("Lonely event.", "2026-01-01", urls=["https://x.org/1"])]
    assert stories.assemble("Lonely event.", single, {}, 10).reject_reason == "singleton_fallback"
    index = stories.article_index([_article("https://x.org/1")])
    assert stories.assemble("Lonely event.", single, index, 10).reject_reason is None


def test_two_events_citing_one_article_give_one_document():
    index = stories.article_index([_article("https://x.org/1")])
    events = [_event(f"E{i}.", "2026-01-01", i, ["S"], ["https://x.org/1"]) for i in range(2)]
    ce = stories.assemble("S", events, index, 10)
    assert len(ce.docs) == 1 and ce.dropped_docs[0][1] == "duplicate_article"


def test_canonical_heading_folds_case_and_typos():
    assert stories.canonical_heading("Business and econony") == "Business and economy"
    assert stories.canonical_heading("politics and election") == "Politics and elections"
    assert stories.canonical_heading("History and science") == "History and science"
    assert stories.canonical_heading(" ") is None


def test_merge_fallback_fires_below_80_percent_retention():
    before = [f"e{i}" for i in range(10)]
    assert timeline.retention(before, [*before, "new"]) == 1.0
    assert not timeline.needs_merge(before, [*before[:8], "new"])  # 80% kept
    assert timeline.needs_merge(before, [*before[:7], "new"])  # 70% kept
    assert timeline.needs_merge(before, [f" {e}x" for e in before])  # rewritten items do not count
    assert timeline.retention([], ["a"]) == 1.0


def test_permutation_guard():
    assert timeline.is_permutation(["a", "b", "c"], ["c", " a", "b "])
    assert not timeline.is_permutation(["a", "b"], ["a", "b", "c"])
    assert not timeline.is_permutation(["a", "b"], ["a", "a"])


def test_first_parseable_sample():
    rows = [
        {"sample_index": 1, "parse_ok": True, "events": ["x"]},
        {"sample_index": 0, "parse_ok": False, "events": None, "parse_error": "parse: bad"},
        {"sample_index": 2, "parse_ok": True, "events": ["y"]},
    ]
    assert timeline.first_parseable(rows)["events"] == ["x"]
    failed = [{"sample_index": 1, "parse_ok": True, "events": []}, {**rows[1]}]
    assert timeline.first_parseable(failed)["sample_index"] == 0


def test_command_line_overrides_the_demo_preset():
    from pipelines.openforecast.__main__ import parse_args
    from pipelines.openforecast.config import DEMO_STORIES

    config = parse_args(["--root", "out", "--demo", "--max-docs", "3", "--test-end", "2026-12-31"])
    assert config.wcep_stories == DEMO_STORIES and config.max_docs == 3 and config.timeline_samples == 1
    assert config.cutoffs.test_end == dt.date(2026, 12, 31)  # explicit dates replace the demo's test_start
    assert config.cutoffs.train_end == dt.date(2023, 6, 30)
    with pytest.raises(SystemExit):
        parse_args(["--root", "out", "--test-start", "2026-03-01", "--train-end", "2025-01-01"])
    plain = parse_args(
        ["--root", "out", "--wcep-story", "A|B", "--wcep-story", "C", "--test-start", "2026-03-01"]
    )
    assert plain.wcep_stories == ("A|B", "C") and plain.max_docs == 10 and plain.timeline_samples == 3
    assert plain.cutoffs.train_end == dt.date(2025, 12, 31)
    assert parse_args(["--root", "out"]).cutoffs.test_end == dt.date(2024, 3, 31)
