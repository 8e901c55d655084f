#!/usr/bin/env bash
# Stage pyenv's sources from what THIS machine can reach, for the pyenv path
# of the `python` scenario (GitHub and python.org are unreachable in CI):
#   - pyenv and pyenv-virtualenv: packed from a local pyenv checkout
#     (default /root/.pyenv, i.e. $PYENV_ROOT) in GitHub's tag-archive layout
#     (one top directory), versions read from the checkout itself;
#   - CPython: Debian's orig tarball of 3.11.2, which is python.org's
#     Python-3.11.2.tgz byte for byte (python-build's checksum matches).
# Writes <dir>/overrides.yml (python_mirror_overrides: artifact overrides with sha256, + the
# versions). Then:  MNC_PYENV_MIRROR=<dir> molecule test -s python
#
#   molecule/python/make-local-mirror.sh [dir] [pyenv checkout]
set -euo pipefail
dir=$(realpath -m "${1:-${MNC_PYENV_MIRROR:-$HOME/.cache/mncluster/pyenv-mirror}}")
src=$(realpath "${2:-${PYENV_ROOT:-$HOME/.pyenv}}")
cpython_url=http://deb.debian.org/debian/pool/main/p/python3.11/python3.11_3.11.2.orig.tar.gz
cpython_sha256=2411c74bda5bbcfcddaf4531f66d1adc73f247f529aee981b029513aefdbf849

[ -x "$src/bin/pyenv" ] && [ -d "$src/plugins/pyenv-virtualenv" ] ||
    { echo "no pyenv checkout with pyenv-virtualenv at $src" >&2; exit 1; }
[ -f "$src/plugins/python-build/share/python-build/3.11.2" ] ||
    { echo "$src: python-build has no 3.11.2 definition" >&2; exit 1; }
pyenv_version=$(sed -n 's/^ *version="\([0-9.]*\)".*/\1/p' "$src/libexec/pyenv---version" | head -1)
venv_version=$(sed -n 's/^ *PYENV_VIRTUALENV_VERSION="\([0-9.]*\)".*/\1/p' "$src/plugins/pyenv-virtualenv/bin/pyenv-virtualenv" | head -1)
[ -n "$pyenv_version" ] && [ -n "$venv_version" ] || { echo "cannot read the versions in $src" >&2; exit 1; }
mkdir -p "$dir"

# Reproducible archives: sorted names, fixed owner and mtime, no VCS data,
# no built Pythons, caches or shims. The same checkout gives the same sha256.
pack() {  # archive, top directory name, source directory, excludes...
    local out=$1 top=$2 from=$3; shift 3
    tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 \
        --exclude-vcs "$@" --transform "s|^\\.|$top|S" \
        -C "$from" -czf "$out.tmp" . && mv "$out.tmp" "$out"
}
pack "$dir/pyenv-$pyenv_version-local.tar.gz" "pyenv-$pyenv_version" "$src" \
    --exclude=./versions --exclude=./cache --exclude=./shims --exclude=./version \
    --exclude=./plugins/pyenv-virtualenv
pack "$dir/pyenv-virtualenv-$venv_version-local.tar.gz" "pyenv-virtualenv-$venv_version" \
    "$src/plugins/pyenv-virtualenv"

cpython="$dir/python3.11_3.11.2.orig.tar.gz"
if ! echo "$cpython_sha256  $cpython" | sha256sum -c --quiet - >/dev/null 2>&1; then
    curl -fsSL --retry 3 -o "$cpython.tmp" "$cpython_url"
    echo "$cpython_sha256  $cpython.tmp" | sha256sum -c --quiet -
    mv "$cpython.tmp" "$cpython"
fi

sha() { sha256sum "$1" | cut -d' ' -f1; }
cat > "$dir/overrides.yml.tmp" <<YAML
---
# Written by molecule/python/make-local-mirror.sh from $src.
stack_pyenv_version: "$pyenv_version"
stack_pyenv_virtualenv_version: "$venv_version"
stack_python_version: "3.11.2"
python_mirror_overrides:
  pyenv:
    path: $dir/pyenv-$pyenv_version-local.tar.gz
    filename: pyenv-$pyenv_version-local.tar.gz
    sha256: $(sha "$dir/pyenv-$pyenv_version-local.tar.gz")
  pyenv-virtualenv:
    path: $dir/pyenv-virtualenv-$venv_version-local.tar.gz
    filename: pyenv-virtualenv-$venv_version-local.tar.gz
    sha256: $(sha "$dir/pyenv-virtualenv-$venv_version-local.tar.gz")
  cpython:
    path: $cpython
    filename: python3.11_3.11.2.orig.tar.gz
    sha256: $cpython_sha256
YAML
mv "$dir/overrides.yml.tmp" "$dir/overrides.yml"
echo "pyenv mirror in $dir (pyenv $pyenv_version, pyenv-virtualenv $venv_version, CPython 3.11.2)"
echo "run: MNC_PYENV_MIRROR=$dir molecule test -s python"
