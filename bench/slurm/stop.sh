#!/bin/bash
# Stop slurmd, slurmctld and munged by their pid files.
for f in /run/slurmd.pid /run/slurmctld.pid /run/munge/munged.pid; do
  [ -s "$f" ] && kill "$(cat "$f")" 2>/dev/null
done
sleep 2
for f in /run/slurmd.pid /run/slurmctld.pid /run/munge/munged.pid; do
  [ -s "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null && echo "still running: $f" >&2
done
true
