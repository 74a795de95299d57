#!/usr/bin/env bash
# Installs Debian packages (as root, or through sudo): .ci/apt-install.sh PACKAGE...
set -euo pipefail
SUDO=""
if [ "$(id -u)" != "0" ]; then
    SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "$@"
