#!/bin/sh
# DAG workflows at scale, on a personal pool (release build):
#  1. a DAG of 100,000 nodes (1,000 groups of a root, 98 middles and a sink:
#     fan-out then fan-in) read and checked whole (`andes submit-dag -no_submit`);
#  2. the same DAG run by `andes dagman` with every node NOOP: DAGMan's own
#     cost per node (state machine, node log, reports), no jobs;
#  3. N trivial jobs (exit_code 0) as a flat DAG of N nodes, beside the same
#     N jobs as one plain `queue N` cluster, submit to last completion.
# Each prints wall seconds and the process's peak RSS (GNU time).
# Usage: bench/dag/run.sh [N]   (default 2000)
set -eu
N=${1:-2000}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
ANDES=${ANDES:-$ROOT/target/release/andes}
SAMPLES=${ANDES_SAMPLES:-$ROOT/samples/target/wasm32-wasip1/release}
W=$(mktemp -d)
trap 'cd "$W" && ANDES_CONFIG=$W/pool/andes.config "$ANDES" pool down >/dev/null 2>&1 || true; rm -rf "$W"' EXIT
cd "$W"
cp "$SAMPLES/exit_code.wasm" .
printf 'executable = exit_code.wasm\narguments = 0\nqueue\n' > ok.sub
python3 - <<'PY'
groups, middles = 1000, 98
with open("big.dag", "w") as f, open("noop.dag", "w") as g:
    for i in range(groups):
        names = [f"r{i}"] + [f"m{i}_{j}" for j in range(middles)] + [f"s{i}"]
        for n in names:
            f.write(f"JOB {n} ok.sub\n")
            g.write(f"JOB {n} ok.sub NOOP\n")
        for h in (f, g):
            h.write(f"PARENT r{i} CHILD " + " ".join(names[1:-1]) + "\n")
            h.write("PARENT " + " ".join(names[1:-1]) + f" CHILD s{i}\n")
PY
measure() { # label, command...
    label=$1; shift
    /usr/bin/time -f "%e %M" -o t.txt "$@" > out.txt 2>&1 || { cat out.txt; exit 1; }
    read -r secs kb < t.txt
    echo "$label: ${secs} s, peak RSS $((kb / 1024)) MiB"
}
measure "check 100,000 nodes (submit-dag -no_submit)" "$ANDES" submit-dag -no_submit big.dag
"$ANDES" pool up --dir pool --slots 2 > pool.log 2>&1 &
timeout 120 sh -c 'until grep -qsx "pool ready" pool.log; do sleep 0.2; done'
export ANDES_CONFIG=$W/pool/andes.config
measure "run 100,000 NOOP nodes (andes dagman)" "$ANDES" dagman noop.dag
python3 - "$N" <<'PY'
import sys
n = int(sys.argv[1])
with open("flat.dag", "w") as f:
    for i in range(n):
        f.write(f"JOB n{i} ok.sub\n")
PY
printf 'executable = exit_code.wasm\narguments = 0\nlog = plain.log\nqueue %s\n' "$N" > plain.sub
start=$(date +%s.%N)
"$ANDES" submit plain.sub > /dev/null
"$ANDES" wait plain.log > /dev/null
end=$(date +%s.%N)
echo "$N plain jobs (queue $N): $(echo "$end - $start" | bc) s, $(echo "$N / ($end - $start)" | bc) jobs/s"
start=$(date +%s.%N)
measure "$N-node flat DAG (andes dagman)" "$ANDES" dagman flat.dag
end=$(date +%s.%N)
echo "$N-node flat DAG: $(echo "$N / ($end - $start)" | bc) jobs/s"
