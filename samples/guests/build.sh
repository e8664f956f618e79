#!/usr/bin/env bash
# Builds the sample guests written in C and Go, which know nothing of andes:
#
#   textstat.wasm   c/textstat.c, with zig cc -target wasm32-wasi
#   coopsum.wasm    c/coopsum.c, which uses the C guest SDK
#                   (guest-sdk/c/andes.h); and coopsum_cpp.wasm, the same
#                   source built as C++ (zig c++), to keep the header C++'s
#   fannkuch.wasm   go/fannkuch.go, with GOOS=wasip1 GOARCH=wasm
#   coopgo.wasm     go/coopgo/, which uses the Go guest SDK (guest-sdk/go)
#                   through a replace directive: a module of its own
#
# into samples/target/wasm32-wasip1/release/ beside the Rust samples, and the
# same sources natively into samples/target/native/, whose outputs are the
# known-good ones the tests compare with. It also builds test_andes, the
# C SDK's own tests (guest-sdk/c/test_andes.c), natively and for
# wasm32-wasi; the system tests run both. The toolchains come from pinned PyPI
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

# The C guest SDK's users: rebuilt when the header changes too.
SDK="$REPO/guest-sdk/c"
newest() { # FILE... : the newest of them
  local n="$1"
  for f in "$@"; do [ "$f" -nt "$n" ] && n="$f"; done
  echo "$n"
}
zigcxx() { PYTHONPATH="$TOOLCHAINS/pip" ${NICE:-} python3 -m ziglang c++ "$@"; }
C="$HERE/c/coopsum.c"
CSRC="$(newest "$C" "$SDK/andes.h")"
COPT+=(-I"$SDK" -ffp-contract=off)
if stale "$WASM/coopsum.wasm" "$CSRC"; then
  echo "== building coopsum (C with andes.h, wasm32-wasi)" >&2
  zigcc -target wasm32-wasi "${COPT[@]}" -s -o "$WASM/coopsum.wasm" "$C"
fi
if stale "$WASM/coopsum_cpp.wasm" "$CSRC"; then
  echo "== building coopsum as C++ (andes.h from C++, wasm32-wasi)" >&2
  zigcxx -target wasm32-wasi -x c++ -std=c++17 -O2 -Wall -Wextra -Werror -I"$SDK" \
    -ffp-contract=off -s -o "$WASM/coopsum_cpp.wasm" "$C"
fi
if stale "$NATIVE/coopsum" "$CSRC"; then
  echo "== building coopsum (C with andes.h, native)" >&2
  zigcc "${COPT[@]}" -o "$NATIVE/coopsum" "$C"
fi
T="$SDK/test_andes.c"
TSRC="$(newest "$T" "$SDK/andes.h")"
if stale "$NATIVE/test_andes" "$TSRC"; then
  echo "== building test_andes (the C guest SDK's tests, native)" >&2
  zigcc "${COPT[@]}" -o "$NATIVE/test_andes" "$T"
fi
if stale "$WASM/test_andes.wasm" "$TSRC"; then
  echo "== building test_andes (the C guest SDK's tests with a host, wasm32-wasi)" >&2
  zigcc -target wasm32-wasi "${COPT[@]}" -s -o "$WASM/test_andes.wasm" "$T"
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

# The Go guest SDK (guest-sdk/go) and coopgo, its user: rebuilt when any of
# their Go files changes. Also andes_go_test, the SDK's own tests (go test
# -c), natively and for wasip1 (where they call a real host), which the
# system tests run; vet and gofmt first.
GSDK="$REPO/guest-sdk/go" GC="$HERE/go/coopgo"
newest_go() { # DIR... : the newest .go or go.mod file in them
  find "$@" -type f \( -name '*.go' -o -name go.mod \) -printf '%T@ %p\n' | sort -n | tail -n 1 | cut -d' ' -f2-
}
GSRC="$(newest_go "$GSDK" "$GC")"
if stale "$NATIVE/andes_go_test" "$GSRC"; then
  echo "== checking and building the Go guest SDK's tests (native)" >&2
  unformatted="$("$GOROOT/bin/gofmt" -l "$GSDK" "$GC")"
  if [ -n "$unformatted" ]; then
    echo "build.sh: not gofmt-formatted: $unformatted" >&2
    exit 1
  fi
  (cd "$GSDK" && "$GO" vet ./... && GOOS=wasip1 GOARCH=wasm "$GO" vet ./...)
  (cd "$GC" && "$GO" vet . && GOOS=wasip1 GOARCH=wasm "$GO" vet .)
  (cd "$GSDK" && "$GO" test -c -trimpath -o "$NATIVE/andes_go_test" ./andes)
fi
if stale "$WASM/andes_go_test.wasm" "$GSRC"; then
  echo "== building the Go guest SDK's tests (wasip1)" >&2
  (cd "$GSDK" && GOOS=wasip1 GOARCH=wasm "$GO" test -c -trimpath -o "$WASM/andes_go_test.wasm" ./andes)
fi
if stale "$WASM/coopgo.wasm" "$GSRC"; then
  echo "== building coopgo (Go with the guest SDK, wasip1)" >&2
  (cd "$GC" && GOOS=wasip1 GOARCH=wasm "$GO" build -trimpath -o "$WASM/coopgo.wasm" .)
fi
if stale "$NATIVE/coopgo" "$GSRC"; then
  echo "== building coopgo (Go with the guest SDK, native)" >&2
  (cd "$GC" && "$GO" build -trimpath -o "$NATIVE/coopgo" .)
fi
