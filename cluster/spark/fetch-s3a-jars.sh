#!/usr/bin/env bash
# Download the s3a jars that cluster/spark/spark-defaults.conf names (its spark.jars.packages
# line: hadoop-aws, the AWS SDK bundle, the S3 analytics accelerator) from Maven Central, each
# checked against the SHA-1 Maven Central publishes beside it. Run it where the internet is, then
# ship the directory with the job or bake it into the image; a cluster without Maven access then
# runs with
#   spark-submit --properties-file cluster/spark/spark-defaults.conf --conf spark.jars.packages= \
#     --jars "$(cluster/spark/fetch-s3a-jars.sh --list DIR)" …
#
#   cluster/spark/fetch-s3a-jars.sh [DIR]          download into DIR (default: dist/s3a-jars)
#   cluster/spark/fetch-s3a-jars.sh --list DIR     print the jars of DIR as a --jars value
# MAVEN_REPO overrides the repository (a mirror, or a file:// copy of one).
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
conf="$repo/cluster/spark/spark-defaults.conf"
maven="${MAVEN_REPO:-https://repo1.maven.org/maven2}"

coordinates() {  # group:artifact:version, one a line, from the conf's spark.jars.packages
  awk '$1 == "spark.jars.packages" {print $2}' "$conf" | tr ',' '\n' | sed '/^$/d'
}

jar_name() { local IFS=:; set -- $1; echo "$2-$3.jar"; }

if [ "${1:-}" = "--list" ]; then
  dir="${2:?usage: $0 --list DIR}"
  list=""
  while read -r coordinate; do
    list="$list${list:+,}$dir/$(jar_name "$coordinate")"
  done < <(coordinates)
  echo "$list"
  exit 0
fi

dir="${1:-$repo/dist/s3a-jars}"
mkdir -p "$dir"
while read -r coordinate; do
  IFS=: read -r group artifact version <<<"$coordinate"
  name="$artifact-$version.jar"
  url="$maven/${group//.//}/$artifact/$version/$name"
  curl -fsSL -o "$dir/$name.part" "$url"
  expected="$(curl -fsSL "$url.sha1" | cut -c1-40)"
  actual="$(sha1sum "$dir/$name.part" | cut -c1-40)"
  if [ "$expected" != "$actual" ]; then
    rm -f "$dir/$name.part"
    echo "$name: SHA-1 $actual, Maven Central says $expected" >&2
    exit 1
  fi
  mv "$dir/$name.part" "$dir/$name"
  echo "$dir/$name"
done < <(coordinates)
