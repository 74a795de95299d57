#!/usr/bin/env bash
# Installs the PostgreSQL server binaries that the e2e deployment runs privately (a throw-away cluster on a
# loopback port per test session: harness/postgres.py). Starts nothing itself.
# The Python drivers (psycopg2-binary, asyncpg) come from the project's dev dependencies.
set -euo pipefail

if command -v initdb >/dev/null 2>&1 || compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null; then
    exit 0
fi
exec "$(dirname "$0")/apt-install.sh" postgresql
