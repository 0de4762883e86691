#!/usr/bin/env bash
# Zip the project's own code (jobs/ + udfs/) for `spark-submit --py-files`.
# Third-party packages (news-please, trafilatura, warcio, mwparserfromhell, s3fs, …) come from the
# executors' Python environment: the container image on Kubernetes, a venv-pack archive on EMR.
#   cluster/spark/build-pyfiles.sh [OUT.zip]        (default: dist/augury-pyfiles.zip)
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
out="${1:-$repo/dist/augury-pyfiles.zip}"
mkdir -p "$(dirname "$out")"
rm -f "$out"
cd "$repo"
python3 - "$out" <<'PY'
import sys, zipfile, pathlib
with zipfile.ZipFile(sys.argv[1], "w", zipfile.ZIP_DEFLATED) as zf:
    for package in ("jobs", "udfs"):
        for path in sorted(pathlib.Path(package).rglob("*.py")):
            zf.write(path)
PY
echo "$out"
