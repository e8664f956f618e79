#!/bin/bash
# Start munge, slurmctld and slurmd in the background (no systemd), as root.
# Needs /etc/slurm/slurm.conf (see slurm.conf next to this script).
set -e
mkdir -p /run/munge /var/spool/slurmctld /var/spool/slurmd /var/log/slurm
chown munge:munge /run/munge
chown slurm:slurm /var/spool/slurmctld /var/log/slurm
su -s /bin/sh munge -c /usr/sbin/munged
slurmctld -c          # -c: clean start, no saved job state
slurmd
for i in $(seq 60); do
  sinfo -h -o %t 2>/dev/null | grep -q idle && { sinfo; exit 0; }
  sleep 0.5
done
echo "slurm did not come up" >&2; sinfo >&2; exit 1
