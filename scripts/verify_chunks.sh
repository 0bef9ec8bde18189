#!/usr/bin/env bash
# The nightly sizes (`make verify`) in chunks, across sessions, at ONE commit: each chunk is
# `cronlab verify --seed S --seeds N --jobs 1 --json`, run from a worktree of COMMIT (its
# engine and simulator, this checkout's venv), its JSON kept as
# docs/history/verify-COMMIT/{sq,pg}_SSSSSS.json. A chunk already there is skipped, so a run
# stopped anywhere goes on where it stopped. A chunk that found a violation is kept all the
# same (verify exits 1): scripts/verify_summary.py lists them.
#
#   scripts/verify_chunks.sh COMMIT sqlite|postgresql FIRST LAST [CHUNK]
# NICE (default 10): the chunks' CPU priority (19: only what the rest of the machine leaves).
set -euo pipefail
commit=$(git rev-parse --short=7 "$1") store=$2 first=$3 last=$4
root=$(git rev-parse --show-toplevel)
pin="$root/../pin-$commit"
out="$root/docs/history/verify-$commit"
pg=${PG_URL:-postgresql://postgres@127.0.0.1:5432/test}
case $store in
  sqlite) prefix=sq chunk=${5:-500} args=() ;;
  postgresql) prefix=pg chunk=${5:-100} args=(--store "$pg") ;;
  *) echo "verify_chunks: the store is sqlite or postgresql, not '$store'" >&2; exit 2 ;;
esac
[ -d "$pin" ] || git -C "$root" worktree add --detach "$pin" "$commit" >/dev/null
mkdir -p "$out"
for ((s = first; s <= last; s += chunk)); do
  n=$(( last - s + 1 < chunk ? last - s + 1 : chunk ))
  file=$(printf '%s/%s_%06d.json' "$out" "$prefix" "$s")
  [ -s "$file" ] && continue
  PYTHONPATH="$pin/src" nice -n "${NICE:-10}" "$root/.venv/bin/cronlab" verify --seed "$s" --seeds "$n" \
    --jobs 1 --json "${args[@]}" > "$file.tmp" || true
  if python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$file.tmp" 2>/dev/null; then
    mv "$file.tmp" "$file"
  else
    echo "verify_chunks: seeds $s..$((s + n - 1)) printed no JSON (left in $file.tmp)" >&2
    exit 1
  fi
done
