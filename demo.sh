#!/usr/bin/env bash
# The main job end to end on the bundled sample data with the embedded local model.
# Called by `make demo` (which builds .venv first); usage: ./demo.sh SHARED_DATA_DIR OUT_DIR
set -euo pipefail
SHARED=${1:?usage: demo.sh SHARED_DATA_DIR OUT_DIR}
OUT=${2:?usage: demo.sh SHARED_DATA_DIR OUT_DIR}
PY=${PY:-.venv/bin/python}
export SPARK_MASTER=${SPARK_MASTER:-local[2]} HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
mkdir -p "$OUT"
started=$(date +%s)
step() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }

step "corpus: news WARC files -> corpus/articles"
"$PY" -m jobs.ingest_news --root "$OUT" "$SHARED"/warc/*.warc.gz

step "corpus: Wikipedia dumps (+ Current Events Portal wikitext day pages) -> corpus/wiki_pages, corpus/wcep_events"
"$PY" -m jobs.ingest_wikipedia --root "$OUT" "$SHARED"/wikipedia/*.xml.bz2 tests/fixtures/wcep/portal_export.xml

step "corpus: rendered Current Events Portal day pages -> corpus/wcep_events"
"$PY" -m jobs.ingest_wcep_html --root "$OUT" "$SHARED"/wcep/wcep_portal_daily_html_2025-09_2026-08.jsonl.gz \
  "$SHARED"/wcep/wp_current_events_2026-08.rss

step "LLM layer: every request kind on the embedded model (Ray Data)"
"$PY" -m pipelines.llm_smoke --root "$OUT"

step "done in $(( $(date +%s) - started )) s; outputs under $OUT"
for d in corpus llm_smoke benchmarks eval; do
  [ -d "$OUT/$d" ] && find "$OUT/$d" -maxdepth 1 -mindepth 1 -type d | sort | sed 's/^/  /'
done
for f in "$OUT"/benchmarks/*/dataset_card.md "$OUT"/eval/leaderboard.md; do
  [ -f "$f" ] && echo "  $f"
done
exit 0
