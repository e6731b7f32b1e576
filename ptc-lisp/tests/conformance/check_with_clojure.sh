#!/bin/sh
# Re-check every case of the PTC-Lisp conformance corpus against real Clojure, in one JVM.
#
# Prerequisites (this script installs nothing itself):
#   apt-get update && apt-get install -y clojure libdata-json-clojure
# Debian's `clojure` package (Clojure 1.11) works offline; `libdata-json-clojure` is only
# needed for the json/* cases (without it they are reported as failures).
#
# Usage: ptc-lisp/tests/conformance/check_with_clojure.sh [case-name-substring]
#   Each divergence case is listed with what Clojure gives (HIDE_DIVERGENCES=1 to omit).
#   CORPUS_DIR=dir checks the case files in another directory (e.g. differential/ output).
# Exit status 0 when every case agrees (divergence cases: Clojure must differ).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
cp=/usr/share/java/clojure.jar
if [ ! -f "$cp" ]; then
  echo "Clojure not found at $cp; run: apt-get install -y clojure" >&2
  exit 2
fi
for jar in /usr/share/java/data.json.jar; do
  [ -f "$jar" ] && cp="$cp:$jar"
done
exec java -cp "$cp" clojure.main "$here/check_with_clojure.clj" "${CORPUS_DIR:-$here}" "$repo/docs/divergences.md" "$@"
