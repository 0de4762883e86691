"""cluster/spark: the s3a jars spark-defaults.conf pins are the release of the Hadoop pyspark
bundles and the SDK that release declares, the fetch script downloads exactly those (checked
against their SHA-1), and every submit script gives each Python worker the memory the sample
WARCs need."""

from __future__ import annotations

import hashlib
import re
import shlex
import subprocess
from pathlib import Path

import pyspark
import pytest

REPO = Path(__file__).resolve().parents[2]
SPARK = REPO / "cluster" / "spark"
CONF = SPARK / "spark-defaults.conf"
FETCH = SPARK / "fetch-s3a-jars.sh"
# The AWS SDK v2 bundle each Hadoop release's hadoop-aws declares (hadoop-project/pom.xml of the
# release; the release notes of 3.4.3 name 2.35.4, the hadoop-aws 3.4.2 dependency page 2.29.52).
# A pyspark on a Hadoop not listed here needs its line, read from that release's pom.
SDK_OF_HADOOP = {"3.4.2": "2.29.52", "3.4.3": "2.35.4", "3.5.0": "2.35.4"}
GIB = 1 << 30


def conf_settings(text: str) -> dict[str, str]:
    settings = {}
    for line in text.splitlines():
        parts = line.split(None, 1)
        if len(parts) == 2 and not parts[0].startswith("#"):
            settings[parts[0]] = parts[1].strip()
    return settings


def packages() -> dict[str, str]:
    """``group:artifact → version`` of the conf's spark.jars.packages."""
    listed = conf_settings(CONF.read_text())["spark.jars.packages"].split(",")
    return {c.rsplit(":", 1)[0]: c.rsplit(":", 1)[1] for c in listed}


def pyspark_hadoop() -> str:
    jars = Path(pyspark.__file__).parent / "jars"
    [api] = jars.glob("hadoop-client-api-*.jar")
    return re.fullmatch(r"hadoop-client-api-(.+)\.jar", api.name).group(1)


def test_hadoop_aws_is_the_release_of_the_bundled_hadoop():
    assert packages()["org.apache.hadoop:hadoop-aws"] == pyspark_hadoop()


def test_the_sdk_bundle_is_the_one_that_hadoop_aws_declares():
    hadoop = pyspark_hadoop()
    assert hadoop in SDK_OF_HADOOP, f"add the AWS SDK bundle that hadoop-aws {hadoop} declares"
    assert packages()["software.amazon.awssdk:bundle"] == SDK_OF_HADOOP[hadoop]


def fake_maven(root: Path, corrupt: str | None = None) -> None:
    """A file:// Maven layout holding a small jar and its SHA-1 for every pinned coordinate."""
    for coordinate, version in packages().items():
        group, artifact = coordinate.split(":")
        folder = root.joinpath(*group.split("."), artifact, version)
        folder.mkdir(parents=True)
        data = f"jar of {coordinate}:{version}".encode()
        (folder / f"{artifact}-{version}.jar").write_bytes(data)
        digest = hashlib.sha1(b"other" if artifact == corrupt else data).hexdigest()
        (folder / f"{artifact}-{version}.jar.sha1").write_text(digest)


def fetch(*args: str, repo: Path) -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/bin:/bin", "MAVEN_REPO": f"file://{repo}"}
    return subprocess.run([str(FETCH), *args], env=env, capture_output=True, text=True, check=False)


def test_fetch_script_downloads_every_pinned_jar_checked(tmp_path):
    fake_maven(tmp_path / "maven")
    done = fetch(str(tmp_path / "jars"), repo=tmp_path / "maven")
    assert done.returncode == 0, done.stderr
    expected = sorted(f"{c.split(':')[1]}-{v}.jar" for c, v in packages().items())
    assert sorted(p.name for p in (tmp_path / "jars").iterdir()) == expected
    listed = fetch("--list", str(tmp_path / "jars"), repo=tmp_path / "maven").stdout.strip().split(",")
    assert sorted(Path(p).name for p in listed) == expected and all(Path(p).is_file() for p in listed)


def test_fetch_script_refuses_a_jar_whose_checksum_differs(tmp_path):
    fake_maven(tmp_path / "maven", corrupt="bundle")
    done = fetch(str(tmp_path / "jars"), repo=tmp_path / "maven")
    assert done.returncode != 0 and "bundle-" in done.stderr and "SHA-1" in done.stderr
    assert not list((tmp_path / "jars").glob("bundle-*"))


def size(value: str) -> int:
    number, unit = re.fullmatch(r"(\d+)([kmgt]?)", value.lower()).groups()
    return int(number) << {"": 0, "k": 10, "m": 20, "g": 30, "t": 40}[unit]


@pytest.mark.parametrize("script", sorted(SPARK.glob("submit-*.sh")), ids=lambda p: p.name)
def test_submit_scripts_give_each_python_worker_2_gib(script):
    """Spark limits each Python worker to pyspark memory / executor cores; the sample WARCs need
    2 GiB (tests/jobs/test_cluster_settings.py). A script that passes the properties file gets
    the conf's values unless it overrides them."""
    text = script.read_text()
    settings = conf_settings(CONF.read_text()) if "--properties-file" in text else {}
    for word in shlex.split(text, comments=True):
        if "=" in word and word.startswith("spark."):
            key, value = word.split("=", 1)
            settings[key] = value
    memory = size(settings["spark.executor.pyspark.memory"])
    assert memory // int(settings["spark.executor.cores"]) >= 2 * GIB
