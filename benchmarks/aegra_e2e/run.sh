#!/bin/bash
# Aegra's e2e suite (libs/aegra-api/tests/e2e, as its CI runs it: not prod_only, without
# manual_auth_tests and multi_instance) against Planwatch's /langgraph/, serving Aegra's
# example graphs (its aegra.json) with a loopback stub model (stub_model.py).
#
#   benchmarks/aegra_e2e/run.sh AEGRA_CHECKOUT [pytest args]
#
# AEGRA_CHECKOUT: a checkout of github.com/ibbybuilds/aegra (measured at 7eaca0b). Uses
# PG_URL (a database it drops and creates), REDIS_TEST_URL, ports AEGRA_E2E_PORT (18470)
# and +1; the suite runs in its own venv (var/aegra-e2e/venv: pytest, pytest-asyncio,
# langgraph-sdk, httpx). Prints pytest's summary line; the log is var/aegra-e2e/.
# Needs Planwatch's dev install (make install-dev: FastAPI, for aegra.json's custom routes).
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
HERE=$ROOT/benchmarks/aegra_e2e
AEGRA=$(cd "$1" && pwd); shift
VAR=$ROOT/var/aegra-e2e
SP=${AEGRA_E2E_PORT:-18470}; MP=$((SP + 1))
mkdir -p "$VAR/shim/aegra_api"
[ -x "$VAR/venv/bin/pytest" ] || { python3 -m venv "$VAR/venv" && "$VAR/venv/bin/pip" install -q \
  "pytest>=9" "pytest-asyncio>=1.3" langgraph-sdk==0.4.14 httpx; }
touch "$VAR/shim/aegra_api/__init__.py"
cp "$HERE/settings_shim.py" "$VAR/shim/aegra_api/settings.py"
# the suite's own root conftest imports Aegra's server: replaced (restored at the end)
TESTS=$AEGRA/libs/aegra-api/tests
cp "$TESTS/conftest.py" "$VAR/conftest.orig.py"
cp "$HERE/conftest_root.py" "$TESTS/conftest.py"
DB=${PG_URL:?PG_URL: a PostgreSQL database URL}
psql "${DB%/*}/postgres" -qc "DROP DATABASE IF EXISTS ${DB##*/} WITH (FORCE)" \
  -c "CREATE DATABASE ${DB##*/}"
export DATABASE_URL=$DB REDIS_URL=${REDIS_TEST_URL:?REDIS_TEST_URL}
export PLANWATCH_LANGGRAPH_CONFIG=$AEGRA/aegra.json
# aegra.json's custom routes (http.app: examples/custom_routes_example.py, a FastAPI app)
# import Aegra's auth helpers; server_shim/ is a shim of them (aegra_api.core.auth_deps,
# aegra_api.models.auth) on the server's path. FastAPI is Planwatch's dev dependency.
export PYTHONPATH=$HERE/server_shim${PYTHONPATH:+:$PYTHONPATH}
export OPENAI_API_KEY=stub OPENAI_BASE_URL=http://127.0.0.1:$MP/v1
export LANGSMITH_TRACING=false LANGCHAIN_TRACING_V2=false
cd "$ROOT"
PY=$ROOT/.venv/bin/python
$PY manage.py migrate -v0
PLANWATCH_ADMIN_PASSWORD=aegra-e2e $PY manage.py ensure_operator --username aegra-e2e >/dev/null
KEY=$($PY manage.py create_token aegra-e2e 2>/dev/null)
"$VAR/venv/bin/python" "$HERE/stub_model.py" $MP & STUB=$!
$PY manage.py serve --host 127.0.0.1 --port $SP > "$VAR/server.log" 2>&1 & SRV=$!
for _ in $(seq 120); do
  curl -sf "http://127.0.0.1:$SP/langgraph/info" -H "x-api-key: $KEY" >/dev/null && break; sleep 1
done
cd "$AEGRA/libs/aegra-api"
SERVER_URL=http://127.0.0.1:$SP/langgraph LANGGRAPH_API_KEY=$KEY PYTHONPATH=$VAR/shim \
  "$VAR/venv/bin/python" -m pytest tests/e2e -q -p no:cacheprovider --tb=line \
  -m "not prod_only" --ignore=tests/e2e/manual_auth_tests --ignore=tests/e2e/multi_instance \
  "$@" > "$VAR/pytest.log" 2>&1
kill $SRV $STUB; wait $SRV 2>/dev/null
cp "$VAR/conftest.orig.py" "$TESTS/conftest.py"
grep -E "^FAILED" "$VAR/pytest.log"; tail -1 "$VAR/pytest.log"
