# Shared by scripts/launch and scripts/test: find Python >= 3.12 and make .venv with the project.
# PySide6 6.12 on Python 3.11 aborts after a few thousand Qt calls, hence the floor.

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${ELICITRON_VENV:-$ROOT/.venv}"

python_ok() {
    "$1" -c 'import sys, venv; sys.exit(0 if sys.version_info >= (3, 12) else 1)' >/dev/null 2>&1
}

find_python() {
    local candidate
    if [ -n "${ELICITRON_PYTHON:-}" ] && python_ok "$ELICITRON_PYTHON"; then
        echo "$ELICITRON_PYTHON"; return 0
    fi
    for candidate in python3.12 python3.13 python3.14 python3; do
        if command -v "$candidate" >/dev/null 2>&1 && python_ok "$(command -v "$candidate")"; then
            command -v "$candidate"; return 0
        fi
    done
    # pyenv shims refuse versions that are installed but not selected: call the binaries directly.
    local root="${PYENV_ROOT:-$HOME/.pyenv}"
    for candidate in "$root"/versions/3.1[2-9]*/bin/python3 /usr/local/bin/python3.1[2-9] /usr/bin/python3.1[2-9]; do
        if [ -x "$candidate" ] && python_ok "$candidate"; then
            echo "$candidate"; return 0
        fi
    done
    return 1
}

ensure_venv() {
    # $1: pip extras spec, e.g. "" or "[test]"
    local extras="${1:-}" stamp python
    stamp="$VENV/.elicitron-installed$extras"
    if [ -x "$VENV/bin/python" ] && python_ok "$VENV/bin/python" && [ "$stamp" -nt "$ROOT/pyproject.toml" ]; then
        return 0
    fi
    if ! [ -x "$VENV/bin/python" ] || ! python_ok "$VENV/bin/python"; then
        python="$(find_python)" || { echo "elicitron: needs Python >= 3.12 and none was found" >&2; return 1; }
        echo "elicitron: creating $VENV with $python" >&2
        rm -rf "$VENV"
        "$python" -m venv "$VENV" || return 1
    fi
    echo "elicitron: installing the project into $VENV (one time)" >&2
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e "$ROOT$extras" || return 1
    touch "$stamp"
}
