#!/usr/bin/env bash
# A personal pool of SLOTS slots (`andes pool up`, one process) running JOBS
# trivial jobs (samples' exit_code, no files) submitted as one `queue JOBS`
# through the command: seconds from the submit until the queue is empty,
# jobs/s, the pool process's CPU in all and per job, and its peak RSS (from
# /proc).
#
#   bench/pool-slots.sh SLOTS JOBS [ANDES]   (ANDES: target/release/andes)
#
# With FILES=1 each job is the `hello` sample instead: it prints to its
# standard output and writes hello.out, and both come back to the submit
# directory (`output = out/$(Process).out`; hello.out by the default
# transfer of new files), as a job that writes and returns a file.
#
# It also prints how busy the machine was from the submit's return to the
# empty queue (/proc/stat: busy, idle and iowait shares): time the pool spent
# waiting on its commits shows as idle and iowait.
#
# Build first: `cargo build --release --bin andes` and `cargo xtask samples`.
# Compare two builds by giving each its binary, interleaving the runs.
set -euo pipefail
SLOTS=${1:?usage: bench/pool-slots.sh SLOTS JOBS [ANDES]}
JOBS=${2:?usage: bench/pool-slots.sh SLOTS JOBS [ANDES]}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=$(realpath "${3:-$ROOT/target/release/andes}")
FILES=${FILES:-0}
if [ "$FILES" = 1 ]; then
    MODULE=$ROOT/samples/target/wasm32-wasip1/release/hello.wasm
else
    MODULE=$ROOT/samples/target/wasm32-wasip1/release/exit_code.wasm
fi
[ -x "$BIN" ] || { echo "no andes binary at $BIN" >&2; exit 2; }
[ -f "$MODULE" ] || { echo "no $MODULE: run cargo xtask samples" >&2; exit 2; }
D=$(mktemp -d)
"$BIN" pool up --dir "$D" --slots "$SLOTS" >"$D/pool.log" 2>&1 &
PID=$!
trap 'kill $PID 2>/dev/null; wait $PID 2>/dev/null; rm -rf "$D"' EXIT
for _ in $(seq 1 600); do grep -q "pool ready" "$D/pool.log" && break; sleep 0.1; done
grep -q "pool ready" "$D/pool.log" || { echo "the pool did not start: $D/pool.log" >&2; exit 1; }
export ANDES_CONFIG=$D/andes.config
cp "$MODULE" "$D/"
cd "$D"
if [ "$FILES" = 1 ]; then
    mkdir out
    printf 'executable = hello.wasm\noutput = out/$(Process).out\nrequest_memory = 64\nrequest_disk = 1024\nqueue %s\n' "$JOBS" >job.sub
else
    printf 'executable = exit_code.wasm\narguments = 0\nrequest_memory = 64\nrequest_disk = 1024\nqueue %s\n' "$JOBS" >job.sub
fi
cpu() { awk '{print $14 + $15}' "/proc/$PID/stat"; }
a=$(cpu)
t0=$(date +%s.%N)
"$BIN" submit job.sub >/dev/null
ts=$(date +%s.%N)
s0=$(head -1 /proc/stat)
# The totals line only (a summary): asking for the jobs' ads would cost the
# schedd more than the jobs do.
until "$BIN" q -totals 2>/dev/null | grep -q "^Total for query: 0 jobs"; do sleep 0.05; done
t1=$(date +%s.%N)
s1=$(head -1 /proc/stat)
b=$(cpu)
hwm=$(awk '/^VmHWM:/ {print int($2 / 1024)}' "/proc/$PID/status")
echo "submit took $(python3 -c "print(round($ts - $t0, 3))") s"
python3 -c "
s = $t1 - $t0; c = ($b - $a) / $(getconf CLK_TCK)
print(f'files=$FILES slots={$SLOTS} jobs={$JOBS} {s:.2f} s {$JOBS / s:.0f} jobs/s pool CPU {c:.2f} s {c * 1e6 / $JOBS:.0f} us/job peak RSS {$hwm} MiB')"
python3 -c "
d = [y - x for x, y in zip(map(int, '$s0'.split()[1:]), map(int, '$s1'.split()[1:]))]
t = sum(d) or 1
print(f'machine after the submit: busy {100 * (t - d[3] - d[4]) / t:.0f}% idle {100 * d[3] / t:.0f}% iowait {100 * d[4] / t:.0f}%')"
