#!/usr/bin/env bash
# Build (or reuse) a Debian root holding another Slurm, for the version matrix (`make test-slurm`).
#
#   scripts/slurm-root.sh VERSION          build or reuse the root of VERSION (24.11, 26.05); print its path
#   scripts/slurm-root.sh --path VERSION   print where the root of VERSION lives, build nothing
#   scripts/slurm-root.sh --remove VERSION remove that root (refused while anything is mounted inside it)
#
# A root is `debootstrap --variant=minbase` of the Debian suite that ships VERSION, plus Slurm, munge and Python,
# node and chromium for the hub's tests, plus a venv with `pip install -e '<repo>[test]'` in
# <root>/opt/slurmlab-venv. Roots live outside the repo, in ${SLURMLAB_ROOTS:-$HOME/.cache/slurmlab/roots}/VERSION,
# and are reused: each stage leaves a stamp, written last, so an interrupted build is detected and resumed (or
# redone) on the next run; a stage whose input changed is redone on a cached root (the package list, or
# pyproject.toml), the stages before it are kept. Needs root (debootstrap, chroot).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
ROOTS=${SLURMLAB_ROOTS:-$HOME/.cache/slurmlab/roots}
MIRROR=${SLURMLAB_DEBIAN_MIRROR:-http://deb.debian.org/debian}
VENV_IN_ROOT=/opt/slurmlab-venv

# The packages of the root: Slurm and munge for the sandbox, Python for slurmlab, and the tools its tests call
# (ps/pgrep, runuser/useradd, hostname); slurmdbd and MariaDB for the sandbox's accounting. For the hub's tests:
# node, which runs the configurable-http-proxy that `make setup` installed in the repo's hub/node_modules (seen
# through the repo mount: pure JavaScript, needs node >= 20; trixie has 20, sid 24), so no npm here; and
# chromium, which the browser test drives through Playwright (no chromium-driver needed). openssh-server (with its
# client) for the SSH runner's tests: a real sshd on 127.0.0.1 in front of the sandbox, for a second user.
PKGS=(slurmctld slurmd slurm-client munge slurmdbd mariadb-server python3 python3-venv python3-pip ca-certificates procps psmisc
      util-linux passwd hostname iproute2 nodejs chromium openssh-server)

say() { echo "slurm-root: $*"; }
die() {
  echo "slurm-root: error: $1" >&2
  [[ -n ${2:-} ]] && echo "slurm-root: next step: $2" >&2
  exit 1
}

suite_of() {
  case $1 in
    24.11) echo trixie ;;
    26.05) echo sid ;;
    *) die "no Debian suite is known for Slurm '$1'" "use one of: 24.11 (Debian 13 trixie), 26.05 (Debian sid)" ;;
  esac
}

mounted_under() {
  # Mount points at or below $1 (the fields of /proc/mounts escape spaces as \040).
  awk -v r="$1" '$2 == r || index($2, r "/") == 1 {print $2}' /proc/mounts
}

remove_root() {
  local root=$1 left
  left=$(mounted_under "$root")
  if [[ -n $left ]]; then
    # rm -rf through a bind mount of /dev or the repo would delete the host's files
    die "refusing to remove $root: still mounted inside it:"$'\n'"$left" \
        "unmount them (umount -R <path>), or wait for the scripts/in-slurm-root.sh that uses the root to end"
  fi
  rm -rf --one-file-system "$root"
}

mode=build
case ${1:-} in
  --path) mode=path; shift ;;
  --remove) mode=remove; shift ;;
  -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
esac
VERSION=${1:-}
[[ -n $VERSION ]] || die "which Slurm? no version given" "make test-slurm SLURM=24.11 (or 26.05)"
SUITE=$(suite_of "$VERSION")
ROOT=$ROOTS/$VERSION

if [[ $mode == path ]]; then echo "$ROOT"; exit 0; fi
[[ $(id -u) -eq 0 ]] || die "building a root needs root (debootstrap, chroot, mount)" "sudo $0 $VERSION"

mkdir -p "$ROOTS"
# One user of a root at a time: a build must not race another build or a running chroot.
if [[ ${SLURMLAB_ROOT_LOCKED:-} != "$ROOT" ]]; then
  exec 9>"$ROOT.lock"
  flock -w 600 9 || die "$ROOT is in use by another process (lock $ROOT.lock held for 10 minutes)" \
      "wait for the other make test-slurm / scripts/in-slurm-root.sh to end"
  export SLURMLAB_ROOT_LOCKED=$ROOT
fi

if [[ $mode == remove ]]; then
  [[ -e $ROOT ]] && remove_root "$ROOT"
  say "removed $ROOT"
  exit 0
fi

IN_ROOT=("$HERE/in-slurm-root.sh" --building "$VERSION")
IN_ROOT_APT=("$HERE/in-slurm-root.sh" --apt "$VERSION")
STAMP_BASE=$ROOT/.slurmlab-stage-debootstrap
STAMP_PKGS=$ROOT/.slurmlab-stage-packages
STAMP_VENV=$ROOT/.slurmlab-stage-venv
total_start=$SECONDS

# -- stage 1: debootstrap ------------------------------------------------------------------------------------
if [[ -d $ROOT && ! -f $STAMP_BASE ]]; then
  say "$ROOT is half-built (debootstrap did not finish): removing it and starting again"
  remove_root "$ROOT"
fi
if [[ ! -f $STAMP_BASE ]]; then
  if ! command -v debootstrap >/dev/null; then
    say "installing debootstrap (apt-get)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null 2>&1 ||
      { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
          debootstrap >/dev/null; } ||
      die "could not install debootstrap" "apt-get update && apt-get install debootstrap"
  fi
  say "debootstrap $SUITE from $MIRROR into $ROOT (minutes; log: $ROOT.debootstrap.log)"
  start=$SECONDS
  if ! debootstrap --variant=minbase "$SUITE" "$ROOT" "$MIRROR" >"$ROOT.debootstrap.log" 2>&1; then
    tail -n 15 "$ROOT.debootstrap.log" >&2
    hint="check that $MIRROR is reachable; if the error is about a signature, the host's keyring is older than"
    hint+=" the suite: apt-get install debian-archive-keyring (from a newer Debian), then run this again"
    die "debootstrap of $SUITE failed (full log: $ROOT.debootstrap.log)" "$hint"
  fi
  date -u +%FT%TZ >"$STAMP_BASE"
  say "debootstrap done in $((SECONDS - start))s"
fi

# -- stage 2: Debian packages ----------------------------------------------------------------------------------
if [[ ! -f $STAMP_PKGS || $(cat "$STAMP_PKGS") != "${PKGS[*]}" ]]; then
  say "installing ${PKGS[*]} into the root (log: $ROOT.apt.log)"
  start=$SECONDS
  # Package scripts must not start munge/slurm services in the root: the sandbox starts its own.
  printf '#!/bin/sh\nexit 101\n' >"$ROOT/usr/sbin/policy-rc.d"
  chmod +x "$ROOT/usr/sbin/policy-rc.d"
  # A mirror that serves a frozen sid (or a clock ahead of it) has an expired Release file, which apt refuses:
  # accept it in this throw-away test root only, and say so.
  expired=/etc/apt/apt.conf.d/99slurmlab-accept-expired-release
  apt_steps="apt-get update -qq 2>&1 | tee /tmp/apt-update.log || true
    if grep -q 'is expired' /tmp/apt-update.log; then
      echo 'slurm-root: note: the $SUITE Release file of $MIRROR has expired; this root accepts it' >&2
      echo 'Acquire::Check-Valid-Until \"false\";' > $expired
      apt-get update -qq
    fi
    apt-get install -y -qq --no-install-recommends ${PKGS[*]} && apt-get clean"
  if ! "${IN_ROOT_APT[@]}" env DEBIAN_FRONTEND=noninteractive bash -c "set -eo pipefail; $apt_steps" \
      >"$ROOT.apt.log" 2>&1; then
    tail -n 15 "$ROOT.apt.log" >&2
    die "installing Slurm into the $SUITE root failed (the log's end is above; full log: $ROOT.apt.log)" \
        "fix what the log names (is $MIRROR reachable?), then run this again (it resumes); to start over: $0 --remove $VERSION"
  fi
  grep -h '^slurm-root: note' "$ROOT.apt.log" || true
  echo "${PKGS[*]}" >"$STAMP_PKGS"
  say "packages done in $((SECONDS - start))s"
fi

got=$(chroot "$ROOT" dpkg-query -W -f='${Version}' slurmctld 2>/dev/null || true)
if [[ $got != "$VERSION".* ]]; then
  die "the $SUITE root holds Slurm '${got:-none}', not $VERSION: Debian's $SUITE has moved on" \
      "map $VERSION to a suite that still ships it in suite_of() of $0, then: $0 --remove $VERSION"
fi

lab_ext=$ROOT$VENV_IN_ROOT/share/jupyter/labextensions/slurmlab-lab

# -- stage 3: the venv with slurmlab (editable, from the repo mounted at the same path) --------------------------
# Redone when pyproject.toml (the dependencies) changes; code changes need nothing, the install is editable.
want_venv="$(sha256sum "$REPO/pyproject.toml" | cut -d' ' -f1) $REPO"
if [[ ! -f $STAMP_VENV || $(cat "$STAMP_VENV") != "$want_venv" ]]; then
  say "installing slurmlab[test] into $VENV_IN_ROOT in the root (log: $ROOT.pip.log)"
  start=$SECONDS
  # pip replaces the last install: through the link below (made last time) it would delete the repo's built
  # extension: unlink it first
  [[ -L $lab_ext ]] && rm -f "$lab_ext"
  # The editable build would build the JupyterLab extension (node and jlpm; the root has no npm or yarn): skip
  # it; the host's built slurmlab/labextension is seen through the repo mount (linked below).
  if ! "${IN_ROOT[@]}" env SKIP_JUPYTER_BUILDER=1 bash -c \
      "set -e; [[ -x $VENV_IN_ROOT/bin/python ]] || python3 -m venv $VENV_IN_ROOT
       $VENV_IN_ROOT/bin/python -m pip install -q --upgrade pip
       $VENV_IN_ROOT/bin/python -m pip install -q -e '$REPO[test]'" >"$ROOT.pip.log" 2>&1; then
    tail -n 20 "$ROOT.pip.log" >&2
    die "pip install -e '$REPO[test]' failed in the $SUITE root (full log: $ROOT.pip.log)" \
        "fix what the log names (a dependency without a wheel for the root's Python?), then run this again"
  fi
  echo "$want_venv" >"$STAMP_VENV"
  say "venv done in $((SECONDS - start))s"
fi

# The install copied the JupyterLab extension as it was built then (the wheel's shared data): a root whose venv
# stage is older than the last `make labextension` served an old sidebar to the hub's browser test. Point it at
# the live build, as extensions/slurmlab-lab/build.sh does on this machine; the repo is mounted at the same path.
lab_build=$REPO/slurmlab/labextension
if [[ -d $lab_build && $(readlink "$lab_ext" 2>/dev/null) != "$lab_build" ]]; then
  mkdir -p "$(dirname "$lab_ext")"
  [[ -d $lab_ext && ! -L $lab_ext ]] && rm -rf --one-file-system "$lab_ext"
  ln -sfn "$lab_build" "$lab_ext"
fi

py=$(chroot "$ROOT" "$VENV_IN_ROOT/bin/python" -c 'import platform; print(platform.python_version())')
say "root of Slurm $got (Debian $SUITE, Python $py) ready at $ROOT ($((SECONDS - total_start))s)"
