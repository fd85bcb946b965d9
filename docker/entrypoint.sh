#!/bin/sh
# The image's entrypoint: runs `msvmav "$@"`.
#
# For `serve` with neither MSVMAV_ADMIN_KEY nor MSVMAV_AUTH=off, on a database that holds no API
# key yet (a first start), it first migrates the database and creates an admin key, printed once
# to the log ("msvmav: admin key: msv_..."; `docker compose logs api | grep 'admin key'`): the
# API then starts keyed, with a key nobody else knows. Keys are kept as hashes in the database,
# so later starts create none. An empty MSVMAV_ADMIN_KEY (compose's default) counts as unset.
set -eu
if [ -z "${MSVMAV_ADMIN_KEY:-}" ]; then
  unset MSVMAV_ADMIN_KEY
  if [ "${1:-}" = serve ] && [ "${MSVMAV_AUTH:-auto}" != off ]; then
    # Migrates, then creates and prints an admin key if the database holds none: one process.
    msvmav keys first-start
  fi
fi
exec msvmav "$@"
