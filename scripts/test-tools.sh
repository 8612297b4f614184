#!/usr/bin/env bash
# The Python tools some tests check overeager's output with, each in a virtualenv of its own in
# the machine's cache (kept across checkouts), made once:
#   readers     the reference readers of the exports: inspect-ai and Harbor (Python >= 3.12)
#   validator   the Kubernetes schema validator, kubernetes-validate
# Prints the virtualenv's path. Exit 3: this machine cannot make it (no Python >= 3.12, no
# venv module), which the tests report as a skip unless CI is set. Each tool is made under a
# lock, so the tests and scripts/test.sh (which makes both in the background while it builds)
# wait for one another instead of installing twice.
set -euo pipefail

READERS=("inspect-ai==0.3.285" "harbor==0.24.0")
VALIDATOR=("kubernetes-validate==1.37.0")

cache="${XDG_CACHE_HOME:-$HOME/.cache}/overeager/test-tools"

# A Python >= 3.12: $OVEREAGER_PYTHON, else python3.13, python3.12, python3 on PATH, else the
# newest pyenv has.
python312() {
  local ok='import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)'
  if [ -n "${OVEREAGER_PYTHON:-}" ]; then
    "$OVEREAGER_PYTHON" -c "$ok" 2>/dev/null || { echo "OVEREAGER_PYTHON=$OVEREAGER_PYTHON is not a Python >= 3.12" >&2; return 1; }
    echo "$OVEREAGER_PYTHON"; return 0
  fi
  local p
  for p in python3.13 python3.12 python3 $(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/*/bin/python3 2>/dev/null | sort -r); do
    if command -v "$p" >/dev/null 2>&1 && "$p" -c "$ok" 2>/dev/null; then command -v "$p"; return 0; fi
  done
  return 1
}

# make NAME PYTHON PACKAGE...: the virtualenv NAME with exactly PACKAGE... in it.
make_venv() {
  local name=$1 python=$2; shift 2
  local venv="$cache/$name" want; want=$(printf '%s\n' "$@")
  mkdir -p "$cache"
  exec {lock}>"$venv.lock"
  flock "$lock"
  if [ "$(cat "$venv/overeager-tools.txt" 2>/dev/null)" != "$want" ]; then
    rm -rf "$venv"
    "$python" -m venv "$venv" >/dev/null || { echo "$python -m venv failed (scripts/setup.sh --test installs python3-venv)" >&2; exit 3; }
    "$venv/bin/pip" install --quiet --disable-pip-version-check "$@" \
      || { echo "pip install $* failed (PyPI must be reachable)" >&2; rm -rf "$venv"; exit 1; }
    printf '%s' "$want" >"$venv/overeager-tools.txt"
  fi
  exec {lock}>&-
  echo "$venv"
}

readers() {
  local python
  python=$(python312) || { echo "the reader tests need Python >= 3.12 for Harbor (set OVEREAGER_PYTHON, or install python3.12)" >&2; exit 3; }
  make_venv interop-venv "$python" "${READERS[@]}"
}

validator() {
  make_venv k8s-validate-venv python3 "${VALIDATOR[@]}"
}

case "${1:-}" in
  readers) readers ;;
  validator) validator ;;
  all) readers >/dev/null; validator >/dev/null ;;
  *) echo "usage: scripts/test-tools.sh readers|validator|all" >&2; exit 2 ;;
esac
