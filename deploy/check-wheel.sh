#!/usr/bin/env bash
# The install a new user makes, checked end to end: build the wheel from this checkout, install it
# into a fresh virtualenv in a temporary folder, and there, with nothing of the checkout in reach,
# run `loopwatch demo --once` against a broker, then the `loopwatch replay` command the demo prints
# for its example. Exits 0 when both pass and the demo left no work folder behind. `.ci/run` runs it
# after the test suite (make ci).
#
# The dependencies come from the package index the first time; their wheels, and the build tools
# (setuptools, wheel), are kept in a cache folder keyed by the Python version and pyproject.toml, so
# a later run with the same dependencies installs offline (~30 s instead of ~2-3 min). FRESH=1, or
# any change of pyproject.toml, resolves them from the index again.
#
# usage: deploy/check-wheel.sh [BOOTSTRAP]     (default 127.0.0.1:9092: a broker must answer there)
# env:   PYTHON (python3): the interpreter the virtualenv is made from; KEEP=1 keeps the folder;
#        CHECK_WHEEL_CACHE (~/.cache/loopwatch/check-wheel): the cache folder; FRESH=1: ignore it
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BOOTSTRAP="${1:-127.0.0.1:9092}"
PY="${PYTHON:-python3}"
TMP="$(mktemp -d "${TMPDIR:-/tmp}/loopwatch-wheel.XXXXXX")"
[[ "${KEEP:-0}" == 1 ]] || trap 'rm -rf "$TMP"' EXIT
say() { echo "check-wheel: $*"; }
fail() { echo "check-wheel: FAILED: $*" >&2; exit 1; }

t0=$SECONDS
"$PY" -m pip --help 2>/dev/null | grep -q -- '--python <python>' \
  || fail "$PY's pip is too old (pip >= 22.3 installs into another environment with --python): $PY -m pip install -U pip"
pip_in() { local env="$1"; shift; "$PY" -m pip --python "$env/bin/python" "$@"; }
key="$("$PY" -c 'import hashlib, sys; print(sys.version.split()[0], hashlib.sha256(open(sys.argv[1], "rb").read()).hexdigest()[:16], sep="-")' "$ROOT/pyproject.toml")"
CACHE="${CHECK_WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/loopwatch/check-wheel}/$key"
if [[ "${FRESH:-0}" == 1 || ! -f "$CACHE/complete" ]]; then
  say "no cached dependencies for this pyproject.toml: building the cache in $CACHE from the package index"
  rm -rf "$CACHE" && mkdir -p "$CACHE"
  "$PY" -m venv --without-pip "$CACHE/build"
  read -r -a requires <<< "$("$PY" -c 'import sys, tomllib; print(" ".join(tomllib.load(open(sys.argv[1], "rb"))["build-system"]["requires"]))' "$ROOT/pyproject.toml")"
  pip_in "$CACHE/build" install -q "${requires[@]}"  # the build backend's requirements (pyproject.toml)
  fresh=1
fi

say "building the wheel from $ROOT"
pip_in "$CACHE/build" wheel --no-deps --no-build-isolation -q -w "$TMP/dist" "$ROOT"
WHEEL="$(ls "$TMP"/dist/*.whl)"
if [[ "${fresh:-0}" == 1 ]]; then  # the dependencies' wheels, resolved from the index
  pip_in "$CACHE/build" wheel -q -w "$CACHE/wheels" "$WHEEL"
  rm -f "$CACHE/wheels"/loopwatch-*.whl
  touch "$CACHE/complete"
fi
say "installing $(basename "$WHEEL") into a fresh virtualenv in $TMP/venv"
"$PY" -m venv --without-pip "$TMP/venv"
pip_in "$TMP/venv" install -q --no-index --find-links "$CACHE/wheels" "$WHEEL"
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
