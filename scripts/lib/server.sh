# Sourced by the scripts that run a real spool server and the SDKs against
# it. Functions only; the caller is in the repository root.

# server_addr LOG PID waits (up to 10 s) for the server PID, which writes
# its log to LOG, to say where it listens, and sets addr to HOST:PORT. It
# exits the script, showing the log, when the server dies or never says.
server_addr() {
  local log=$1 server=$2
  addr=
  for _ in $(seq 200); do
    addr=$(sed -n 's|^spool listening on http://\([^ ]*\).*|\1|p' "$log")
    [ -n "$addr" ] && return 0
    kill -0 "$server" 2>/dev/null || { echo "the server stopped:"; cat "$log"; exit 1; }
    sleep 0.05
  done
  echo "the server did not start:"
  cat "$log"
  exit 1
}

# python_sdk_venv sets venv to the virtualenv of the Python SDK (the one
# scripts/test-python uses), making it when it lacks the SDK.
python_sdk_venv() {
  venv=${SPOOL_PYTHON_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/spool/python-sdk}
  if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import spool' 2>/dev/null; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check -e "clients/python[test]"
  fi
}

# typescript_sdk_built builds the TypeScript SDK into clients/typescript/dist
# when it is not there.
typescript_sdk_built() {
  if [ ! -f clients/typescript/dist/index.js ]; then
    (cd clients/typescript && npm ci --no-audit --no-fund && npm run build)
  fi
}
