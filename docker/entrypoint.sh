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
    msvmav migrate
    if [ -z "$(msvmav keys list | tail -n +2)" ]; then
      key=$(msvmav keys create --scope admin --name first-start)
      echo "msvmav: no MSVMAV_ADMIN_KEY and no API key in the database: created one (shown only here)"
      echo "msvmav: admin key: $key"
    fi
  fi
fi
exec msvmav "$@"
