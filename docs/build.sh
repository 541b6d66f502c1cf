#!/usr/bin/env bash
# Builds the documentation site into build/docs, with warnings as errors:
# a broken link or cross-reference, a page missing from the table of
# contents, a snippet marker that no longer exists, an environment variable
# documented but not read (or read but not documented), or a C function
# without a documentation comment fails the build.
#
#   docs/build.sh                       # uses $VENV (default: .venv of the repository)
#   VENV=/path/to/venv DOCS_OUT=/tmp/site docs/build.sh
#
# Installs the pinned packages of docs/requirements.txt into $VENV when one
# is missing or at another version (the only step that needs the network),
# and numpy, which pyddstore imports. Needs neither MPI nor libddstore.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
VENV=${VENV:-$ROOT/.venv}
OUT=${DOCS_OUT:-$ROOT/build/docs}
PY=$VENV/bin/python
export PYTHONDONTWRITEBYTECODE=1

if [ ! -x "$PY" ]; then
  echo "docs: creating the virtual environment $VENV"
  python3 -m venv "$VENV"
fi

# Are the pinned versions installed? (No network when they are.)
if ! "$PY" - "$ROOT/docs/requirements.txt" <<'PYEOF'
import re, sys
from importlib.metadata import PackageNotFoundError, version
missing = []
for line in open(sys.argv[1]):
    m = re.match(r"\s*([A-Za-z0-9_.-]+)==(\S+)", line)
    if m:
        try:
            if version(m.group(1)) != m.group(2):
                missing.append(line.strip())
        except PackageNotFoundError:
            missing.append(line.strip())
if missing:
    print("docs: installing", ", ".join(missing))
sys.exit(1 if missing else 0)
PYEOF
then
  "$PY" -m pip install --quiet -r "$ROOT/docs/requirements.txt"
fi
"$PY" -c 'import numpy' 2>/dev/null || "$PY" -m pip install --quiet numpy
# pyddstore's binding, for autodoc of the source tree (it parses include/ddstore.h).
"$PY" -c 'import cffi' 2>/dev/null || "$PY" -m pip install --quiet cffi

echo "docs: testing the docs tools"
if ! out=$("$PY" "$ROOT/docs/tools/test_tools.py" 2>&1); then
  echo "$out" >&2
  exit 1
fi
echo "$out" | tail -n 1
"$PY" "$ROOT/docs/tools/check_env_vars.py"

echo "docs: building $OUT"
# -E: read every page again, so that a warning from an unchanged page is
# never skipped by an incremental build.
"$VENV/bin/sphinx-build" -E -W --keep-going -n -b html "$ROOT/docs" "$OUT"
echo "docs: built $OUT/index.html"
