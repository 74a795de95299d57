#!/usr/bin/env bash
# Installs Debian's Chromium and ChromeDriver for the browser tests of the e2e suite (/usr/bin/chromium,
# /usr/bin/chromedriver). Nothing downloads a browser build of its own.
set -euo pipefail

if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then
    exit 0
fi
exec "$(dirname "$0")/apt-install.sh" chromium chromium-driver
