#!/usr/bin/env bash
# Install what a fresh Debian 12/13 machine lacks, from Debian's archive. Idempotent.
set -euo pipefail

PKGS=(slurmctld slurmd slurm-client munge slurmdbd mariadb-server chromium chromium-driver nodejs npm jq openssh-server)

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
# node/npm may come from elsewhere than Debian's archive (nodesource, nvm): accept those.
if command -v node >/dev/null && command -v npm >/dev/null; then
  filtered=()
  for p in "${missing[@]}"; do [[ $p == nodejs || $p == npm ]] || filtered+=("$p"); done
  missing=("${filtered[@]}")
fi

if ((${#missing[@]} == 0)); then
  echo "setup: system packages present"
  exit 0
fi

if [[ $(id -u) -ne 0 ]]; then
  if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
    SUDO=sudo
  else
    echo "setup: missing Debian packages: ${missing[*]}" >&2
    echo "setup: install them as root with:" >&2
    echo "    sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
else
  SUDO=
fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# Package scripts must not start the system's own munge/slurm services: the sandbox runs its own.
if [[ -z $SUDO && ! -e /usr/sbin/policy-rc.d ]]; then
  printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
  trap 'rm -f /usr/sbin/policy-rc.d' EXIT
fi
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: system packages installed"
