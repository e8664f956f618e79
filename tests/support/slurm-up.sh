#!/bin/bash
# A one-node Slurm cluster on this machine for the router's Slurm test:
# installs a slurm.conf naming this host (from bench/slurm/slurm.conf), then
# starts munge, slurmctld and slurmd (bench/slurm/start.sh). Needs root and
# Debian's slurm-wlm (apt-get install slurm-wlm). Exits 0 when `sinfo` shows
# the node up.
set -e
here=$(cd "$(dirname "$0")/../.." && pwd)
if sinfo -h -o %t 2>/dev/null | grep -qE 'idle|mix|alloc'; then exit 0; fi
[ "$(id -u)" = 0 ] || { echo "slurm-up: needs root" >&2; exit 2; }
command -v slurmctld >/dev/null || { echo "slurm-up: slurm-wlm is not installed" >&2; exit 2; }
host=$(hostname -s)
mkdir -p /etc/slurm
sed -e "s/^SlurmctldHost=.*/SlurmctldHost=$host(127.0.0.1)/" \
    -e "s/^NodeName=vm /NodeName=$host /" -e "s/Nodes=vm /Nodes=$host /" \
    "$here/bench/slurm/slurm.conf" > /etc/slurm/slurm.conf
bash "$here/bench/slurm/start.sh" >/dev/null
