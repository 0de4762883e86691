#!/usr/bin/env bash
# The main job end to end on the bundled sample data with the embedded local model.
# Called by `make demo` (which builds .venv first); usage: ./demo.sh SHARED_DATA_DIR OUT_DIR
set -euo pipefail
SHARED=${1:?usage: demo.sh SHARED_DATA_DIR OUT_DIR}
OUT=${2:?usage: demo.sh SHARED_DATA_DIR OUT_DIR}
PY=${PY:-.venv/bin/python}
# Spark's settings for a local JVM on a small machine (cluster/spark/local/spark-defaults.conf)
export SPARK_CONF_DIR=${SPARK_CONF_DIR:-$(cd "$(dirname "$0")" && pwd)/cluster/spark/local}
export SPARK_MASTER=${SPARK_MASTER:-local[2]} HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
mkdir -p "$OUT"
started=$(date +%s)
# Each step's wall time, printed in the summary at the end.
steps=() seconds=() current="" since=0
close_step() {
  [ -n "$current" ] && steps+=("$current") && seconds+=($(( $(date +%s) - since )))
  current=""
}
step() {
  close_step
  current=$1 since=$(date +%s)
  printf '\n\033[1m==> %s\033[0m\n' "$*"
}

# One local Ray cluster for every step: started here once (while Spark runs the corpus jobs),
# each step's driver attaches to it through RAY_ADDRESS (pipelines/llm/ray_env.py) instead of
# starting and stopping a cluster of its own. `ray start --block` stops the processes it started
# when it is terminated, which the exit trap does whatever the exit; no other Ray on the machine is
# touched. Its settings: 8 logical CPUs, twice a step's own local Ray, since the four builders
# run on it at once and each holds one for its engine actor; Parquet footers read by 4 actors, as
# a step's own Ray reads them. Its logs stay in $ray_tmp.
# token authentication, as a local ray.init() has it (the token in ~/.ray, made when missing): the
# cluster and the drivers attaching to it must agree on it
export RAY_DATA_PARQUET_FOOTER_NUM_ACTORS=4 RAY_AUTH_MODE=${RAY_AUTH_MODE:-token}
ray_tmp=$(mktemp -d /tmp/augury-demo-ray.XXXXXX)
ray_port=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# No drain on stop: draining lets Ray Serve move replicas away first (there are none here) and
# otherwise waits its full 30 s for this cluster's idle workers.
RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S=0 "$(dirname "$PY")"/ray start --head --block --port "$ray_port" --num-cpus 8 --include-dashboard false \
  --disable-usage-stats --temp-dir "$ray_tmp" >"$ray_tmp/ray_start.log" 2>&1 &
ray_pid=$!
trap 'kill "$ray_pid" 2>/dev/null; wait "$ray_pid" 2>/dev/null || true' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM  # a demo stopped by a signal stops its cluster too (the EXIT trap)
ray_address() {  # the cluster's address, once it is up (ray start writes it last)
  for _ in $(seq 600); do
    [ -s "$ray_tmp/ray_current_cluster" ] && { cat "$ray_tmp/ray_current_cluster"; return; }
    kill -0 "$ray_pid" 2>/dev/null || break
    sleep 1
  done
  echo "demo: the Ray cluster did not start; see $ray_tmp/ray_start.log" >&2
  return 1
}

# Every job from here on runs as soon as what it reads is written, side by side with the others,
# each a driver of its own (the Ray steps attach to the shared cluster): two chains of corpus jobs
# (the two that write corpus/articles, one after the other; the two that write corpus/wcep_events
# likewise), the index once corpus/articles is written, then each builder once the tables it reads
# are written (`python -m pipelines.builders names --ready`: Daily Oracle reads only the articles
# and OpenForecast no index, so they start before the index is built), and the LLM layer's smoke
# run (every request kind) with the builders that search the index. The machine stays busy: the
# embedded model decodes on one core per engine. The builders run with small limits (each
# declares its demo flags once, in pipelines/builders.py's registry; `python -m
# pipelines.builders demo NAME` prints the command it runs): the embedded 270M base model is slow
# on CPU. Every generated answer is constrained to its declared form, so answers parse; most
# candidates then end as rejected rows of the builders' own filters, with their reasons. Each
# job's lines come prefixed with its name; its whole log is also in $OUT/logs/<name>.log, and its
# own time is in the step table at the end.
Q="$SHARED"/questions
step "corpus jobs, index, LLM layer smoke run and builders, each as soon as its inputs are written"
mkdir -p "$OUT/logs"
run_logged() {  # NAME CMD...: CMD's lines prefixed with [NAME] and kept in $OUT/logs/NAME.log
  local name=$1 since rc=0
  shift
  since=$(date +%s)
  "$@" 2>&1 | tee "$OUT/logs/$name.log" | sed -u "s/^/[$name] /" || rc=${PIPESTATUS[0]}
  echo "$(( $(date +%s) - since )) $rc" >"$OUT/logs/$name.status"
  return "$rc"
}
declare -A job_of  # pid -> job name
jobs=()  # every job started, in order
start() {  # NAME CMD...: run in the background, logged
  jobs+=("$1")
  run_logged "$@" &
  job_of[$!]=$1
}
corpus_articles() {
  "$PY" -m jobs.ingest_news --root "$OUT" "$SHARED"/warc/*.warc.gz &&
    "$PY" -m jobs.ingest_articles_jsonl --root "$OUT" "$SHARED"/wcep/reportedly_articles_2015-09.json
}
corpus_wikipedia() {
  "$PY" -m jobs.ingest_wikipedia --root "$OUT" "$SHARED"/wikipedia/*.xml.bz2 tests/fixtures/wcep/portal_export.xml &&
    "$PY" -m jobs.ingest_wcep_html --root "$OUT" "$SHARED"/wcep/wcep_portal_daily_html_2025-09_2026-08.jsonl.gz \
      "$SHARED"/wcep/wp_current_events_2026-08.rss
}
# Only the tables the demo reads: the articles and the 512-word passages TCELongBench's questions
# retrieve (the job's default adds 100-word passages, which no step here searches); then one search
# with a cutoff.
index() {
  "$PY" -m pipelines.index --root "$OUT" --passage-words 512 &&
    "$PY" -m pipelines.search --root "$OUT" --cutoff 2022-09-16 --k 5 "storm damage and flooding"
}
declare -A writes=([corpus_articles]=corpus/articles [corpus_wikipedia]=corpus/wiki_pages,corpus/wcep_events [index]=index)
echo "demo: corpus_articles = news WARC files, then the WCEP-cited Reportedly articles (JSON Lines) -> corpus/articles"
echo "demo: corpus_wikipedia = Wikipedia dumps and portal wikitext day pages, then rendered portal day pages -> corpus/wiki_pages, corpus/wcep_events"
echo "demo: index = dated articles -> index/articles (LanceDB: BM25, MiniLM vectors), index/passages_512"
start corpus_articles corpus_articles
start corpus_wikipedia corpus_wikipedia
RAY_ADDRESS=$(ray_address)
export RAY_ADDRESS
builders=$("$PY" -m pipelines.builders names | tr "\n" " ")  # one line, names separated by spaces
# The evaluation's options, for both of its runs. Answers are read both as option probabilities
# and as free text in the papers' forms (a reply in none of them is a counted refusal); PROPHET's
# articles are shown as their summaries (§5).
evaluation=(--forecastbench "$Q"/forecastbench_2024-07-21-human.json "$Q"/forecastbench_2024-07-21_resolution_set.json
  --limit 3 --k 3 --doc-words 80 --max-new-tokens 40 --modes closed_book,retrieval --retrievers bm25
  --answer-formats choice,text --model-cutoff 2024-03-01)
# Once every builder has started and all but one have finished, the evaluation starts on the
# benchmarks built so far (and ForecastBench) while the last one runs: the other core is idle
# then. The evaluation step after this one covers every benchmark; the answers computed here come
# from the LLM cache.
failed=() finished=() written="" early=""
while [ ${#job_of[@]} -gt 0 ]; do
  rc=0
  wait -n -p pid "${!job_of[@]}" || rc=$?
  name=${job_of[$pid]}
  unset "job_of[$pid]"
  [ "$rc" -eq 0 ] && finished+=("$name") || failed+=("$name")
  if [ "$rc" -eq 0 ] && [ -n "${writes[$name]:-}" ]; then
    written+=",${writes[$name]}"
    [ "$name" = corpus_articles ] && start index index
    [ "$name" = index ] && start llm_smoke "$PY" -m pipelines.llm_smoke --root "$OUT"
    for ready in $("$PY" -m pipelines.builders names --ready "${written#,}"); do
      [[ " ${jobs[*]} " == *" $ready "* ]] || start "$ready" "$PY" -m pipelines.builders demo "$ready" "$OUT" "$SHARED"
    done
  fi
  waiting=0 building=0
  for other in $builders; do
    [[ " ${jobs[*]} " == *" $other "* ]] || waiting=$((waiting + 1))
  done
  for other in "${job_of[@]}"; do [[ " $builders " == *" $other "* ]] && building=$((building + 1)); done
  if [ "$waiting" -eq 0 ] && [ "$building" -eq 1 ] && [ ${#failed[@]} -eq 0 ] && [ -z "$early" ]; then
    early=checked  # once: when the last builder is the only one left
    # the finished builders whose benchmarks hold evaluation items (as the evaluation finds them)
    list=$("$PY" -c 'import sys; from pipelines.evaluate.inputs import discover_benchmarks as found
print(",".join(name for name in found(sys.argv[1]) if name in sys.argv[2:]))' "$OUT" "${finished[@]}")
    if [ -n "$list" ]; then
      echo "demo: evaluating $list and ForecastBench while the last builder runs (log $OUT/logs/evaluation_early.log)"
      start evaluation_early "$PY" -m pipelines.evaluate --root "$OUT" --benchmarks "$list" "${evaluation[@]}"
    fi
  fi
done
close_step
for name in "${jobs[@]}"; do
  read -r took rc <"$OUT/logs/$name.status"
  steps+=("  $name (exit $rc; log $OUT/logs/$name.log)") seconds+=("$took")
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "demo: failed: ${failed[*]} (their logs are under $OUT/logs)" >&2
  exit 1
fi

# Every benchmark now; what the early run answered is read from the cache, not computed again.
step "evaluation: forecasters on every benchmark + ForecastBench -> eval/leaderboard, drift plot"
"$PY" -m pipelines.evaluate --root "$OUT" "${evaluation[@]}"

step "audit: contexts, stored retrieval results and splits of every benchmark -> eval/audit.json"
"$PY" -m pipelines.audit --root "$OUT"

close_step
printf '\n\033[1m==> done in %s s; outputs under %s\033[0m\n' "$(( $(date +%s) - started ))" "$OUT"
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
close_step

printf '\n\033[1m==> time of each step (total %s s)\033[0m\n' "$(( $(date +%s) - started ))"
for i in "${!steps[@]}"; do
  printf "  %6s s  %s\n" "${seconds[$i]}" "${steps[$i]}" | cut -c1-110
done
exit 0
