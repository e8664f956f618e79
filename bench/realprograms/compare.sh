#!/usr/bin/env bash
# Compares builds of one suite program side by side: interleaved runs of
# `andes run`, each output checked against the native build's, and the
# minimum and median guest CPU of each (a quick A/B of two instrumentations,
# or of an instrumentation against the plain module). See README.md.
#
#   bench/realprograms/compare.sh ROUNDS PROGRAM LABEL=MODULE.wasm...
#
# e.g. compare.sh 5 sqlite plain=target/realprograms/wasm/sqlite.wasm \
#        old=/tmp/sqlite-old.wasm new=/tmp/sqlite-new.wasm
# Environment: ANDES (default <repo>/target/release/andes), OUT (default
# <repo>/target/realprograms, where build.sh put the suite).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
OUT="${OUT:-$REPO/target/realprograms}"
ANDES="${ANDES:-$REPO/target/release/andes}"
[ $# -ge 3 ] || { sed -n 2,12p "$0" >&2; exit 2; }
ROUNDS=$1 PROGRAM=$2
shift 2
line="$(grep "^$PROGRAM	" "$OUT/programs.tsv")" || { echo "compare.sh: no program $PROGRAM" >&2; exit 1; }
IFS=$'\t' read -r name _module _native mem stdin args <<< "$line"
dir="$OUT/run/$name" in=/dev/null
[ "$stdin" = "-" ] || in="$dir/$stdin"
want="$(cat "$OUT/expected/$name.sha256")"
err="$(mktemp)"
trap 'rm -f "$err"' EXIT
declare -A CPU
for _ in $(seq "$ROUNDS"); do
  for v in "$@"; do
    label=${v%%=*} wasm=${v#*=}
    # shellcheck disable=SC2086  # args are space-separated words
    got="$(nice -n 19 "$ANDES" run --memory "$mem" --dir "$dir" "$wasm" $args < "$in" 2> "$err" \
      | sha256sum | cut -d' ' -f1)"
    if [ "$got" != "$want" ]; then
      echo "compare.sh: $name $label: output $got, native output $want" >&2
      tail -3 "$err" >&2
      exit 1
    fi
    CPU[$label]="${CPU[$label]:-} $(sed -n 's/^andes: cpu \([0-9.]*\)s .*/\1/p' "$err" | tail -1)"
  done
done
for v in "$@"; do
  label=${v%%=*}
  # shellcheck disable=SC2086
  printf '%s\t%s\t%s\n' "$name" "$label" "$(printf '%s\n' ${CPU[$label]} | sort -n | awk \
    '{a[NR] = $1} END {printf "min %.2f\tmedian %.2f\t(%d runs)", a[1], a[int((NR + 1) / 2)], NR}')"
done
