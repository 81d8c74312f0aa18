#!/usr/bin/env bash
# Old binary against new on the golden families: for each folder of GOLDEN_DIR
# (manifest.json + hf/ + reference/, ../shared/testdata/golden/README.md) run
# `rinfer validate --golden DIR --json ...` with both binaries (the folder's
# f32 hf/ weights, no --dtype: the exact f32 mode) and compare the two JSON
# reports. A refactor that keeps the logits bit for bit keeps every error
# statistic in them, so the reports must be identical apart from fields that
# legitimately differ between binaries (timings, git commit, the binary's
# path: IGNORE_KEYS; validate's JSON of 3428145 has none of them, they are
# dropped in case a newer one adds them). The exit statuses must agree too.
# Prints "name: identical" or "name: DIFFERENT (first differing key)" per
# family, then "N identical, M different"; exits 1 if any differ.
# Usage: scripts/compare_golden.sh OLD_RINFER NEW_RINFER [GOLDEN_DIR=../shared/testdata/golden]
# Env: VALIDATE_ARGS="--threads 1" extra validate options for both binaries;
#      KEEP=DIR keep the JSON reports and logs in DIR (default: a temp dir, removed);
#      IGNORE_KEYS regex of key names to drop (default below).
set -euo pipefail
if [ $# -lt 2 ] || [ $# -gt 3 ]; then
  sed -n '2,/^set /p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
  exit 2
fi
# Paths given are relative to the caller's directory; the default golden dir
# to the repository root.
old=$(realpath "$1") new=$(realpath "$2")
golden=$(realpath "${3:-$(dirname "$0")/../../shared/testdata/golden}")
for b in "$old" "$new"; do [ -x "$b" ] || { echo "not an executable: $b" >&2; exit 2; }; done
[ -d "$golden" ] || { echo "no golden dir: $golden" >&2; exit 2; }
# Key names (anywhere in the JSON) that may differ between two builds.
export IGNORE_KEYS=${IGNORE_KEYS:-'^(.*_(ms|s|sec|seconds|time|timing|timings)|time|times|timing|timings|elapsed|wall|duration|timestamp|date|host|hostname|commit|git_commit|rinfer_commit|version|binary|rinfer|exe|executable|argv|command|cmdline)$'}
if [ -n "${KEEP:-}" ]; then
  tmp=$KEEP
  mkdir -p "$tmp"
else
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
fi
# shellcheck disable=SC2206  # word-split the extra options on purpose
extra=(${VALIDATE_ARGS:-})
n_same=0 n_diff=0
for dir in "$golden"/*/; do
  dir=${dir%/}
  name=$(basename "$dir")
  [ -f "$dir/manifest.json" ] || continue
  for which in old new; do
    bin=$old
    [ "$which" = new ] && bin=$new
    rm -f "$tmp/$which-$name.json"
    rc=0
    "$bin" validate --golden "$dir" "${extra[@]}" --json "$tmp/$which-$name.json" > "$tmp/$which-$name.log" 2>&1 || rc=$?
    echo "$rc" > "$tmp/$which-$name.rc"
  done
  verdict=$(python3 - "$tmp" "$name" <<'EOF'
import json, os, re, sys

tmp, name = sys.argv[1], sys.argv[2]
ignore = re.compile(os.environ["IGNORE_KEYS"])


def load(which):
    rc = open(os.path.join(tmp, "%s-%s.rc" % (which, name))).read().strip()
    p = os.path.join(tmp, "%s-%s.json" % (which, name))
    return rc, (json.load(open(p)) if os.path.exists(p) else None)


def strip(x):
    if isinstance(x, dict):
        return {k: strip(v) for k, v in x.items() if not ignore.match(k)}
    if isinstance(x, list):
        return [strip(v) for v in x]
    return x


def first_diff(a, b, path):
    """The path of the first difference between a and b (keys in sorted order), or None."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            p = "%s.%s" % (path, k) if path else k
            if k not in a:
                return "%s (only in new)" % p
            if k not in b:
                return "%s (only in old)" % p
            d = first_diff(a[k], b[k], p)
            if d:
                return d
        return None
    if isinstance(a, list) and isinstance(b, list):
        for i, (x, y) in enumerate(zip(a, b)):
            d = first_diff(x, y, "%s[%d]" % (path, i))
            if d:
                return d
        if len(a) != len(b):
            return "%s (length %d vs %d)" % (path, len(a), len(b))
        return None
    # Exact: bit-identical logits give bit-identical statistics (and 1 != 1.0
    # and True != 1 are differences of format worth seeing).
    if type(a) is not type(b) or a != b:
        return "%s: %s vs %s" % (path or "(top level)", json.dumps(a), json.dumps(b))
    return None


(rc_old, j_old), (rc_new, j_new) = load("old"), load("new")
if j_old is None or j_new is None:
    missing = " and ".join(w for w, j in (("old", j_old), ("new", j_new)) if j is None)
    print("DIFFERENT (no JSON from %s; exit %s / %s, see its log; KEEP=DIR keeps the logs)" % (missing, rc_old, rc_new))
    sys.exit(0)
d = first_diff(strip(j_old), strip(j_new), "")
if d:
    print("DIFFERENT (%s)" % d)
elif rc_old != rc_new:
    print("DIFFERENT (exit status %s vs %s)" % (rc_old, rc_new))
else:
    print("identical")
EOF
)
  echo "$name: $verdict"
  if [ "$verdict" = identical ]; then n_same=$((n_same + 1)); else n_diff=$((n_diff + 1)); fi
done
echo "$n_same identical, $n_diff different"
[ -n "${KEEP:-}" ] && echo "reports and logs in $tmp"
[ "$n_diff" -eq 0 ] && [ "$n_same" -gt 0 ]
