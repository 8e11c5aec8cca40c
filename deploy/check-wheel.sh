#!/usr/bin/env bash
# The install a new user makes, checked end to end: build the wheel from this checkout, install it
# into a fresh virtualenv in a temporary folder (dependencies from the package index), and there,
# with nothing of the checkout in reach, run `loopwatch demo --once` against a broker, then the
# `loopwatch replay` command the demo prints for its example. Exits 0 when both pass and the demo
# left no work folder behind. Takes a minute or two (the dependencies' install is most of it), so
# it is run by hand and in release checks; tests/deploy/test_package_data.py checks the packaging fast.
#
# usage: deploy/check-wheel.sh [BOOTSTRAP]     (default 127.0.0.1:9092: a broker must answer there)
# env:   PYTHON (python3): the interpreter the virtualenv is made from; KEEP=1 keeps the folder
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BOOTSTRAP="${1:-127.0.0.1:9092}"
PY="${PYTHON:-python3}"
TMP="$(mktemp -d "${TMPDIR:-/tmp}/loopwatch-wheel.XXXXXX")"
[[ "${KEEP:-0}" == 1 ]] || trap 'rm -rf "$TMP"' EXIT
say() { echo "check-wheel: $*"; }
fail() { echo "check-wheel: FAILED: $*" >&2; exit 1; }

t0=$SECONDS
say "building the wheel from $ROOT"
"$PY" -m pip wheel --no-deps -q -w "$TMP/dist" "$ROOT"
WHEEL="$(ls "$TMP"/dist/*.whl)"
say "installing $(basename "$WHEEL") into a fresh virtualenv in $TMP/venv"
"$PY" -m venv "$TMP/venv"
"$TMP/venv/bin/python" -m pip install -q "$WHEEL"
say "installed in $((SECONDS - t0)) s"

mkdir -p "$TMP/home" "$TMP/run"
cd "$TMP/run"  # neither the checkout nor its .venv is reachable from here
export HOME="$TMP/home" XDG_CACHE_HOME="$TMP/home/.cache"
unset LOOPWATCH_WORK KAFKA_WORK KAFKA_PYTHON PYTHONPATH
lw="$TMP/venv/bin/loopwatch"
"$TMP/venv/bin/python" -c 'import streams, sys; sys.exit(0 if "site-packages" in streams.__file__ else 1)' \
  || fail "streams is not imported from the installed wheel"

say "loopwatch demo --once --bootstrap $BOOTSTRAP"
"$lw" demo --once --rate 0 --metrics-port 0 --bootstrap "$BOOTSTRAP" >"$TMP/demo.out" 2>"$TMP/demo.err" \
  || { tail -n 30 "$TMP/demo.err" >&2; fail "loopwatch demo exited with $?"; }
grep -q "104 verdict(s) received" "$TMP/demo.err" || { cat "$TMP/demo.err" >&2; fail "the demo did not get 104 verdicts"; }
[[ -z "$(ls -A "$XDG_CACHE_HOME/loopwatch/demo" 2>/dev/null)" ]] || fail "the demo left $XDG_CACHE_HOME/loopwatch/demo/* behind"

replay="$(sed -n 's/^.*the same verdicts offline, without Kafka: //p' "$TMP/demo.err")"
[[ -n "$replay" ]] || fail "the demo named no replay command"
say "$replay"
read -r -a argv <<< "$replay"
"${argv[@]/#loopwatch/$lw}" >"$TMP/verdicts.jsonl" 2>"$TMP/replay.err" || { cat "$TMP/replay.err" >&2; fail "replay exited with $?"; }
lines="$(wc -l < "$TMP/verdicts.jsonl")"
[[ "$lines" == 104 ]] || fail "replay wrote $lines verdicts, not 104"
say "OK in $((SECONDS - t0)) s: the wheel's demo got 104 verdicts, its replay wrote 104"
