#!/usr/bin/env bash
# Run a command inside the Debian root of another Slurm (built by scripts/slurm-root.sh), e.g.
#
#   scripts/in-slurm-root.sh 24.11 python -m pytest -m sandbox      (in the repo, with the root's venv first)
#   scripts/in-slurm-root.sh 26.05                                  (a shell)
#
# Binds into the root: /proc, /sys, /sys/fs/cgroup, /dev, /dev/pts, /dev/shm, the repo at the same path (and its
# ../shared fixtures, read-only), the machine's pip configuration and the wheel folders it names, the CA
# certificates and /etc/resolv.conf; the machine's host name resolves to 127.0.0.1 inside. Everything is
# unmounted on exit, failure and Ctrl-C included. A process the command leaves running inside the root is a
# failure (it is listed, then killed, and the exit status is non-zero): a clean exit must leave nothing behind.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
ROOTS=${SLURMLAB_ROOTS:-$HOME/.cache/slurmlab/roots}
VENV_IN_ROOT=/opt/slurmlab-venv

die() {
  echo "in-slurm-root: error: $1" >&2
  [[ -n ${2:-} ]] && echo "in-slurm-root: next step: $2" >&2
  exit 1
}

# Used by slurm-root.sh on a root not yet stamped; --apt also leaves the root's /etc/ssl/certs alone, which
# dpkg (ca-certificates) writes while packages are installed.
building=0 apt=0
case ${1:-} in
  --building) building=1; shift ;;
  --apt) building=1 apt=1; shift ;;
esac
VERSION=${1:-}
[[ -n $VERSION ]] || die "which Slurm? no version given" "$0 24.11 [command ...]"
shift
[[ ${1:-} == -- ]] && shift
ROOT=$ROOTS/$VERSION

[[ $(id -u) -eq 0 ]] || die "entering a root needs root (chroot, mount)" "sudo $0 $VERSION $*"
if [[ $building -eq 0 && ! -f $ROOT/.slurmlab-stage-venv ]]; then
  die "no finished root of Slurm $VERSION at $ROOT" "bash $HERE/slurm-root.sh $VERSION (or: make slurm-root SLURM=$VERSION)"
fi
[[ -d $ROOT ]] || die "no root at $ROOT" "bash $HERE/slurm-root.sh $VERSION"

if [[ ${SLURMLAB_ROOT_LOCKED:-} != "$ROOT" ]]; then
  exec 9>"$ROOT.lock"
  flock -w 600 9 || die "$ROOT is in use by another process (lock $ROOT.lock held for 10 minutes)" \
      "wait for the other make test-slurm / scripts/in-slurm-root.sh to end"
  export SLURMLAB_ROOT_LOCKED=$ROOT
fi

mounted_under() {
  awk -v r="$1" '$2 == r || index($2, r "/") == 1 {print $2}' /proc/mounts
}

procs_in_root() {
  # Processes whose root directory is this root: what the command started and left behind.
  local real p
  real=$(readlink -f "$ROOT")
  for p in /proc/[0-9]*; do
    [[ $(readlink "$p/root" 2>/dev/null) == "$real" ]] || continue
    # a zombie has ended (only its parent's wait is missing) and cannot be stopped: not a leak
    [[ $(awk '{print $3}' "$p/stat" 2>/dev/null) == Z ]] && continue
    echo "${p#/proc/}"
  done
  return 0
}

MOUNTS=()   # mount points in the order they were made; unmounted in reverse
unmount_all() {
  local i m left
  for ((i = ${#MOUNTS[@]} - 1; i >= 0; i--)); do
    m=${MOUNTS[i]}
    umount -R "$m" 2>/dev/null || umount -R -l "$m" 2>/dev/null || true
  done
  MOUNTS=()
  left=$(mounted_under "$ROOT")
  if [[ -n $left ]]; then
    echo "in-slurm-root: error: still mounted under $ROOT (do NOT rm -rf the root until this is empty):" >&2
    echo "$left" >&2
    return 1
  fi
}

stop_procs_in_root() {
  # stop_procs_in_root WHAT: list the processes inside the root (WHAT says whose they are), then stop them,
  # escalating to SIGKILL (Slurm's step daemons ignore SIGTERM). Returns 1 when there were any.
  local pids pid sig
  # what was stopped at the command's end may still be exiting: give it 20 s first (a Slurm client a daemon
  # thread started, e.g. `scontrol ping` with its own timeout up to 15 s, outlives pytest's exit by that much:
  # the 26.05 root once reported one)
  for _ in $(seq 40); do
    pids=$(procs_in_root)
    [[ -z $pids ]] && return 0
    sleep 0.5
  done
  echo "in-slurm-root: error: $1 left processes running inside the Slurm $VERSION root:" >&2
  for pid in $pids; do
    echo "  pid $pid: $(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)(cwd $(readlink "/proc/$pid/cwd"))" >&2
  done
  for sig in TERM KILL; do
    for pid in $(procs_in_root); do kill -s "$sig" "$pid" 2>/dev/null || true; done
    for _ in 1 2 3 4 5 6 7 8 9 10; do [[ -z $(procs_in_root) ]] && break; sleep 0.5; done
    [[ -z $(procs_in_root) ]] && break
  done
  return 1
}

LEFTOVER=0
cleanup() {
  stop_procs_in_root "the command" || LEFTOVER=1
  unmount_all || LEFTOVER=1
}

on_exit() {
  local rc=$?
  trap - EXIT INT TERM HUP
  cleanup
  if [[ $rc -eq 0 && $LEFTOVER -ne 0 ]]; then rc=3; fi
  exit "$rc"
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

bind() {
  # bind SRC DST [ro|rec]: DST is created (a file for a file) inside the root
  local src=$1 dst=$ROOT$2 how=${3:-}
  if [[ -d $src ]]; then mkdir -p "$dst"; else mkdir -p "$(dirname "$dst")"; [[ -e $dst ]] || : >"$dst"; fi
  if [[ $how == rec ]]; then
    mount --rbind "$src" "$dst"
    MOUNTS+=("$dst")
    # rslave: an unmount inside the root must never propagate back to the host
    mount --make-rslave "$dst"
  else
    mount --bind "$src" "$dst"
    MOUNTS+=("$dst")
    [[ $how == ro ]] && mount -o remount,bind,ro "$dst"
  fi
  return 0
}

# A run killed with SIGKILL leaves its processes and mounts: we hold the lock, so they are stale.
stop_procs_in_root "an earlier run (killed before it could clean up)" || true
stale=$(mounted_under "$ROOT")
if [[ -n $stale ]]; then
  echo "in-slurm-root: unmounting what an earlier run left mounted under $ROOT" >&2
  while read -r m; do MOUNTS+=("$m"); done <<<"$stale"
  unmount_all
fi

mkdir -p "$ROOT/proc"
mount -t proc proc "$ROOT/proc"
MOUNTS+=("$ROOT/proc")
bind /sys /sys
# Opt-outs that make the root differ from a usual machine, to test the sandbox's start there:
#   SLURMLAB_ROOT_CGROUP=none  no cgroup filesystem at /sys/fs/cgroup (an empty folder, as in some containers)
#   SLURMLAB_ROOT_CGROUP=v2    a bare cgroup2 mount at /sys/fs/cgroup (unified mode, whatever the host has)
#   SLURMLAB_ROOT_NO_HOSTS=1   the host name is left out of /etc/hosts (it may not resolve at all)
case ${SLURMLAB_ROOT_CGROUP:-host} in
  none) ;;
  v2) mkdir -p "$ROOT/sys/fs/cgroup"; mount -t cgroup2 cgroup2 "$ROOT/sys/fs/cgroup"; MOUNTS+=("$ROOT/sys/fs/cgroup") ;;
  host) [[ -d /sys/fs/cgroup ]] && mountpoint -q /sys/fs/cgroup && bind /sys/fs/cgroup /sys/fs/cgroup rec ;;
  *) die "SLURMLAB_ROOT_CGROUP must be none, v2 or host, not ${SLURMLAB_ROOT_CGROUP}" ;;
esac
bind /dev /dev
bind /dev/pts /dev/pts
mountpoint -q /dev/shm && bind /dev/shm /dev/shm
bind "$REPO" "$REPO"
[[ -d $REPO/../shared ]] && bind "$(cd "$REPO/../shared" && pwd)" "$(cd "$REPO/../shared" && pwd)" ro
shared_files=(/etc/pip.conf /etc/xdg/pip /opt/wheels /opt/pypi /opt/pypi-more /etc/resolv.conf)
[[ $apt -eq 0 ]] && shared_files+=(/etc/ssl/certs)
for f in "${shared_files[@]}"; do
  if [[ -e $f ]]; then bind "$(readlink -f "$f")" "$f" ro; fi
done

# The sandbox names this host in slurm.conf; in the root it must resolve (to 127.0.0.1, as the nodes do).
host=$(hostname)
if [[ -n ${SLURMLAB_ROOT_NO_HOSTS:-} ]]; then
  printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n' >"$ROOT/etc/hosts"
else
  printf '127.0.0.1\tlocalhost %s %s\n::1\tlocalhost ip6-localhost ip6-loopback\n' "$host" "${host%%.*}" \
    >"$ROOT/etc/hosts"
fi
echo "$host" >"$ROOT/etc/hostname"

cmd=("$@")
[[ ${#cmd[@]} -eq 0 ]] && cmd=(bash -i)
# A clean environment: the host's PATH and venv must not leak in; pip's settings and proxies do.
envs=(HOME=/root LANG=C.UTF-8 TERM="${TERM:-dumb}" PYTHONPYCACHEPREFIX=/var/cache/slurmlab-pycache
      PATH="$VENV_IN_ROOT/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
while IFS='=' read -r k v; do
  case $k in
    PIP_*|http_proxy|https_proxy|no_proxy|HTTP_PROXY|HTTPS_PROXY|NO_PROXY|SKIP_JUPYTER_BUILDER|DEBIAN_FRONTEND|\
    SLURMLAB_*|PYTEST_*|CI) envs+=("$k=$v") ;;
  esac
done < <(env)
in_root=(chroot "$ROOT" /usr/bin/env -i "${envs[@]}" bash -c 'cd "$1" && shift && exec "$@"' _ "$REPO" "${cmd[@]}")
set +e
# 9>&-: the command must not inherit the lock, or a daemon it leaks would hold the root locked.
if [[ $# -eq 0 ]]; then
  "${in_root[@]}" 9>&-   # an interactive shell keeps the terminal
else
  # In the background and waited for, so that a SIGTERM to this script is handled at once (passed on, then
  # the cleanup), not after the command ends by itself. A background command of a shell without job control
  # starts with SIGINT ignored: env --default-signal gives it back, so the INT passed on below (and a test's
  # simulated Ctrl-C) reach Python as KeyboardInterrupt.
  env --default-signal=INT,QUIT "${in_root[@]}" 9>&- &
  child=$!
  trap 'kill -TERM $child 2>/dev/null; exit 143' TERM
  trap 'kill -INT $child 2>/dev/null; exit 130' INT
  wait "$child"
fi
rc=$?
set -e
exit "$rc"
