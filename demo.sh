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

step "corpus: JSON Lines articles (the WCEP-cited Reportedly articles) -> corpus/articles"
"$PY" -m jobs.ingest_articles_jsonl --root "$OUT" "$SHARED"/wcep/reportedly_articles_2015-09.json

step "corpus index: dated articles -> index/articles (LanceDB: BM25, MiniLM vectors), then one search with a cutoff"
"$PY" -m pipelines.index --root "$OUT"
"$PY" -m pipelines.search --root "$OUT" --cutoff 2022-09-16 --k 5 "storm damage and flooding"

step "LLM layer: every request kind on the embedded model (Ray Data)"
"$PY" -m pipelines.llm_smoke --root "$OUT"

# The builders run with small limits (each declares its demo flags once, in pipelines/builders.py's
# registry; `python -m pipelines.builders demo NAME` prints the command it runs): the embedded 270M
# base model is slow on CPU. Every generated answer is constrained to its declared form, so answers
# parse; most candidates then end as rejected rows of the builders' own filters, with their reasons.
Q="$SHARED"/questions
builders=$("$PY" -m pipelines.builders names)
for name in $builders; do
  step "builder: $name"
  "$PY" -m pipelines.builders demo "$name" "$OUT" "$SHARED"
done

# Answers are read both as option probabilities and as free text in the papers' forms (a reply in
# none of them is a counted refusal); PROPHET's articles are shown as their summaries (§5).
step "evaluation: forecasters on every benchmark + ForecastBench -> eval/leaderboard, drift plot"
"$PY" -m pipelines.evaluate --root "$OUT" \
  --forecastbench "$Q"/forecastbench_2024-07-21-human.json "$Q"/forecastbench_2024-07-21_resolution_set.json \
  --limit 3 --k 3 --doc-words 80 --max-new-tokens 40 --modes closed_book,retrieval --retrievers bm25 \
  --answer-formats choice,text --model-cutoff 2024-03-01

step "audit: contexts, stored retrieval results and splits of every benchmark -> eval/audit.json"
"$PY" -m pipelines.audit --root "$OUT"

step "done in $(( $(date +%s) - started )) s; outputs under $OUT"
for d in corpus index llm_smoke benchmarks eval; do
  [ -d "$OUT/$d" ] && find "$OUT/$d" -maxdepth 1 -mindepth 1 -type d | sort | sed 's/^/  /'
done
for f in "$OUT"/benchmarks/*/dataset_card.md "$OUT"/eval/audit.json "$OUT"/eval/leaderboard.md "$OUT"/eval/drift.md "$OUT"/eval/drift.png; do
  [ -f "$f" ] && echo "  $f"
done
if [ -f "$OUT/eval/leaderboard.md" ]; then
  step "leaderboard ($OUT/eval/leaderboard.md)"
  cat "$OUT/eval/leaderboard.md"
fi

step "report: static HTML pages of every benchmark and of the evaluation -> $OUT/report/"
"$PY" -m pipelines.report --root "$OUT"
echo "  open $OUT/report/index.html in a browser"
exit 0
