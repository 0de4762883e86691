#!/usr/bin/env bash
# Run the corpus jobs with spark-submit against a Kubernetes cluster (cluster mode).
#
# $IMAGE must be a Spark-on-Kubernetes image: Spark starts the driver and executor pods with the
# arguments `driver …` / `executor` and relies on the image's entrypoint (/opt/entrypoint.sh in
# Apache Spark's images) to run them. The project's own images (Dockerfile, cpu/gpu) have Java,
# pyspark and every package but no such entrypoint, so they do not serve here. Use Apache Spark's
# image of the release the pyspark pin names (constraints.txt: 4.3.0) with Python 3.11 and
# `pip install -c constraints.txt .` on top (see cluster/spark/README.md); the project's own code
# travels as --py-files, so code changes need no new image.
# The driver and executors read and write S3 through s3a (hadoop-aws, below) and the Python side
# through s3fs: give the service account S3 access (IRSA) or set AWS_* in a secret.
#
#   K8S_API=https://my-cluster:6443 IMAGE=registry/augury-spark:latest \
#   UPLOAD=s3a://my-bucket/augury/spark-upload ROOT=s3://my-bucket/augury \
#     cluster/spark/submit-k8s.sh news|wikipedia
set -euo pipefail
: "${K8S_API:?https://… of the Kubernetes API server}" "${IMAGE:?container image}"
: "${UPLOAD:?s3a:// prefix spark-submit uploads local files to}" "${ROOT:?s3:// output root}"
NAMESPACE="${NAMESPACE:-augury}"
SERVICE_ACCOUNT="${SERVICE_ACCOUNT:-spark}"
EXECUTORS="${EXECUTORS:-8}"
NEWS_INPUT="${NEWS_INPUT:-s3a://commoncrawl/crawl-data/CC-NEWS/2022/09/CC-NEWS-202209*.warc.gz}"
WIKI_DUMP="${WIKI_DUMP:-s3a://my-bucket/dumps/enwiki-latest-pages-articles.xml.bz2}"

repo="$(cd "$(dirname "$0")/../.." && pwd)"
zip="$("$repo/cluster/spark/build-pyfiles.sh")"

submit() {  # entry point, then its arguments
  spark-submit \
    --master "k8s://$K8S_API" \
    --deploy-mode cluster \
    --name "augury-$(basename "$1" .py | tr _ -)" \
    --properties-file "$repo/cluster/spark/spark-defaults.conf" \
    --conf spark.kubernetes.namespace="$NAMESPACE" \
    --conf spark.kubernetes.authenticate.driver.serviceAccountName="$SERVICE_ACCOUNT" \
    --conf spark.kubernetes.container.image="$IMAGE" \
    --conf spark.kubernetes.file.upload.path="$UPLOAD" \
    --conf spark.executor.instances="$EXECUTORS" \
    --conf spark.kubernetes.executor.request.cores=4 \
    --py-files "$zip" \
    "$@"
}

case "${1:-news}" in
  news)
    submit "$repo/jobs/ingest_news.py" --root "$ROOT" \
      --allow-hosts cbsnews.com,cnbc.com,cnn.com,forbes.com,npr.org --languages en "$NEWS_INPUT" ;;
  wikipedia)
    submit "$repo/jobs/ingest_wikipedia.py" --root "$ROOT" "$WIKI_DUMP" ;;
  *) echo "usage: $0 news|wikipedia" >&2; exit 2 ;;
esac
