#!/usr/bin/env bash
# Run the corpus jobs as steps on an existing EMR on EC2 cluster (Spark 4.x release).
#
# One-time artefacts in S3 ($ARTIFACTS):
#   augury-pyfiles.zip     the project's code        (cluster/spark/build-pyfiles.sh)
#   ingest_news.py,        the entry points          (copies of jobs/*.py)
#   ingest_wikipedia.py
#   augury-venv.tar.gz     third-party packages      (venv-pack of a venv made with
#                          `pip install -c constraints.txt .` on the EMR OS / Python version)
# EMR ships hadoop-aws for its own Hadoop, so spark.jars.packages is NOT set here.
#
#   CLUSTER_ID=j-XXXX ARTIFACTS=s3://my-bucket/augury/artifacts ROOT=s3://my-bucket/augury \
#     cluster/spark/submit-emr.sh
set -euo pipefail
: "${CLUSTER_ID:?EMR cluster id (j-…)}" "${ARTIFACTS:?s3:// prefix of the artefacts}" "${ROOT:?s3:// output root}"
NEWS_INPUT="${NEWS_INPUT:-s3://commoncrawl/crawl-data/CC-NEWS/2022/09/CC-NEWS-202209*.warc.gz}"
WIKI_DUMP="${WIKI_DUMP:-s3://my-bucket/dumps/enwiki-latest-pages-articles.xml.bz2}"

common=(
  --deploy-mode cluster
  --py-files "$ARTIFACTS/augury-pyfiles.zip"
  --archives "$ARTIFACTS/augury-venv.tar.gz#environment"
  --conf spark.pyspark.python=./environment/bin/python
  --conf spark.sql.sources.partitionOverwriteMode=dynamic
  --conf spark.sql.session.timeZone=UTC
  --conf spark.sql.parquet.outputTimestampType=TIMESTAMP_MICROS
  --conf spark.executor.cores=4
  --conf spark.executor.pyspark.memory=8g
)

step() {  # name, then spark-submit arguments
  local name="$1"; shift
  local args
  args=$(printf '"%s",' spark-submit "$@")
  aws emr add-steps --cluster-id "$CLUSTER_ID" \
    --steps "[{\"Type\":\"CUSTOM_JAR\",\"Name\":\"$name\",\"ActionOnFailure\":\"CONTINUE\",\"Jar\":\"command-runner.jar\",\"Args\":[${args%,}]}]"
}

# News: CC-NEWS WARCs → corpus/articles + corpus/articles_rejected (see docs/ingest_news.md).
step augury-ingest-news "${common[@]}" \
  "$ARTIFACTS/ingest_news.py" --root "$ROOT" \
  --allow-hosts cbsnews.com,cnbc.com,cnn.com,forbes.com,npr.org --languages en \
  "$NEWS_INPUT"

# Wikipedia: a pages-articles dump → corpus/wiki_pages + corpus/wcep_events.
step augury-ingest-wikipedia "${common[@]}" \
  "$ARTIFACTS/ingest_wikipedia.py" --root "$ROOT" "$WIKI_DUMP"
