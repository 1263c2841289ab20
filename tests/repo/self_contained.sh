#!/bin/sh
# The suite, build and benchmarks read nothing outside the repository: a fresh clone has no sibling folders.
# Fails when a file under tests/, src/, bench/, scripts/, the CMake file or the Makefile names the sibling
# shared folder, or when a link under tests/ points outside the repository or nowhere.
# usage: self_contained.sh SOURCE_DIR
set -eu
cd "$1"
status=0
# The pattern is written so that this file does not match itself.
pattern='\.\./'"shared"
hits=$(grep -rIn --exclude-dir=node_modules -e "$pattern" tests src bench scripts CMakeLists.txt Makefile || true)
if [ -n "$hits" ]; then
    echo "files that refer to a folder outside the repository:"
    echo "$hits"
    status=1
fi
root=$(pwd -P)
for link in $(find tests src bench assets -type l); do
    target=$(readlink -f "$link" || true)
    case "$target" in
    "$root"/*) [ -e "$target" ] || { echo "$link: points to a missing file"; status=1; } ;;
    *) echo "$link: points outside the repository ($target)"; status=1 ;;
    esac
done
[ $status -eq 0 ] && echo "self-contained: no references outside the repository"
exit $status
