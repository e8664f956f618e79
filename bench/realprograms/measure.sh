#!/usr/bin/env bash
# Measures what `andes compile` (transparent checkpointing) costs on the
# real programs that build.sh made. See README.md beside this file.
#
#   bench/realprograms/measure.sh [ROUNDS] [PROGRAM...]
#
# ROUNDS (default 5) rounds; each round runs every program in four ways,
# in an order that rotates from round to round:
#   plain     andes run of the module as built: the default, unmetered
#             (no fuel, no epoch checks) on Linux x86_64
#   metered   the same module with --meter-fuel (fuel and epoch checks,
#             as a job with a MaxFuel runs), no instrumentation
#   compiled  the module instrumented by `andes compile`, no checkpoints
#   ckpt      the instrumented module with --checkpoint-dir D
#             --checkpoint-every $EVERY: snapshotted every $EVERY as it runs
# Every run's standard output is checked against the native build's
# (expected/NAME.sha256) and its exit code must be 0, or the script fails.
#
# Environment: ANDES (default <repo>/target/release/andes), OUT (default
# <repo>/target/realprograms), EVERY (default 2s), VARIANTS (default
# "plain metered compiled ckpt": the kinds of run, a subset for a quick
# look); TABLE_ONLY=1 only
# rewrites table.md from the results.tsv and compile.tsv already there.
# Writes $OUT/measure/{results.tsv,compile.tsv,table.md}.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
OUT="${OUT:-$REPO/target/realprograms}"
ANDES="${ANDES:-$REPO/target/release/andes}"
EVERY="${EVERY:-2s}"
ROUNDS="${1:-5}"
shift || true
WANT=("$@")
M="$OUT/measure"
mkdir -p "$M/compiled" "$M/logs" "$M/ckpt"

[ -f "$OUT/programs.tsv" ] || { echo "measure.sh: run build.sh first" >&2; exit 1; }

wanted() {
  [ ${#WANT[@]} -eq 0 ] && return 0
  local w
  for w in "${WANT[@]}"; do [ "$w" = "$1" ] && return 0; done
  return 1
}

declare -a NAMES=() MODS=() MEMS=() INS=() ARGS=()
while IFS=$'\t' read -r name module _native mem stdin args; do
  wanted "$name" || continue
  NAMES+=("$name") MODS+=("$module") MEMS+=("$mem") INS+=("$stdin") ARGS+=("$args")
done < "$OUT/programs.tsv"
[ ${#NAMES[@]} -gt 0 ] || { echo "measure.sh: no such program" >&2; exit 1; }

if [ "${TABLE_ONLY:-0}" = 1 ]; then
  [ -f "$M/results.tsv" ] || { echo "measure.sh: no $M/results.tsv" >&2; exit 1; }
else

# ------------------------------------------------------------ andes compile
# Each module once (the Lua module serves three programs): wall and CPU
# time of the command, size before and after.
printf 'module\tcompile_wall_s\tcompile_cpu_s\tbytes_before\tbytes_after\n' > "$M/compile.tsv"
for module in $(printf '%s\n' "${MODS[@]}" | sort -u); do
  echo "== andes compile $module" >&2
  /usr/bin/time -o "$M/logs/compile-$module.time" -f '%e %U %S' \
    nice -n 19 "$ANDES" compile "$OUT/wasm/$module" -o "$M/compiled/$module" \
    > "$M/logs/compile-$module.log" 2>&1
  read -r wall u s < "$M/logs/compile-$module.time"
  printf '%s\t%s\t%s\t%s\t%s\n' "$module" "$wall" "$(echo "$u $s" | awk '{printf "%.2f", $1 + $2}')" \
    "$(stat -c %s "$OUT/wasm/$module")" "$(stat -c %s "$M/compiled/$module")" >> "$M/compile.tsv"
done

# ------------------------------------------------------------------- runs
# One run: prints a results line. Fails the script on a wrong output.
run_one() { # INDEX VARIANT ROUND
  local i=$1 variant=$2 round=$3
  local name=${NAMES[$i]} module=${MODS[$i]} mem=${MEMS[$i]} stdin=${INS[$i]}
  local dir="$OUT/run/$name" log="$M/logs/$name-$variant-$round"
  local wasm="$OUT/wasm/$module" in=/dev/null
  local -a opts=(--memory "$mem" --dir "$dir")
  [ "$stdin" = "-" ] || in="$dir/$stdin"
  case $variant in
    plain) ;;
    metered) opts+=(--meter-fuel) ;;
    compiled) wasm="$M/compiled/$module" ;;
    ckpt)
      wasm="$M/compiled/$module"
      rm -rf "$M/ckpt/$name"
      opts+=(--checkpoint-dir "$M/ckpt/$name" --checkpoint-every "$EVERY") ;;
  esac
  # shellcheck disable=SC2086  # ARGS are space-separated words
  set +e
  /usr/bin/time -o "$log.time" -f '%U %S %e' nice -n 19 "$ANDES" run "${opts[@]}" "$wasm" ${ARGS[$i]} \
    < "$in" 2> "$log.err" | sha256sum | cut -d' ' -f1 > "$log.sha"
  local rc=${PIPESTATUS[0]}
  set -e
  local want got
  want="$(cat "$OUT/expected/$name.sha256")"
  got="$(cat "$log.sha")"
  if [ "$rc" -ne 0 ] || ! grep -q 'job exited normally with return value 0' "$log.err"; then
    echo "measure.sh: $name $variant round $round: did not exit 0 (see $log.err)" >&2
    exit 1
  fi
  if [ "$got" != "$want" ]; then
    echo "measure.sh: $name $variant round $round: output $got, native output $want" >&2
    exit 1
  fi
  # andes: cpu 3.700s (user 3.681s, system 0.020s), wall 4.624s, ...
  local cpu wall snaps snapbytes proc
  cpu="$(sed -n 's/^andes: cpu \([0-9.]*\)s .*/\1/p' "$log.err" | tail -1)"
  wall="$(sed -n 's/^andes: cpu .*, wall \([0-9.]*\)s.*/\1/p' "$log.err" | tail -1)"
  snaps="$(grep -c '^andes: checkpoint: ' "$log.err" || true)"
  snapbytes="$(sed -n 's/^andes: checkpoint: .* (\([0-9]*\) bytes)$/\1/p' "$log.err" | awk '{s += $1} END {printf "%.0f\n", s}')"
  proc="$(awk '{printf "%.3f", $1 + $2}' "$log.time")"
  # andes: paused 3 times for a checkpoint or vacate; ...: p99 0.41 ms, max 0.52 ms
  local p99 pmax
  p99="$(sed -n 's/^andes: paused .* p99 \([0-9.]*\) ms, max .*/\1/p' "$log.err" | tail -1)"
  pmax="$(sed -n 's/^andes: paused .* max \([0-9.]*\) ms$/\1/p' "$log.err" | tail -1)"
  rm -rf "$M/ckpt/$name"
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$variant" "$round" "$cpu" "$wall" "$proc" \
    "$snaps" "$snapbytes" "${p99:-}" "${pmax:-}"
}

read -r -a VARIANTS <<< "${VARIANTS:-plain metered compiled ckpt}"
printf 'program\tvariant\tround\tguest_cpu_s\tguest_wall_s\tprocess_cpu_s\tsnapshots\tsnapshot_bytes\tpause_p99_ms\tpause_max_ms\n' > "$M/results.tsv"
uptime > "$M/load.txt"
for ((r = 1; r <= ROUNDS; r++)); do
  for i in "${!NAMES[@]}"; do
    for ((k = 0; k < ${#VARIANTS[@]}; k++)); do
      v=${VARIANTS[$(((k + r + i) % ${#VARIANTS[@]}))]}
      line="$(run_one "$i" "$v" "$r")"
      echo "$line" >> "$M/results.tsv"
      echo "   round $r: $line" >&2
    done
  done
  uptime >> "$M/load.txt"
done
fi

# ------------------------------------------------------------------ table
python3 - "$M" "$OUT/programs.tsv" "$EVERY" > "$M/table.md" <<'EOF'
import csv, math, statistics, sys
m, manifest, every = sys.argv[1], sys.argv[2], sys.argv[3]
rows = list(csv.DictReader(open(f"{m}/results.tsv"), delimiter="\t"))
comp = {r["module"]: r for r in csv.DictReader(open(f"{m}/compile.tsv"), delimiter="\t")}
mods = {l.split("\t")[0]: l.split("\t")[1] for l in open(manifest) if l.strip()}
names = []
for r in rows:
    if r["program"] not in names:
        names.append(r["program"])
def med(name, variant, key):
    # NaN for a kind of run not made (VARIANTS): its columns read "nan".
    xs = [float(r[key]) for r in rows if r["program"] == name and r["variant"] == variant]
    return statistics.median(xs) if xs else float("nan")
def kib(b):
    b = int(b)
    return f"{b / 1048576:.1f} MiB" if b >= 1048576 else f"{b / 1024:.0f} KiB"
def mb(b):
    return f"{b / 1e6:.1f}" if b < 1e7 else f"{b / 1e6:.0f}"
n = len([r for r in rows if r["program"] == names[0] and r["variant"] == "plain"])
print(f"| program | plain CPU s | compiled CPU s (checkpoint every {every}) | ratio "
      f"| compile time s | size before → after | metered plain CPU s | compiled, no checkpoint, CPU s "
      f"| compiled / metered | snapshots per run (MB written) | plain wall s "
      f"| compiled wall s (checkpoint every {every}) | pause: request to paused, max ms |")
print("| --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
def pause_max(name):
    xs = [float(r["pause_max_ms"]) for r in rows if r["program"] == name and r["variant"] == "ckpt"
          and r.get("pause_max_ms")]
    return f"{max(xs):.2f}" if xs else "–"
ratios, ratios_m, ratios_c, ratios_i = [], [], [], []
for name in names:
    p = med(name, "plain", "guest_cpu_s")
    c = med(name, "ckpt", "guest_cpu_s")
    mt = med(name, "metered", "guest_cpu_s")
    cn = med(name, "compiled", "guest_cpu_s")
    ratios.append(c / p); ratios_m.append(mt / p); ratios_c.append(cn / p); ratios_i.append(cn / mt)
    mod = comp[mods[name]]
    print(f"| {name} | {p:.2f} | {c:.2f} | {c / p:.2f}× | {float(mod['compile_wall_s']):.1f} "
          f"| {kib(mod['bytes_before'])} → {kib(mod['bytes_after'])} | {mt:.2f} ({mt / p:.2f}×) "
          f"| {cn:.2f} ({cn / p:.2f}×) | {cn / mt:.2f}× | {med(name, 'ckpt', 'snapshots'):.0f} "
          f"({mb(med(name, 'ckpt', 'snapshot_bytes')) if c == c else 'nan'}) "
          f"| {med(name, 'plain', 'guest_wall_s'):.2f} | {med(name, 'ckpt', 'guest_wall_s'):.2f} "
          f"| {pause_max(name)} |")
def g(xs):
    xs = [x for x in xs if not math.isnan(x)]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")
print(f"| **geometric mean** | | | **{g(ratios):.2f}×** | | | {g(ratios_m):.2f}× | {g(ratios_c):.2f}× "
      f"| {g(ratios_i):.2f}× | | | | |")
print()
print(f"Medians of {n} interleaved runs of each kind. CPU is the guest's CPU time as `andes run` "
      "reports it (`andes: cpu ...`: the job thread's user + system time). A pause is the time "
      "from a checkpoint request (the poll word raised) to the job paused (its stack unwound), "
      "as `andes run` reports it; the column is the longest over every checkpointed run.")
EOF
cat "$M/table.md"
