#!/usr/bin/env bash
# Mutation testing with cargo-mutants over the modules that hold rules (issue 8). Slow: each
# mutant rebuilds its crate and runs that crate's tests. See docs/testing.md.
#
#   scripts/mutants.sh [area...]          areas: plan core host observatory lisp (default: all)
#   scripts/mutants.sh --changed [BASE]   only code a change touches vs BASE (default origin/main,
#                                         else main)
#                                         within those modules; falls back to the CI list when the
#                                         diff touches none of them
#   scripts/mutants.sh --ci               what .ci/run runs: the fixed CI list (the security
#                                         rules), in place, capped at MUTANTS_CAP seconds
#                                         (default 900), installing cargo-mutants first. Not
#                                         --changed: a CI clone's origin is whatever it was
#                                         cloned from, so its diff says nothing reliable; run
#                                         --changed yourself before submitting
#   scripts/mutants.sh --iterate ...      re-test only what the previous run did not catch
#   scripts/mutants.sh --check-exclusions each exclude_re in .cargo/mutants.toml matches exactly
#                                         one mutant (a pattern that matches none hides nothing
#                                         and has gone stale; one that matches more hides a mutant
#                                         nobody argued is equivalent); part of --ci
#
# MUTANTS_LIST=1 lists the mutants instead of testing them.
# Results go to mutants.out/ (or $MUTANTS_OUT); `missed.txt` lists survivors. Survivors are
# killed with a test or listed with the reason they are equivalent in .cargo/mutants.toml
# (exclude_re), which cargo-mutants reads itself.
set -euo pipefail
cd "$(dirname "$0")/.."

# The rule-holding modules, by area: "file glob|name regex" (empty regex = every mutant).
declare -A AREA_FILES=(
  [plan]="ptc-plan/src/config/*.rs ptc-plan/src/effects.rs ptc-plan/src/headers.rs ptc-plan/src/pins.rs ptc-plan/src/openapi/compile.rs ptc-plan/src/openapi/resolve.rs ptc-plan/src/schema.rs ptc-plan/src/validate.rs ptc-plan/src/call_form.rs ptc-names/src/*.rs"
  [core]="ptc-core/src/wire/**/*.rs ptc-core/src/credentials/**/*.rs ptc-core/src/catalog/*.rs ptc-core/src/call/*.rs ptc-core/src/program/**/*.rs ptc-core/src/telemetry/*.rs"
  [host]="ptc-core/src/server/*.rs ptc-core/src/server/state/*.rs ptc-app/src/overrides.rs"
  [observatory]="fixtures/observatory-server/src/tokens.rs fixtures/observatory-server/src/api/mod.rs fixtures/observatory-server/src/api/handlers/mod.rs"
  [lisp]="ptc-lisp/src/limits.rs ptc-lisp/src/eval.rs ptc-lisp/src/json/decode.rs ptc-lisp/src/reader.rs ptc-lisp/src/printer.rs ptc-lisp/src/interp.rs ptc-lisp/src/host.rs ptc-lisp/src/meter.rs ptc-lisp/src/footprint.rs ptc-lisp/src/builtins/parallel.rs"
)
# In the language only the functions that hold a limit are in scope (the rest is covered by the
# conformance corpus, and a full run takes hours): the evaluator's steps, deadline, memory and
# depth; the JSON decoder's depth, memory and deadline; the reader's depth; the output cap; the
# program size; the memory meter, what values are charged (footprint) and the growth of
# collections; pmap's nesting limit, its branches' steps and how a stop reaches them; a tool
# result's decode against the program's budget (inside an evaluation and outside one).
# A function's mutants are named `... in NAME` (an operator inside it) or `replace NAME ...`
# (its whole body replaced, e.g. a check that always passes): both are in scope.
LISP_RE="limits.rs|meter.rs|footprint.rs|(in |replace )(par_run|drive|<impl Future for AnyReady>::poll|Ctx<'a>::(tick|check_slow|check_deadline|charge|charge_items|precheck_items|grow_vector|grow_map|grow_set|enter|decode_json)|Decoder<S>::(charge|tick|value)|Reader<'a>::read_form|append_output|Interpreter::eval_str|CallContext<'a>::decode_json)( |$)"
# In the Observatory's handlers only the shared authorisation helpers are in scope.
OBS_RE="tokens.rs|api/mod.rs|handlers/mod.rs:.* (in |replace )(visible|env_param|find_trace)( |$)"
# Fixed small list: what CI tests, and --changed when a change touches none of the modules (the
# security rules).
CI_FILES="ptc-plan/src/headers.rs ptc-core/src/credentials/binding.rs"
# The MCP host's behaviour is asserted by ptc-core's and ptc-app's unit tests and by the suites
# that drive the host: ptc-tests' host_eval and host_http, and generated-example's host_cli
# (stdio serving, the audit line, the REPL binary). Only those targets are built and run per
# mutant: every test target of these packages costs minutes per mutant on 2 cores.
HOST_PACKAGES=ptc-core,ptc-app,ptc-tests,generated-example
HOST_TARGETS=(--lib --test=host_eval --test=host_http --test=host_cli)

JOBS=${MUTANTS_JOBS:-1}
TIMEOUT=${MUTANTS_TIMEOUT:-180}
OUT=${MUTANTS_OUT:-.}
# --in-place (CI) runs one mutant at a time, and cargo-mutants refuses --jobs beside it.
IN_PLACE=(--timeout "$TIMEOUT" --build-timeout 600 --output "$OUT" --cargo-test-arg=--all-targets)
# The copy takes the gitignored interop peers too (fixtures/*/node_modules, .venv): without them
# the interop tests skip in the copy, and every mutant they guard survives.
COPY=(--gitignore=false)
COMMON=(--jobs "$JOBS" "${COPY[@]}" "${IN_PLACE[@]}")
# MUTANTS_LIST=1: list the mutants that would be tested, test nothing.
[ -n "${MUTANTS_LIST:-}" ] && COMMON=(--list) && IN_PLACE=(--list)

# The version whose mutant names .cargo/mutants.toml's patterns are written against.
MUTANTS_VERSION=27.1.0

check_exclusions() {
  cargo mutants --list --no-config --workspace | python3 -c '
import re, sys, tomllib
names = sys.stdin.read().splitlines()
patterns = tomllib.load(open(".cargo/mutants.toml", "rb"))["exclude_re"]
bad = 0
for p in patterns:
    hits = [n for n in names if re.search(p, n)]
    if len(hits) != 1:
        bad += 1
        print(f"exclude_re {p!r} matches {len(hits)} mutants, not 1:", *hits, sep="\n  ")
print(f"mutants: {len(patterns)} exclusions checked against {len(names)} mutants, {bad} wrong")
sys.exit(1 if bad or not patterns else 0)'
}

ci=false changed=false base= extra=() areas=()
while [ $# -gt 0 ]; do
  case "$1" in
    --check-exclusions) check_exclusions; exit ;;
    --ci) ci=true ;;
    --changed) changed=true
      if [ $# -gt 1 ] && [[ "$2" != -* ]]; then base=$2; shift; fi ;;
    --iterate) extra+=(--iterate) ;;
    plan|core|host|observatory|lisp) areas+=("$1") ;;
    *) echo "unknown argument $1 (see the header of $0)" >&2; exit 2 ;;
  esac
  shift
done
if [ ${#areas[@]} -eq 0 ] && ! $changed && ! $ci; then
  # Areas selected by name run one at a time.
  "$0" "${extra[@]}" plan core && "$0" "${extra[@]}" host && "$0" "${extra[@]}" observatory \
    && exec "$0" "${extra[@]}" lisp
fi
[ ${#areas[@]} -eq 0 ] && areas=(plan core host observatory lisp)

if $ci && [ "$(cargo mutants --version 2>/dev/null)" != "cargo-mutants $MUTANTS_VERSION" ]; then
  start=$(date +%s)
  cargo install --locked "cargo-mutants@$MUTANTS_VERSION"
  echo "cargo-mutants installed in $(( $(date +%s) - start )) s"
fi

shopt -s nullglob globstar
files=()
for a in "${areas[@]}"; do
  # shellcheck disable=SC2206
  for f in ${AREA_FILES[$a]}; do files+=("$f"); done
done

filter_args() { for f in "$@"; do printf -- '-f\n%s\n' "$f"; done; }

if $ci; then
  check_exclusions
  echo "mutants: running the CI list: $CI_FILES"
  # shellcheck disable=SC2086
  mapfile -t args < <(filter_args $CI_FILES)
  # A CI checkout is thrown away and its target/ is warm from the test run: mutate in place
  # instead of copying the tree and building everything again.
  cap=${MUTANTS_CAP:-900}
  set +e
  timeout --signal=INT --kill-after=60 "$cap" cargo mutants "${IN_PLACE[@]}" "${args[@]}" "${extra[@]}" --in-place
  rc=$?
  set -e
  case $rc in
    0) echo "mutants: every mutant caught" ;;
    124|130) echo "mutants: stopped at the ${cap}s cap; results so far in $OUT/mutants.out (not a failure)"
             [ -s "$OUT/mutants.out/missed.txt" ] && { echo "but these survived:"; cat "$OUT/mutants.out/missed.txt"; exit 2; }
             ;;
    *) echo "mutants: exit $rc (2 = survivors, see $OUT/mutants.out/missed.txt)"; exit $rc ;;
  esac
  exit 0
fi

if $changed; then
  if [ -z "$base" ]; then
    base=origin/main
    git rev-parse --verify -q "$base" >/dev/null || base=main
  fi
  diff_file=$(mktemp)
  if git rev-parse --verify -q "$base" >/dev/null; then
    git diff "$base"... -- "${files[@]}" >"$diff_file"
  fi
  if [ -s "$diff_file" ]; then
    echo "mutants: code changed vs $base in: $(git diff --name-only "$base"... -- "${files[@]}" | tr '\n' ' ')"
    mapfile -t args < <(filter_args "${files[@]}")
    args+=(--in-diff "$diff_file" --exclude-re "eval.rs.*in Ctx<'a>::eval")
    # A change to the host needs the cross-crate tests, and then every package's.
    if git diff --name-only "$base"... -- "${files[@]}" | grep -q '^ptc-core/src/server/'; then
      args+=(--test-workspace true)
    fi
  else
    echo "mutants: no change vs $base in the mutation-tested modules; running the CI list: $CI_FILES"
    # shellcheck disable=SC2086
    mapfile -t args < <(filter_args $CI_FILES)
  fi
  exec cargo mutants "${COMMON[@]}" "${args[@]}" "${extra[@]}"
fi

mapfile -t args < <(filter_args "${files[@]}")
if [[ " ${areas[*]} " == *" lisp "* ]]; then
  if [ ${#areas[@]} -gt 1 ]; then
    echo "run the lisp area on its own (its mutants are selected by name): scripts/mutants.sh lisp" >&2
    exit 2
  fi
  args+=(--re "$LISP_RE")
elif [[ " ${areas[*]} " == *" host "* ]]; then
  if [ ${#areas[@]} -gt 1 ]; then
    echo "run the host area on its own (it needs the cross-crate tests): scripts/mutants.sh host" >&2
    exit 2
  fi
  [ -n "${MUTANTS_LIST:-}" ] && exec cargo mutants --list "${args[@]}"
  # cargo-mutants' own baseline runs only the mutated package's tests, which lack these targets:
  # the same tests run here on the unmutated tree instead.
  # shellcheck disable=SC2046
  cargo test --locked $(printf -- '-p %s ' ${HOST_PACKAGES//,/ }) "${HOST_TARGETS[@]}"
  exec cargo mutants --jobs "$JOBS" "${COPY[@]}" --timeout "$TIMEOUT" --build-timeout 600 --output "$OUT" \
    --baseline skip --test-package "$HOST_PACKAGES" "${HOST_TARGETS[@]/#/--cargo-arg=}" \
    "${args[@]}" "${extra[@]}"
elif [[ " ${areas[*]} " == *" observatory "* ]]; then
  if [ ${#areas[@]} -gt 1 ]; then
    echo "run the observatory area on its own (its mutants are selected by name): scripts/mutants.sh observatory" >&2
    exit 2
  fi
  args+=(--re "$OBS_RE")
fi
exec cargo mutants "${COMMON[@]}" "${args[@]}" "${extra[@]}"
