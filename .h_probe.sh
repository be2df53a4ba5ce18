set -e
d=$(mktemp -d)
slurmlab sandbox up --dir $d/sb >/dev/null
export SLURM_CONF=$d/sb/slurm.conf
python .h_probe.py || true
slurmlab sandbox down --dir $d/sb >/dev/null || true
