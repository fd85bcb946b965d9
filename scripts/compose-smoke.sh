#!/usr/bin/env bash
# Smoke test of the Docker Compose stack (docker-compose.yml): build and start it, then
# upload -> train -> poll -> predict with curl, check that a worker container ran the job, and
# always tear the stack down again (containers, network and database volume).
#
#   scripts/compose-smoke.sh
#
# Data: examples/wdbc.arff, or with SMOKE_DATASET=generated a small two-class CSV made here.
# SMOKE_DASK=1 also starts the `dask` profile (a scheduler and two Dask workers, with the msvmav
# workers' MSVMAV_DASK_SCHEDULER pointing at it) and runs a cross-validated search on it.
# It runs as its own compose project (COMPOSE_PROJECT_NAME, default msvmav-smoke), so its
# `down -v` never touches the database volume of a `docker compose up` in this directory, and
# publishes the API on API_PORT (default: a free port). SMOKE_TIMEOUT: seconds to wait for
# the job (default 180). MSVMAV_ADMIN_KEY: the API's admin key (default: a random one made here);
# the script uses it only to create a `write` key, which it then sends with every call.
# Needs docker (with compose v2), curl and python3.
set -euo pipefail
cd "$(dirname "$0")/.."

export COMPOSE_PROJECT_NAME=${COMPOSE_PROJECT_NAME:-msvmav-smoke}
if [ -z "${API_PORT:-}" ]; then
  API_PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
fi
export API_PORT
API=http://127.0.0.1:$API_PORT
TIMEOUT=${SMOKE_TIMEOUT:-180}
WORK=$(mktemp -d)
if [ -z "${MSVMAV_ADMIN_KEY:-}" ]; then
  MSVMAV_ADMIN_KEY=$(python3 -c 'import secrets; print(secrets.token_urlsafe(32))')
fi
export MSVMAV_ADMIN_KEY
# Arguments curl gets in every call (the write key's header, once it exists).
AUTH=()

step() { printf '\n== %s\n' "$*"; }
# docker compose logs, without the terminal escapes compose writes even into a pipe.
logs() { docker compose logs --no-color "$@" 2>&1 | sed 's/\x1b\[[0-9;]*[A-Za-z]//g'; }

cleanup() {
  local rc=$?
  if [ "$rc" -ne 0 ]; then
    printf '\n== FAILED (exit %s); last log lines of the stack:\n' "$rc"
    logs --tail=40 || true
  fi
  step "tear down: docker compose down -v"
  # --profile dask: its services too (down leaves services of profiles not named running)
  docker compose --profile dask down -v --remove-orphans 2>&1 || true
  rm -rf "$WORK"
  exit "$rc"
}
trap cleanup EXIT

# call EXPECTED_STATUS CURL_ARGS... : the body in $BODY; fails unless the HTTP status matches.
call() {
  local expected=$1 code
  shift
  code=$(curl -sS --max-time 60 ${AUTH[@]+"${AUTH[@]}"} -o "$WORK/body" -w '%{http_code}' "$@")
  BODY=$(cat "$WORK/body")
  if [ "$code" != "$expected" ]; then
    echo "HTTP $code (expected $expected) for curl $*" >&2
    echo "$BODY" >&2
    return 1
  fi
}

# pick PATH: a field of the JSON in $BODY (dotted path, list indices as numbers); JSON for
# lists/objects, "null" for null, the plain value otherwise.
pick() {
  python3 - "$1" "$BODY" <<'PY'
import json, sys
v = json.loads(sys.argv[2])
for k in filter(None, sys.argv[1].split(".")):
    v = v[int(k)] if isinstance(v, list) else v[k]
print(json.dumps(v) if isinstance(v, (dict, list)) or v is None else v)
PY
}

# summary FIELDS...: a one-line JSON object of some fields of $BODY.
summary() {
  python3 - "$BODY" "$@" <<'PY'
import json, sys
v = json.loads(sys.argv[1])
print(json.dumps({k: v.get(k) for k in sys.argv[2:]}))
PY
}

UP=(up -d --build --wait)
if [ "${SMOKE_DASK:-}" = 1 ]; then
  export MSVMAV_DASK_SCHEDULER=tcp://dask-scheduler:8786
  UP=(--profile dask up -d --build --wait --scale dask-worker=2)
fi
step "docker compose ${UP[*]} (project $COMPOSE_PROJECT_NAME, API on $API)"
docker compose "${UP[@]}" 2>&1
docker compose ps --format 'table {{.Name}}\t{{.Service}}\t{{.Status}}'
n_workers=$(docker compose ps -q worker | wc -l)
echo "worker containers running: $n_workers"
[ "$n_workers" -ge 2 ] || { echo "expected at least 2 worker containers" >&2; exit 1; }

step "GET /livez, GET /readyz"
call 200 "$API/livez"
echo "$BODY"
call 200 "$API/readyz"
echo "$BODY"

step "API keys: 401 without one; POST /keys (admin key) -> a write key for the calls below"
call 401 "$API/datasets"
echo "$BODY"
# Keys go to curl in header files (-H @file), so that no error message here shows them.
printf 'Authorization: Bearer %s\n' "$MSVMAV_ADMIN_KEY" > "$WORK/admin.header"
call 201 -H "@$WORK/admin.header" -H 'content-type: application/json' \
  -d '{"name": "compose-smoke", "scope": "write"}' "$API/keys"
summary id name scope prefix
printf 'Authorization: Bearer %s\n' "$(pick key)" > "$WORK/write.header"
AUTH=(-H "@$WORK/write.header")
call 200 "$API/datasets"

step "data set"
WDBC=examples/wdbc.arff
if [ "${SMOKE_DATASET:-}" != generated ]; then
  DATA=$WDBC LABEL=Class
else
  DATA=$WORK/blobs.csv LABEL=label
fi
# Prints the predict request's rows: 5 of each class, with their true labels.
python3 - "$DATA" "$WORK/predict.json" <<'PY'
import json, random, sys

path, out = sys.argv[1], sys.argv[2]
if path.endswith(".csv"):  # generate: two Gaussian blobs in 4 dimensions, labels neg/pos
    rng = random.Random(0)
    rows = []
    for i in range(300):
        y = "pos" if i % 2 else "neg"
        c = 1.5 if y == "pos" else -1.5
        rows.append([round(rng.gauss(c, 1.0), 4) for _ in range(4)] + [y])
    with open(path, "w") as f:
        f.write("x1,x2,x3,x4,label\n")
        f.writelines(",".join(map(str, r)) + "\n" for r in rows)
    parse = lambda r: (r[:-1], r[-1])  # noqa: E731
else:  # ARFF: numeric features, class last (wdbc: 1/2)
    with open(path) as f:
        lines = [ln.strip() for ln in f]
    data = lines[[ln.lower() for ln in lines].index("@data") + 1 :]
    rows = [ln.split(",") for ln in data if ln and not ln.startswith("%")]
    parse = lambda r: ([float(x) for x in r[:-1]], int(r[-1]))  # noqa: E731
picked = {}
for r in rows:
    x, y = parse(r)
    if len(picked.setdefault(y, [])) < 5:
        picked[y].append(x)
instances = [x for y in sorted(picked) for x in picked[y]]
labels = [y for y in sorted(picked) for _ in picked[y]]
json.dump({"instances": instances, "labels": labels}, open(out, "w"))
print(f"{path}: {len(rows)} rows, {len(instances[0])} features; predicting {len(instances)} "
      f"rows, labels {labels}")
PY

step "1. upload: POST /datasets (file=@$DATA, label=$LABEL)"
call 201 -F "file=@$DATA" -F "label=$LABEL" "$API/datasets"
summary id name n_rows n_features classes
DATASET_ID=$(pick id)

step "2. train: POST /train (dataset $DATASET_ID, linear kernel, 20 % hold-out)"
call 202 -H 'content-type: application/json' \
  -d "{\"dataset_id\": $DATASET_ID, \"kernel\": \"linear\", \"test_fraction\": 0.2, \"seed\": 0}" \
  "$API/train"
summary id kind status dataset_id
JOB_ID=$(pick id)

# wait_job ID: poll GET /jobs/ID until it has succeeded (fails if it failed or timed out).
wait_job() {
local JOB_ID=$1
deadline=$((SECONDS + TIMEOUT))
last=
while :; do
  call 200 "$API/jobs/$JOB_ID"
  status=$(pick status)
  line=$(summary status progress message worker_id)
  [ "$line" != "$last" ] && echo "$line"
  last=$line
  case $status in
    succeeded) break ;;
    failed | cancelled)
      echo "job $JOB_ID ended $status: $(pick error)" >&2
      exit 1
      ;;
  esac
  if [ "$SECONDS" -ge "$deadline" ]; then
    echo "job $JOB_ID still $status after ${TIMEOUT} s" >&2
    exit 1
  fi
  sleep 1
done
}

step "3. poll: GET /jobs/$JOB_ID until succeeded (timeout ${TIMEOUT} s)"
wait_job "$JOB_ID"
MODEL_ID=$(pick model_id)
WORKER_ID=$(pick worker_id)
echo "model_id=$MODEL_ID worker_id=$WORKER_ID"

step "which container ran job $JOB_ID"
# worker_id is hostname:pid:suffix, and a container's hostname is its short id.
host=${WORKER_ID%%:*}
ran_on=
for cid in $(docker compose ps -q worker); do
  case $cid in "$host"*) ran_on=$cid ;; esac
done
if [ -z "$ran_on" ]; then
  echo "job $JOB_ID ran on $host, which is not a worker container" >&2
  exit 1
fi
echo "worker container $(docker inspect --format '{{.Name}}' "$ran_on" | sed 's#^/##') ($host)"
logs worker | grep -E "job $JOB_ID (\([a-z]+\) started|succeeded)"
if logs api | grep -E "job $JOB_ID (\([a-z]+\) started|succeeded)" >/dev/null; then
  echo "the API container ran job $JOB_ID too" >&2
  exit 1
fi

step "the model: GET /models/$MODEL_ID"
call 200 "$API/models/$MODEL_ID"
summary id algorithm n_train n_test holdout_accuracy train_accuracy n_iter fit_seconds

step "4. predict: POST /predict (model $MODEL_ID, 10 rows with their labels)"
python3 - "$MODEL_ID" "$WORK/predict.json" > "$WORK/predict-request.json" <<'PY'
import json, sys
req = json.load(open(sys.argv[2]))
print(json.dumps({"model_id": int(sys.argv[1]), **req}))
PY
call 200 -H 'content-type: application/json' -d "@$WORK/predict-request.json" "$API/predict"
python3 - "$BODY" <<'PY'
import json, sys
r = json.loads(sys.argv[1])
print(json.dumps({"n": r["n"], "classes": r["classes"], "accuracy": r["accuracy"],
                  "predictions": [p["label"] for p in r["predictions"]]}))
if r["n"] != 10 or len(r["predictions"]) != 10:
    sys.exit(f"expected 10 predictions, got {r['n']}")
if r["accuracy"] is None or r["accuracy"] < 0.8:
    sys.exit(f"accuracy {r['accuracy']} below 0.8 on the rows checked")
PY

if [ "${SMOKE_DASK:-}" = 1 ]; then
  step "5. a search on the Dask cluster: POST /train with search (dataset $DATASET_ID)"
  docker compose --profile dask ps --format 'table {{.Name}}\t{{.Service}}\t{{.Status}}'
  call 202 -H 'content-type: application/json' \
    -d "{\"dataset_id\": $DATASET_ID, \"search\": {\"grid\": {\"alpha\": [1, 16], \"beta\": [0.25, 1]}, \"cv\": 3}, \"seed\": 0}" \
    "$API/train"
  SEARCH_ID=$(pick id)
  wait_job "$SEARCH_ID"
  call 200 "$API/models/$(pick model_id)"
  python3 - "$BODY" <<'PY'
import json, sys
m = json.loads(sys.argv[1])
print(json.dumps({"algorithm": m["algorithm"], "params": {k: m["params"][k] for k in ("alpha", "beta")},
                  "holdout_accuracy": m["holdout_accuracy"]}))
PY
  # The scheduler keeps every task prefix it has seen (they outlive the tasks): the search's
  # cells must have made some. Nothing else submits tasks to this cluster.
  ran=$(docker compose --profile dask exec -T dask-scheduler python -c "
from distributed import Client
with Client('tcp://127.0.0.1:8786', timeout=10) as c:
    print(' '.join(sorted(c.run_on_scheduler(lambda dask_scheduler: list(dask_scheduler.task_prefixes)))))
" 2>/dev/null || true)
  echo "task prefixes the Dask scheduler ran: ${ran:-none}"
  if [ -z "$ran" ]; then
    logs --tail=30 dask-scheduler dask-worker worker
    echo "the search's cells did not run on the Dask cluster" >&2
    exit 1
  fi
fi

step "smoke test passed"
