"""The scale bench's last line: its shape, and the growth per article computed from the two
peaks it reports (structure and arithmetic only; no figure is judged)."""

from __future__ import annotations

import json

import pytest

from bench import scale

N = 300


@pytest.mark.ray
def test_the_command_on_tiny_corpora_ends_with_its_summary_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(scale, "RESULTS", tmp_path / "results")
    returned = scale.main(["--articles", str(N), "--only", "daily_oracle", "--keep", str(tmp_path)])
    lines = capsys.readouterr().out.strip().splitlines()
    line = json.loads(lines[-1])
    assert line == returned
    (written,) = (tmp_path / "results").glob("scale-*.json")
    assert json.loads(written.read_text())["summary"] == line
    assert line["articles"] == [N, 4 * N]
    assert list(line["builders"]) == ["daily_oracle"]
    figures = line["builders"]["daily_oracle"]
    assert set(figures) == {"rss_mb_small", "rss_mb_large", "kb_per_extra_article"}
    assert figures["rss_mb_small"] > 0 and figures["rss_mb_large"] > 0  # both runs finished
    expected = (figures["rss_mb_large"] - figures["rss_mb_small"]) * 1024 / (3 * N)
    assert figures["kb_per_extra_article"] == pytest.approx(expected, abs=0.005)
    runs = [row.split() for row in lines if row.startswith(("prepare", "daily_oracle"))]
    assert [(r[0], int(r[1].replace(",", ""))) for r in runs] == [
        ("prepare", N),
        ("daily_oracle", N),
        ("prepare", 4 * N),
        ("daily_oracle", 4 * N),
    ]
    assert all(r[-2:] == ["eval", "items"] for r in runs[1::2])  # an outcome, not an error
    assert (tmp_path / f"n{4 * N}" / "benchmarks" / "daily_oracle" / "eval_items").is_dir()  # --keep


def test_kb_per_extra_article_is_the_rss_growth_over_3n():
    assert scale.kb_per_article(100.0, 130.0, 10) == pytest.approx(30 * 1024 / 30)
    assert scale.kb_per_article(100.0, None, 10) is None


def test_a_failed_size_has_null_figures_never_a_number():
    runs = [
        {"step": "prophet", "articles": 10, "rss_mb": 250.04},
        {"step": "prophet", "articles": 40, "rss_mb": None, "error": "timed out after 900 s"},
    ]
    assert scale.summary(runs, 10, ["prophet"])["builders"] == {
        "prophet": {"rss_mb_small": 250.0, "rss_mb_large": None, "kb_per_extra_article": None}
    }
