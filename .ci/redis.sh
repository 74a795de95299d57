#!/usr/bin/env bash
# Installs the Redis server binary that the Celery deployment runs privately as its broker (a throw-away
# server on a loopback port per deployment: harness/redis.py). Starts nothing itself.
# The Python client (redis) is a dev dependency, beside apache-airflow-providers-celery.
set -euo pipefail

if command -v redis-server >/dev/null 2>&1; then
    exit 0
fi
exec "$(dirname "$0")/apt-install.sh" redis-server
