# Shared by the scripts: find Python >= 3.12 and make .venv with the project, installed from uv.lock.
# PySide6 6.12 on Python 3.11 aborts after a few thousand Qt calls, hence the floor.
#
# The venv holds exactly the versions (and hashes) in uv.lock, so a run today and one next year
# install the same thing; `scripts/lock` refreshes the lock. uv itself is one exact release checked
# by hash (scripts/uv-requirements.txt), kept in the user's cache dir, outside every checkout.

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${ELICITRON_VENV:-$ROOT/.venv}"
# uv must never fetch an interpreter of its own: the machine's Python is the one we test.
export UV_PYTHON_DOWNLOADS=never

python_ok() {
    "$1" -c 'import sys, venv; sys.exit(0 if sys.version_info >= (3, 12) else 1)' >/dev/null 2>&1
}

python_is() {  # $1 interpreter, $2 "3.13": is it that minor version?
    "$1" -c "import sys; sys.exit(0 if '%d.%d' % sys.version_info[:2] == '$2' else 1)" >/dev/null 2>&1
}

find_python() {
    # $1 (optional): a minor version such as 3.13 that the interpreter must be.
    local want="${1:-}" candidate
    local names=(python3.12 python3.13 python3.14 python3)
    [ -n "$want" ] && names=("python$want")
    if [ -z "$want" ] && [ -n "${ELICITRON_PYTHON:-}" ] && python_ok "$ELICITRON_PYTHON"; then
        echo "$ELICITRON_PYTHON"; return 0
    fi
    for candidate in "${names[@]}"; do
        candidate="$(command -v "$candidate" 2>/dev/null)" || continue
        if python_ok "$candidate" && { [ -z "$want" ] || python_is "$candidate" "$want"; }; then
            echo "$candidate"; return 0
        fi
    done
    # pyenv shims refuse versions that are installed but not selected: call the binaries directly.
    local root="${PYENV_ROOT:-$HOME/.pyenv}" pattern="3.1[2-9]"
    [ -n "$want" ] && pattern="$want"
    for candidate in "$root"/versions/$pattern*/bin/python3 /usr/local/bin/python$pattern /usr/bin/python$pattern; do
        if [ -x "$candidate" ] && python_ok "$candidate" && { [ -z "$want" ] || python_is "$candidate" "$want"; }; then
            echo "$candidate"; return 0
        fi
    done
    return 1
}

ensure_uv() {
    # Sets UV: $ELICITRON_UV if given, else the release scripts/uv-requirements.txt names, installed
    # once (checked by hash) into the user's cache dir.
    if [ -n "${ELICITRON_UV:-}" ]; then UV="$ELICITRON_UV"; return 0; fi
    local version home python
    version="$(sed -n 's/^uv==\([0-9.]*\).*/\1/p' "$ROOT/scripts/uv-requirements.txt")"
    home="${XDG_CACHE_HOME:-$HOME/.cache}/elicitron/uv-$version"
    UV="$home/bin/uv"
    [ -x "$UV" ] && return 0
    python="$(find_python)" || { echo "elicitron: needs Python >= 3.12 and none was found" >&2; return 1; }
    echo "elicitron: installing uv $version into $home (one time)" >&2
    rm -rf "$home.partial"
    "$python" -m pip install -qq --root-user-action=ignore --disable-pip-version-check --no-deps --only-binary :all: \
        --require-hashes --target "$home.partial" -r "$ROOT/scripts/uv-requirements.txt" >&2 \
        || { echo "elicitron: could not install uv $version from the package index" >&2; return 1; }
    rm -rf "$home" && mv "$home.partial" "$home"
}

lock_digest() {
    cat "$ROOT/uv.lock" "$ROOT/pyproject.toml" | cksum | cut -d' ' -f1
}

ensure_venv() {
    # $1: "" (the app) or "[test]" (the app and the test extra). The venv is synced from uv.lock when
    # it is missing, the lock or pyproject.toml changed, or it lacks the extra asked for.
    local extras="${1:-}" stamp want have="" python
    stamp="$VENV/.elicitron-locked"
    want="$(lock_digest)"
    [ -f "$stamp" ] && have="$(cat "$stamp")"
    if [ -x "$VENV/bin/python" ] && python_ok "$VENV/bin/python"; then
        # A venv synced with the test extra serves the app too (a superset); not the other way round.
        if [ "$have" = "$want [test]" ] || { [ -z "$extras" ] && [ "$have" = "$want " ]; }; then
            return 0
        fi
        python="$VENV/bin/python"
    else
        python="$(find_python)" || { echo "elicitron: needs Python >= 3.12 and none was found" >&2; return 1; }
    fi
    ensure_uv || return 1
    local sync=(sync --locked --python "$python" --no-python-downloads)
    if [ "$extras" = "[test]" ]; then
        sync+=(--extra test)
    else
        sync+=(--inexact)  # the app alone never strips a test venv's extras
    fi
    echo "elicitron: installing the project into $VENV from uv.lock" >&2
    if ! (cd "$ROOT" && UV_PROJECT_ENVIRONMENT="$VENV" "$UV" --quiet "${sync[@]}" >&2); then
        echo "elicitron: could not install from uv.lock; if pyproject.toml changed, run scripts/lock" >&2
        return 1
    fi
    if [ "$extras" = "[test]" ]; then echo "$want [test]" >"$stamp"; else echo "$want " >"$stamp"; fi
}
