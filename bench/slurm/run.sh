#!/bin/bash
# Slurm reference figures for the andes pool benchmark.
# Prerequisite: Slurm running (single node, 2 cores, CR_Core => 2 concurrent jobs),
# e.g. via start.sh with slurm.conf from this directory. Run as a user allowed to submit.
#
#   ./run.sh [array|individual|latency|all]     (default: all)
#   N=10000 L=50 POLL=0.2 ./run.sh
#
# throughput: jobs/s from just before the first sbatch to the moment squeue is empty
#             (poll interval POLL seconds, so the end time is late by at most POLL).
# latency:    L single jobs on an idle cluster, one at a time; the job prints
#             `date +%s.%N` when its batch script starts; latency = start - time
#             recorded just before sbatch. Median reported.
set -euo pipefail
N=${N:-10000}
L=${L:-50}
POLL=${POLL:-0.2}
MODE=${1:-all}
TMP=$(mktemp -d /tmp/slurm-bench.XXXXXX)
trap 'rm -rf "$TMP"' EXIT

now() { date +%s.%N; }
wait_empty() { while [ -n "$(squeue -h -o %i 2>/dev/null | head -1)" ]; do sleep "$POLL"; done; }
rate() { awk -v n="$1" -v a="$2" -v b="$3" 'BEGIN{printf "%d jobs in %.2f s = %.1f jobs/s", n, b-a, n/(b-a)}'; }

wait_empty   # start from an empty queue

if [ "$MODE" = array ] || [ "$MODE" = all ]; then
  t0=$(now)
  sbatch --array=0-$((N-1)) --wrap=/bin/true -o /dev/null -J arr >/dev/null
  t1=$(now)
  wait_empty
  t2=$(now)
  echo "array:      $(rate "$N" "$t0" "$t2")  (sbatch took $(awk -v a=$t0 -v b=$t1 'BEGIN{printf "%.2f", b-a}') s)"
fi

if [ "$MODE" = individual ] || [ "$MODE" = all ]; then
  t0=$(now)
  for ((i=0; i<N; i++)); do
    sbatch --wrap=/bin/true -o /dev/null -J ind >/dev/null
  done
  t1=$(now)
  wait_empty
  t2=$(now)
  echo "individual: $(rate "$N" "$t0" "$t2")  (submit loop took $(awk -v a=$t0 -v b=$t1 'BEGIN{printf "%.2f", b-a}') s, $(awk -v n=$N -v a=$t0 -v b=$t1 'BEGIN{printf "%.1f", n/(b-a)}') submits/s)"
fi

if [ "$MODE" = latency ] || [ "$MODE" = all ]; then
  : > "$TMP/lat"
  for ((i=0; i<L; i++)); do
    out="$TMP/start.$i"
    ts=$(now)
    sbatch -o "$out" -J lat --wrap='date +%s.%N' >/dev/null
    while [ ! -s "$out" ]; do sleep 0.01; done
    awk -v s="$ts" '{printf "%.6f\n", $1-s}' "$out" >> "$TMP/lat"
    wait_empty
    sleep 0.5   # let the node go idle again
  done
  sort -g "$TMP/lat" | awk '{v[NR]=$1} END{
    m = (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2;
    printf "latency:    median %.3f s over %d jobs (min %.3f, max %.3f)\n", m, NR, v[1], v[NR]}'
fi
