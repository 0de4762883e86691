"""The scale bench's last line: its shape, and the growth per article computed from the two
peaks it reports (structure and arithmetic only; no figure is judged)."""

from __future__ import annotations

import json
import re

import pytest
import ray

from bench import scale

N = 300


def test_the_command_on_tiny_corpora_ends_with_its_summary_line(tmp_path, capsys, monkeypatch, ray_local):
    """On the suite's Ray cluster: every step attaches to the cluster of the process running the
    bench (it starts one when it has none)."""
    monkeypatch.setattr(scale, "RESULTS", tmp_path / "results")
    argv = ["--articles", str(N), "--only", "daily_oracle", "--repeat", "2", "--keep", str(tmp_path)]
    returned = scale.main(argv)
    lines = capsys.readouterr().out.strip().splitlines()
    line = json.loads(lines[-1])
    assert line == returned
    (written,) = (tmp_path / "results").glob("scale-*.json")
    results = json.loads(written.read_text())
    assert results["summary"] == line
    assert line["articles"] == [N, 4 * N]
    assert list(line["builders"]) == ["daily_oracle"]
    figures = line["builders"]["daily_oracle"]
    assert set(figures) == {"rss_mb_small", "rss_mb_large", "kb_per_extra_article"}
    for size, key in ((N, "rss_mb_small"), (4 * N, "rss_mb_large")):  # the least of the size's runs
        peaks = [
            r["rss_mb"] for r in results["runs"] if r["step"] == "daily_oracle" and r["articles"] == size
        ]
        assert len(peaks) == 2 and all(p > 0 for p in peaks)
        assert figures[key] == round(min(peaks), 1)
    expected = (figures["rss_mb_large"] - figures["rss_mb_small"]) * 1024 / (3 * N)
    assert figures["kb_per_extra_article"] == pytest.approx(expected, abs=0.005)
    runs = [row.split() for row in lines if row.startswith(("prepare", "daily_oracle"))]
    assert [(r[0], int(r[1].replace(",", "")), int(r[2])) for r in runs] == [
        ("prepare", N, 1),
        ("daily_oracle", N, 1),
        ("daily_oracle", N, 2),
        ("prepare", 4 * N, 1),
        ("daily_oracle", 4 * N, 1),
        ("daily_oracle", 4 * N, 2),
    ]
    assert all(r[-2:] == ["eval", "items"] for r in runs if r[0] == "daily_oracle")  # not errors
    suite = ray.get_runtime_context().gcs_address  # the builders' runs attached, started no Ray
    assert [r["ray"] for r in results["runs"] if r["step"] == "daily_oracle"] == [suite] * 4
    for size in (N, 4 * N):  # the second run computed as much as the first: no cache served it
        computed = [
            re.search(r"LLM requests computed: ([\d,]+)", (tmp_path / "logs" / log).read_text()).group(1)
            for log in (f"daily_oracle-{size}.out", f"daily_oracle-{size}-1.out")
        ]
        assert computed[0] == computed[1] and int(computed[0].replace(",", "")) > 0
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


def test_a_size_counts_the_least_peak_of_its_runs_and_none_if_one_failed():
    runs = [
        {"step": "prophet", "articles": 10, "rss_mb": 260.0},
        {"step": "prophet", "articles": 10, "rss_mb": 250.04},
        {"step": "prophet", "articles": 40, "rss_mb": 270.0},
        {"step": "prophet", "articles": 40, "rss_mb": None, "error": "exit 1: boom"},
    ]
    assert scale.summary(runs, 10, ["prophet"])["builders"]["prophet"] == {
        "rss_mb_small": 250.0,
        "rss_mb_large": None,
        "kb_per_extra_article": None,
    }
