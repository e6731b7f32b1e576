#!/usr/bin/env bash
# The official MCP conformance suite (npm @modelcontextprotocol/conformance, pinned with the
# Node.js it needs in fixtures/conformance) against ptc's MCP client.
#
#   scripts/mcp-conformance.sh client [OUT_DIR]
#
# For each spec revision ptc speaks (2025-11-25, 2026-07-28) it runs exactly the client scenarios
# the revision requires (`--requirements`: the non-auth ones, the `auth` suite, and the
# 2026-only auth scenarios `--suite auth` leaves out), then the `backcompat` suite (the 2025-03-26
# authorization scenarios), each with fixtures/conformance/client/
# peer.sh as the client: the suite starts its test server, and the peer points `ptc eval` at it.
# The suite judges each run against fixtures/conformance/expected-failures.yml (`client:`): a
# failing check not listed there, or a listed one that passes, fails the run. A scenario that
# recorded no check proved nothing and fails the run too.
#
# Prints one line per run, `RUN: N passed, M failed (K listed as expected) in S
# scenarios` (counting checks; INFO and SKIPPED ones are neither), and exits non-zero when a run
# failed: by the suite's verdict, or by any failed check not listed (printed with the end of
# ptc's stderr in its scenario). PTC_BIN names the ptc binary (default: target/debug/ptc, built
# if missing). The server scenarios run in `cargo test -p generated-example --test
# conformance`. Installed by scripts/test; CI runs this through ptc-cli/tests/conformance_client.rs.
set -euo pipefail
cd "$(dirname "$0")/.."

[[ ${1:-} == client ]] || {
  echo "usage: scripts/mcp-conformance.sh client [OUT_DIR]" >&2
  echo "(the server scenarios run in: cargo test -p generated-example --test conformance)" >&2
  exit 2
}
out=${2:-$(mktemp -d)}
mkdir -p "$out"
suite=fixtures/conformance
node=$suite/node_modules/.bin/node
cli=$suite/node_modules/@modelcontextprotocol/conformance/dist/index.js
for part in "$node" "$cli"; do
  [[ -e $part ]] || {
    echo "scripts/mcp-conformance.sh: the MCP conformance suite is not installed ($part is missing; scripts/test installs it)" >&2
    exit 1
  }
done
if [[ -z ${PTC_BIN:-} ]]; then
  cargo build --quiet --locked -p ptc-cli
  PTC_BIN=$PWD/target/debug/ptc
fi
export PTC_BIN

failed=0
# Each run: its name and how the suite selects its scenarios.
runs=(
  "2025-11-25 --requirements 2025-11-25"
  "2026-07-28 --requirements 2026-07-28"
  "backcompat --suite backcompat" # the auth scenarios of 2025-03-26 (OAuth metadata fallbacks)
)
for run in "${runs[@]}"; do
  read -r revision select <<<"$run"
  dir=$out/$revision
  rm -rf "$dir"
  status=0
  "$node" "$cli" client --command "$PWD/$suite/client/peer.sh" $select \
    --expected-failures "$suite/expected-failures.yml" --output-dir "$dir" --timeout 20000 \
    >"$dir.log" 2>&1 || status=$?
  # The tally from each scenario's checks.json; `listed`: failing checks the expected-failures
  # file names (with their reasons). The suite runs some scenarios it does not score (extensions,
  # scenarios added after the revision's release) and judges only the scored ones: their
  # failures are listed too, so a failure not listed shows here as failed but not listed.
  tally=$(python3 - "$dir" "$suite/expected-failures.yml" <<'PY'
import json, pathlib, re, sys
out, baseline = pathlib.Path(sys.argv[1]), open(sys.argv[2]).read()
client = baseline.split("\nclient:", 1)[1] if "\nclient:" in baseline else ""
listed = set(re.findall(r"^  - (\S+)", client, re.M))
count = {"passed": 0, "failed": 0, "listed": 0, "scenarios": 0}
empty, details = [], []
for d in sorted(p for p in out.rglob("*") if p.is_dir() and p.name != "auth"):
    # The suite names each scenario's folder NAME-<ISO time with - for :>; the time's own
    # minutes, seconds or milliseconds may read "-20", so the whole stamp is matched.
    name = re.sub(r"-\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d-\d{3}Z$", "", str(d.relative_to(out)))
    count["scenarios"] += 1
    checks = d / "checks.json"
    results = json.loads(checks.read_text() or "[]") if checks.exists() else []
    if not results:
        empty.append(name)
    unlisted = []
    for c in results:
        if c["status"] == "SUCCESS":
            count["passed"] += 1
        elif c["status"] in ("FAILURE", "WARNING"):
            count["failed"] += 1
            if f"{name}:{c['id']}" in listed:
                count["listed"] += 1
            else:
                unlisted.append(f"{c['id']}: {c.get('errorMessage') or c.get('description', '')}")
    if unlisted:
        # What failed and what the peer (ptc) said, so a failure seen once in CI can be read.
        stderr = d / "stderr.txt"
        said = stderr.read_text(errors="replace").splitlines()[-8:] if stderr.exists() else []
        details.append(f"{name}: " + "; ".join(unlisted) + "".join(f"\n  | {l}" for l in said))
print(f"{count['passed']} passed, {count['failed']} failed ({count['listed']} listed as expected) "
      f"in {count['scenarios']} scenarios")
print(" ".join(empty))
print("\n".join(details))
PY
)
  echo "$revision: $(head -1 <<<"$tally")"
  read -r -a empty <<<"$(sed -n 2p <<<"$tally")"
  if ((status != 0)); then
    echo "$revision: the suite's verdict failed (exit $status); its output:" >&2
    sed 's/\x1b\[[0-9;]*m//g' "$dir.log" | sed -n '/^Total:/,$p' >&2
    failed=1
  fi
  # The suite judges only the scenarios it scores; a failure in any other fails the run too.
  if [[ -n $(sed -n '3,$p' <<<"$tally") ]]; then
    echo "$revision: failed checks not listed as expected, and the end of ptc's stderr in each:" >&2
    sed -n '3,$p' <<<"$tally" >&2
    failed=1
  fi
  if ((${#empty[@]})); then
    echo "$revision: scenarios that recorded no check (they proved nothing): ${empty[*]}" >&2
    failed=1
  fi
done
exit $failed
