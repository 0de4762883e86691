"""The Hub dataset card of an export: features equal to what ``datasets`` derives from the Arrow
schema, configs and splits in the Hub's YAML form, licence from the builder's sources."""

from __future__ import annotations

import datasets
import pyarrow as pa
import pytest
import yaml

from udfs import hub_card
from udfs.eval_items import EVAL_ITEM_SCHEMA

FILES = {
    "mc": {"test": "data/mc/test.parquet"},
    "tf": {"test": "data/tf/test.parquet", "dev": "data/tf/dev.parquet"},
}
COUNTS = {"mc": {"test": 8}, "tf": {"test": 4, "dev": 2}}
SIZES = {"mc": {"test": 800}, "tf": {"test": 400, "dev": 200}}


def test_features_are_those_datasets_derives_from_the_schema():
    declared = datasets.Features._from_yaml_list(hub_card.features(EVAL_ITEM_SCHEMA))
    assert declared == datasets.Features.from_arrow_schema(EVAL_ITEM_SCHEMA)
    with pytest.raises(ValueError, match="no Hub feature type"):
        hub_card.features(pa.schema([pa.field("m", pa.map_(pa.string(), pa.int32()))]))


def test_front_matter_configs_splits_and_sizes():
    matter = hub_card.front_matter("daily_oracle", FILES, COUNTS, SIZES, EVAL_ITEM_SCHEMA, ["mc", "yesno"])
    text = hub_card.readme(matter, "body\n")
    assert "&id" not in text and "*id" not in text  # every config's features written out
    parsed = yaml.safe_load(text.split("---\n")[1])
    configs = {c["config_name"]: c for c in parsed["configs"]}
    assert configs["all"]["default"] is True
    assert configs["all"]["data_files"] == [
        {"split": "dev", "path": ["data/tf/dev.parquet"]},
        {"split": "test", "path": ["data/mc/test.parquet", "data/tf/test.parquet"]},
    ]
    assert configs["tf"]["data_files"] == [
        {"split": "dev", "path": "data/tf/dev.parquet"},
        {"split": "test", "path": "data/tf/test.parquet"},
    ]
    info = {i["config_name"]: i for i in parsed["dataset_info"]}
    assert info["all"]["splits"] == [
        {"name": "dev", "num_bytes": 200, "num_examples": 2},
        {"name": "test", "num_bytes": 1200, "num_examples": 12},
    ]
    assert info["mc"]["dataset_size"] == 800
    assert parsed["task_categories"] == ["multiple-choice", "question-answering"]
    assert parsed["size_categories"] == ["n<1K"]
    with pytest.raises(ValueError, match="clash"):
        hub_card.front_matter("x", {"all": {}}, {"all": {}}, {"all": {}}, EVAL_ITEM_SCHEMA, [])


def test_licence_follows_the_sources():
    assert hub_card.licence("openforecast")[0] == {"license": "cc-by-sa-4.0"}
    assert hub_card.licence("prophet")[0] == {"license": "cc-by-sa-4.0"}
    keys, sources = hub_card.licence("daily_oracle")
    assert keys == {"license": "other", "license_name": "source-terms", "license_link": "LICENSE.md"}
    assert [s.title for s in sources] == [hub_card.SOURCES["news"].title]
    assert hub_card.licence("unknown_builder") == (
        {"license": "other", "license_name": "source-terms", "license_link": "LICENSE.md"},
        [],
    )
    assert "Sources not declared" in hub_card.body("unknown_builder", {}, COUNTS, {}, {}, {})


def test_size_categories():
    assert [hub_card.size_category(n) for n in (0, 999, 1000, 99_999, 5_000_000)] == [
        "n<1K",
        "n<1K",
        "1K<n<10K",
        "10K<n<100K",
        "n>1M",
    ]
