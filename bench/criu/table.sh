#!/usr/bin/env bash
# CRIU baseline for andes's incremental snapshots.
#
# What it measures: CRIU's dump and restore cost on a NATIVE build of the
# program andes's incremental-checkpoint benchmark runs as wasm: Lua 5.4 on
# bench/realprograms/lua/table.lua, which builds a table of MIB MiB of integers
# (rows of one 64 KiB page),
# prints "built N", then forever changes one entry in PCT % of its 64 KiB pages
# (so at most PCT/16 % of its 4 KiB pages). For each MIB in $MIBS and PCT in
# $PCTS it:
#   1. starts the native lua in a session of its own (setsid, stdin /dev/null,
#      stdout to a file) and waits for "built";
#   2. dump 1: the first, full dump while the process keeps running;
#   3. dumps 2..(1+ROUNDS), 200 ms apart, the process kept running; each timed
#      (wall clock of the criu command) and sized (pages-*.img bytes);
#   4. a final dump that kills the process, then `criu restore -d` of it,
#      timed until criu returns with the process restored and detached; the
#      restored process is checked to be running, then killed.
# Two modes (MODE=auto picks "track" when `criu check --feature
# mem_dirty_track` passes, else "full"):
#   track  the incremental chain CRIU documents for iterative migration:
#          `criu pre-dump --track-mem` first, then pre-dumps with
#          `--prev-images-dir ../N-1 --track-mem` (only pages the kernel's
#          soft-dirty bits mark as written since the last one), final
#          `criu dump --prev-images-dir ../N-1 --track-mem`. Needs a kernel with
#          CONFIG_MEM_SOFT_DIRTY.
#   full   without soft-dirty tracking CRIU cannot dump incrementally (pre-dump
#          hits a BUG in criu/mem.c, --track-mem is refused, and a dump whose
#          --prev-images-dir is a dump, not a pre-dump, fails its pid-reuse
#          check), so every dump is a full `criu dump --leave-running`; the
#          "changed" column then gives the bytes of 4 KiB pages that differ
#          between consecutive dumps (computed afterwards, untimed), i.e. the
#          least a soft-dirty incremental dump would have had to write.
# One line per (MIB, PCT) on stdout and in $WORK/results.txt; per-dump detail
# (CRIU's own stats-dump: frozen time etc.) in $WORK/detail.txt.
#
# Run (as root, CRIU 4.x in PATH; nothing else may be benchmarking):
#   bench/criu/table.sh
#   MIBS="64" PCTS="1 100" ROUNDS=5 WORK=/tmp/criu-table bench/criu/table.sh
# Env: MIBS (64 1024 3584), PCTS (1 10 100), ROUNDS (5 dumps after the first),
#   GAP_MS (200), MODE (auto|track|full), LUA (target/realprograms/native/lua,
#   built by bench/realprograms/build.sh), WORK (image directories, default
#   /tmp/criu-table; images are on that file system, CRIU does not fsync),
#   KEEP=1 keeps the images, CHANGED=0 skips the changed-pages estimate,
#   WAIT_BENCH=0 does not wait for a running `checkpoint-* --bench`.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
MIBS="${MIBS:-64 1024 3584}"
PCTS="${PCTS:-1 10 100}"
ROUNDS="${ROUNDS:-5}"
GAP_MS="${GAP_MS:-200}"
MODE="${MODE:-auto}"
LUA="${LUA:-$REPO/target/realprograms/native/lua}"
SCRIPT="${SCRIPT:-$REPO/bench/realprograms/lua/table.lua}"
WORK="${WORK:-/tmp/criu-table}"
KEEP="${KEEP:-0}"
CHANGED="${CHANGED:-1}"
WAIT_BENCH="${WAIT_BENCH:-1}"
CRIU="${CRIU:-criu}"
IMG="$HERE/criu_images.py"

die() { echo "table.sh: $*" >&2; exit 1; }
[ -x "$LUA" ] || die "$LUA missing: build it (bench/realprograms/build.sh, native lua)"
[ -f "$SCRIPT" ] || die "$SCRIPT missing"
command -v "$CRIU" >/dev/null || die "criu not found"
[ "$(id -u)" = 0 ] || die "CRIU needs root"

if [ "$MODE" = auto ]; then
  if "$CRIU" check --feature mem_dirty_track >/dev/null 2>&1; then MODE=track; else MODE=full; fi
fi
case "$MODE" in track|full) ;; *) die "MODE must be auto, track or full" ;; esac

mkdir -p "$WORK"
RESULTS="$WORK/results.txt" DETAIL="$WORK/detail.txt"

# The other benchmark on this machine ('[c]' keeps pgrep from matching a
# command line that merely contains the pattern).
bench_running() { pgrep -f '[c]heckpoint-.*--bench' >/dev/null 2>&1; }
wait_quiet() {
  [ "$WAIT_BENCH" = 1 ] || return 0
  local said=0
  while bench_running; do
    if [ $said = 0 ]; then echo "   (waiting for checkpoint --bench to finish)" >&2; said=1; fi
    sleep 10
  done
}

now_us() { local t="${EPOCHREALTIME/[.,]/}"; echo "$t"; }
ms_since() { echo $(( ($(now_us) - $1) / 1000 )); }   # integer ms
mb() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1e6 }'; }
median() { printf '%s\n' "$@" | sort -n | awk '{ a[NR] = $1 } END { if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
max() { printf '%s\n' "$@" | sort -n | tail -1; }
stat_field() { # DIR FIELD: one value from CRIU's stats file, or NA
  "$IMG" stats "$1" | tr ' ' '\n' | awk -F= -v f="$2" '$1 == f { print $2; found = 1 } END { if (!found) print "NA" }'
}
us_to_ms() { [ "$1" = NA ] && echo NA || awk -v u="$1" 'BEGIN { printf "%.0f", u / 1000 }'; }

PID=""
cleanup() {
  [ -n "$PID" ] && kill -9 "$PID" 2>/dev/null || true
  if [ -f "$WORK/row/restored.pid" ]; then kill -9 "$(cat "$WORK/row/restored.pid")" 2>/dev/null || true; fi
}
trap cleanup EXIT

# criu_timed DIR ARGS...: runs criu, sets T_MS (wall ms) and BYTES; dies with
# the end of CRIU's log on failure.
criu_timed() {
  local dir="$1"; shift
  local t0; t0="$(now_us)"
  if ! "$CRIU" "$@" -o criu.log >/dev/null 2>&1; then
    echo "criu $* failed:" >&2; grep -E 'Error|Warn' "$dir/criu.log" | tail -8 >&2 || tail -8 "$dir/criu.log" >&2
    exit 1
  fi
  T_MS="$(ms_since "$t0")"
  BYTES="$("$IMG" pages "$dir")"
}

row() { # MIB PCT: prints the row's result line
  local mib="$1" pct="$2" d="$WORK/row"
  rm -rf "$d"; mkdir -p "$d"
  local load; load="$(cut -d' ' -f1 /proc/loadavg)"
  local contended=0

  # 1. the job, in a session of its own. From a script (no job control) the
  # child is no process-group leader, so setsid execs lua in place: $! is lua.
  ( cd "$d" && exec setsid "$LUA" "$SCRIPT" "$mib" "$pct" </dev/null >"$d/out.txt" 2>&1 ) &
  PID=$!
  disown "$PID"   # no "Killed" job report when criu's final dump kills it
  local t0; t0="$(now_us)"
  until grep -q '^built' "$d/out.txt" 2>/dev/null; do
    kill -0 "$PID" 2>/dev/null || die "lua exited: $(cat "$d/out.txt")"
    sleep 0.05
  done
  [ "$(readlink "/proc/$PID/exe")" = "$(readlink -f "$LUA")" ] || die "pid $PID is not lua"
  local build_ms; build_ms="$(ms_since "$t0")"
  sleep 0.2   # a few rounds of changes
  local rss_kb; rss_kb="$(awk '/^VmRSS/ { print $2 }' "/proc/$PID/status")"

  # 2-3. dump 1, then ROUNDS more, GAP_MS apart
  local n=$((ROUNDS + 1)) k ms=() bytes=() frozen=()
  for ((k = 1; k <= n; k++)); do
    bench_running && contended=1
    mkdir "$d/$k"
    if [ "$MODE" = track ]; then
      if [ $k = 1 ]; then
        criu_timed "$d/$k" pre-dump -t "$PID" -D "$d/$k" --track-mem --shell-job
      else
        criu_timed "$d/$k" pre-dump -t "$PID" -D "$d/$k" --prev-images-dir "../$((k - 1))" --track-mem --shell-job
      fi
    else
      criu_timed "$d/$k" dump -t "$PID" -D "$d/$k" --leave-running --shell-job
    fi
    ms+=("$T_MS"); bytes+=("$BYTES")
    frozen+=("$(us_to_ms "$(stat_field "$d/$k" frozen_time)")")
    echo "$mib MiB $pct %: dump $k: $T_MS ms, $(mb "$BYTES") MB; $("$IMG" stats "$d/$k")" >>"$DETAIL"
    sleep "$(awk -v g="$GAP_MS" 'BEGIN { print g / 1000 }')"
  done

  # 4. the final dump (the process is killed), then restore
  local f=$((n + 1))
  bench_running && contended=1
  mkdir "$d/$f"
  if [ "$MODE" = track ]; then
    criu_timed "$d/$f" dump -t "$PID" -D "$d/$f" --prev-images-dir "../$n" --track-mem --shell-job
  else
    criu_timed "$d/$f" dump -t "$PID" -D "$d/$f" --shell-job
  fi
  local final_ms="$T_MS" final_bytes="$BYTES"
  echo "$mib MiB $pct %: final dump: $T_MS ms, $(mb "$BYTES") MB; $("$IMG" stats "$d/$f")" >>"$DETAIL"
  while kill -0 "$PID" 2>/dev/null; do sleep 0.01; done   # criu killed it
  PID=""

  bench_running && contended=1
  local t1; t1="$(now_us)"
  if ! "$CRIU" restore -D "$d/$f" -d --shell-job --pidfile "$d/restored.pid" -o restore.log >/dev/null 2>&1; then
    echo "criu restore failed:" >&2; grep -E 'Error' "$d/$f/restore.log" | tail -8 >&2; exit 1
  fi
  local restore_ms; restore_ms="$(ms_since "$t1")"
  local rpid; rpid="$(cat "$d/restored.pid")"
  # Is it really running? Its CPU time must grow.
  local u0 u1 alive=no
  u0="$(awk '{ print $14 + $15 }' "/proc/$rpid/stat" 2>/dev/null || echo x)"
  sleep 0.3
  u1="$(awk '{ print $14 + $15 }' "/proc/$rpid/stat" 2>/dev/null || echo y)"
  if [ "$u0" != x ] && [ "$u1" != y ] && [ "$u1" -gt "$u0" ]; then alive=yes; fi
  local rrss_kb; rrss_kb="$(awk '/^VmRSS/ { print $2 }' "/proc/$rpid/status" 2>/dev/null || echo 0)"
  kill -9 "$rpid" 2>/dev/null || true
  while kill -0 "$rpid" 2>/dev/null; do sleep 0.05; done
  rm -f "$d/restored.pid"
  echo "$mib MiB $pct %: restore: $restore_ms ms, running after restore: $alive, RSS $((rrss_kb / 1024)) MiB; restore_time=$(stat_field "$d/$f" restore_time) pages_restored=$(stat_field "$d/$f" pages_restored)" >>"$DETAIL"
  [ "$alive" = yes ] || die "restored process $rpid is not running"

  # The least an incremental dump must write (full mode): pages that differ
  # between consecutive dumps, computed now that the timing is over.
  local chg=() c
  if [ "$MODE" = full ] && [ "$CHANGED" = 1 ]; then
    for ((k = 2; k <= f; k++)); do
      c="$("$IMG" changed "$d/$((k - 1))" "$d/$k")"
      echo "$mib MiB $pct %: dump $k differs from dump $((k - 1)) in $c bytes of 4 KiB pages" >>"$DETAIL"
      [ "$c" = NA ] || chg+=("$c")
    done
  fi

  # dumps 2..n are the "incremental" ones
  local inc_ms=("${ms[@]:1}") inc_b=("${bytes[@]:1}") inc_fz=("${frozen[@]:1}")
  local med_ms med_b per_mib chg_med=NA
  med_ms="$(median "${inc_ms[@]}")"; med_b="$(median "${inc_b[@]}")"
  per_mib="$(awk -v m="$med_ms" -v b="$med_b" 'BEGIN { if (b > 0) printf "%.2f", m / (b / 1048576); else print "NA" }')"
  [ ${#chg[@]} -gt 0 ] && chg_med="$(awk -v b="$(median "${chg[@]}")" 'BEGIN { printf "%.3f", b / 1e6 }')"
  local note=""; [ $contended = 1 ] && note=" (checkpoint --bench ran meanwhile)"
  printf '%-5s %4s %4s %7s %7s %8s %7s | %7s %7s %8s %8s %7s | %7s %8s | %7s | %7s %7s | %5s%s\n' \
    "$MODE" "$mib" "$pct" "$(mb $((rss_kb * 1024)))" \
    "${ms[0]}" "$(mb "${bytes[0]}")" "${frozen[0]}" \
    "$med_ms" "$(max "${inc_ms[@]}")" "$(mb "$med_b")" "$(mb "$(max "${inc_b[@]}")")" "$(median "${inc_fz[@]}")" \
    "$final_ms" "$(mb "$final_bytes")" "$restore_ms" "$per_mib" "$chg_med" "$load" "$note"
  echo "   built in $build_ms ms; RSS after restore $((rrss_kb / 1024)) MiB" >&2
  if [ "$KEEP" != 1 ]; then rm -rf "$d"; fi
}

{
  echo "# $(date -u '+%Y-%m-%d %H:%M:%SZ')  $("$CRIU" --version | head -1), mode $MODE, $ROUNDS dumps after the first, ${GAP_MS} ms apart"
  echo "# lua $LUA; images under $WORK ($(df -T "$WORK" | awk 'NR == 2 { print $2 }')); uptime:$(uptime | sed 's/.*load average/ load average/')"
  echo "# times: wall ms of the criu command; MB = 1e6 bytes of pages-*.img; frozen: CRIU's stats-dump frozen_time"
  echo "# ms/MiB: median incremental ms / median MiB written; changed: median MB of 4 KiB pages differing between consecutive dumps"
  printf '%-5s %4s %4s %7s %7s %8s %7s | %7s %7s %8s %8s %7s | %7s %8s | %7s | %7s %7s | %5s\n' \
    mode MiB pct rss_MB 1st_ms 1st_MB 1st_frz inc_med inc_max incMB_md incMB_mx frz_med \
    fin_ms fin_MB rest_ms ms/MiB changed load1
} | tee -a "$RESULTS"

for mib in $MIBS; do
  for pct in $PCTS; do
    wait_quiet
    # not in a pipeline: row must run in this shell (its exit trap, $PID)
    row "$mib" "$pct" >"$WORK/line.txt"
    tee -a "$RESULTS" <"$WORK/line.txt"
  done
done
echo "# done $(date -u '+%H:%M:%SZ'); uptime:$(uptime | sed 's/.*load average/ load average/')" | tee -a "$RESULTS"
