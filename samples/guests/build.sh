#!/usr/bin/env bash
# Builds the sample guests written in C and Go, which know nothing of andes:
#
#   textstat.wasm   c/textstat.c, with zig cc -target wasm32-wasi
#   fannkuch.wasm   go/fannkuch.go, with GOOS=wasip1 GOARCH=wasm
#
# into samples/target/wasm32-wasip1/release/ beside the Rust samples, and the
# same sources natively into samples/target/native/, whose outputs are the
# known-good ones the tests compare with. The toolchains come from pinned PyPI
# wheels (toolchains.sh). `cargo xtask samples` runs this; it rebuilds only
# what is older than its source.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
OUT="${OUT:-$REPO/samples/target}"
WASM="$OUT/wasm32-wasip1/release" NATIVE="$OUT/native"
mkdir -p "$WASM" "$NATIVE"

# shellcheck source=toolchains.sh
source "$HERE/toolchains.sh"

stale() { [ ! -f "$1" ] || [ "$2" -nt "$1" ]; } # OUTPUT SOURCE

C="$HERE/c/textstat.c"
COPT=(-O2 -std=c11 -Wall -Wextra -Werror)
if stale "$WASM/textstat.wasm" "$C"; then
  echo "== building textstat (C, wasm32-wasi)" >&2
  zigcc -target wasm32-wasi "${COPT[@]}" -s -o "$WASM/textstat.wasm" "$C"
fi
if stale "$NATIVE/textstat" "$C"; then
  echo "== building textstat (C, native)" >&2
  zigcc "${COPT[@]}" -o "$NATIVE/textstat" "$C"
fi

G="$HERE/go/fannkuch.go"
if stale "$WASM/fannkuch.wasm" "$G"; then
  echo "== building fannkuch (Go, wasip1)" >&2
  (cd "$HERE/go" && GOOS=wasip1 GOARCH=wasm "$GO" build -trimpath -o "$WASM/fannkuch.wasm" .)
fi
if stale "$NATIVE/fannkuch" "$G"; then
  echo "== building fannkuch (Go, native)" >&2
  (cd "$HERE/go" && "$GO" build -trimpath -o "$NATIVE/fannkuch" .)
fi
