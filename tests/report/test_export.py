"""The Hugging Face export of every demo benchmark with items: ``datasets.load_dataset`` reads
each config offline and gets exactly the rows and types of ``eval_items``; the README's front
matter declares those configs, splits, features and the sources' licence; bad requests fail
with one line; an s3:// target gets the same files."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import yaml

from pipelines.export.__main__ import main
from pipelines.export.run import Config, run
from pipelines.report import read
from udfs import storage
from udfs.eval_items import EVAL_ITEM_SCHEMA
from udfs.layout import Layout

pytestmark = [pytest.mark.ray, pytest.mark.spark]


def front_matter(readme: Path) -> dict:
    text = readme.read_text()
    assert text.startswith("---\n")
    return yaml.safe_load(text.split("---\n", 2)[1])


def load(folder: Path, name: str, cache: Path):
    """``load_dataset`` of a local export, offline, with its own cache."""
    os.environ["HF_DATASETS_OFFLINE"] = "1"
    import datasets

    return datasets.load_dataset(str(folder), name=name, cache_dir=str(cache))


def by_id(rows: list[dict]) -> dict[str, dict]:
    return {r["item_id"]: r for r in rows}


@pytest.fixture(scope="module")
def exports(demo_root, tmp_path_factory) -> dict[str, tuple[Path, object]]:
    out = tmp_path_factory.mktemp("export")
    names = [n for n in read.discover_benchmarks(demo_root) if read.item_index(demo_root, n)]
    assert {"daily_oracle", "openforecast", "tcelongbench"} <= set(names)
    return {n: (out / n, run(Config(root=demo_root, benchmark=n, to=str(out / n)))) for n in names}


def test_every_config_loads_with_the_rows_of_eval_items(demo_root, exports, tmp_path):
    import datasets

    for name, (folder, _) in exports.items():
        items = storage.read_table(Layout(demo_root).benchmark(name, "eval_items"), EVAL_ITEM_SCHEMA)
        expected = by_id(items.to_pylist())
        tasks = sorted({r["task"] for r in expected.values()})
        loaded = load(folder, "all", tmp_path / "cache")
        assert sorted(loaded) == sorted({r["split"] for r in expected.values()})
        assert by_id([r for split in loaded.values() for r in split]) == expected, name
        assert loaded[next(iter(loaded))].features == datasets.Features.from_arrow_schema(EVAL_ITEM_SCHEMA)
        for task in tasks:
            per_task = load(folder, task, tmp_path / "cache")
            for split, rows in per_task.items():
                want = {k: r for k, r in expected.items() if r["task"] == task and r["split"] == split}
                assert by_id(list(rows)) == want, (name, task, split)


def test_readme_front_matter_declares_configs_features_and_licence(exports):
    for name, (folder, export) in exports.items():
        matter = front_matter(folder / "README.md")
        configs = {c["config_name"]: c for c in matter["configs"]}
        assert set(configs) == {"all", *export.files}
        assert configs["all"]["default"] is True
        for task, files in export.files.items():
            declared = {f["split"]: f["path"] for f in configs[task]["data_files"]}
            assert declared == files and all((folder / p).is_file() for p in files.values())
        info = {i["config_name"]: i for i in matter["dataset_info"]}
        for task, counts in export.counts.items():
            assert {s["name"]: s["num_examples"] for s in info[task]["splits"]} == counts
        assert [f["name"] for f in info["all"]["features"]] == EVAL_ITEM_SCHEMA.names
        assert "question-answering" in matter["task_categories"] and matter["annotations_creators"]
        body = (folder / "README.md").read_text().split("---\n", 2)[2]
        for heading in (
            "## How it was built",
            "## Quality",
            "## Rejected candidates",
            "## Licence and sources",
        ):
            assert heading in body, (name, heading)
        assert (folder / "LICENSE.md").is_file()
    assert front_matter(exports["openforecast"][0] / "README.md")["license"] == "cc-by-sa-4.0"
    news_only = front_matter(exports["daily_oracle"][0] / "README.md")
    assert news_only["license"] == "other" and news_only["license_link"] == "LICENSE.md"
    assert "belongs to their publishers" in (exports["daily_oracle"][0] / "LICENSE.md").read_text()


def test_card_text_names_model_prompts_and_rejections(demo_root, exports):
    folder, _ = exports["tcelongbench"]
    text = (folder / "README.md").read_text()
    card = read.read_card(demo_root, "tcelongbench")
    assert f"`{card['model']['model']}`" in text
    assert all(f"`{v}`" in text for v in card["prompt_versions"].values())
    for (stage, unit, reason), n in read.rejected_counts(demo_root, "tcelongbench").items():
        assert f"| {stage} | {unit} | {reason} | {n:,} |" in text
    assert "corpus articles' days: 2015-" in text  # the reported.ly month is the earliest


def test_a_rerun_replaces_the_data_folder(demo_root, exports):
    folder, _ = exports["daily_oracle"]
    stale = folder / "data" / "stale" / "test.parquet"
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"old")
    run(Config(root=demo_root, benchmark="daily_oracle", to=str(folder)))
    assert not stale.exists()


def test_unknown_benchmark_or_no_items_is_a_usage_error(demo_root, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--root", demo_root, "--benchmark", "nope", "--to", str(tmp_path / "x")])
    assert exit_.value.code == 2 and "no benchmark 'nope'" in capsys.readouterr().err
    root = tmp_path / "root"
    card = Path(Layout(demo_root).benchmark("daily_oracle", "dataset_card.json")[len("file://") :])
    (root / "benchmarks" / "daily_oracle").mkdir(parents=True)
    shutil.copy(card, root / "benchmarks" / "daily_oracle" / "dataset_card.json")
    with pytest.raises(SystemExit) as exit_:
        main(["--root", str(root), "--benchmark", "daily_oracle", "--to", str(tmp_path / "y")])
    assert exit_.value.code == 2 and "nothing to export" in capsys.readouterr().err


def test_export_to_s3(demo_root, exports, s3_root):
    _, local = exports["daily_oracle"]
    target = storage.join(s3_root, "hub", "daily_oracle")
    remote = run(Config(root=demo_root, benchmark="daily_oracle", to=target))
    assert remote.files == local.files and remote.counts == local.counts
    for task, files in remote.files.items():
        for split, path in files.items():
            assert storage.count_rows(storage.join(target, path)) == local.counts[task][split]
    assert storage.read_bytes(storage.join(target, "README.md")).startswith(b"---\n")
