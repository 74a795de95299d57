#!/usr/bin/env bash
# Installs Debian's Chromium and ChromeDriver for the browser tests of the e2e suite (/usr/bin/chromium,
# /usr/bin/chromedriver). Nothing downloads a browser build of its own.
set -euo pipefail

if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then
    exit 0
fi
SUDO=""
if [ "$(id -u)" != "0" ]; then
    SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends chromium chromium-driver
