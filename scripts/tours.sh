#!/usr/bin/env bash
# The README's tours, run as a new user runs them: schedkit installed fresh with the README's
# own `cargo install --path crates/schedkit` (into a temporary --root whose bin/ comes first on
# PATH), then every command of the README's ```sh blocks, as written, from a temporary copy of
# examples/ (with HOME pointed at an empty folder there, so that the tours' `~/...` files land
# in it and not in the home of whoever runs this). A command fails the script when it exits
# non-zero or prints an error (the word on stderr; the reports on stdout have metrics such as
# `mean |error| vs GPS`); every command runs, and the failures are listed at the end.
#
# Usage: scripts/tours.sh [--debug | --profile NAME]
#   With neither, the install is the README's (release profile): minutes on a fresh clone.
#   --debug / --profile NAME are passed to `cargo install`, with --locked: scripts/test.sh
#   (CI) passes `--profile test`, so that the install reuses what `cargo test --workspace`
#   has just built in the same target directory ($CARGO_TARGET_DIR, else target/) from the
#   same Cargo.lock, instead of a release build from scratch. (The binary's own features
#   differ from the whole workspace's, so the crates between schedkit-experiments and the
#   binary are compiled again: about a minute, against several for a release build.)
#
# What runs where, written in README.md itself, not here:
#   - `<!-- tour: skip WHY -->` on the line before a ```sh fence: the block is not run (WHY
#     is printed). `<!-- tour: install -->`: the block's `cargo install` command gets
#     `--root DIR` (and the flags above) appended; the rest of the block runs as usual.
#   - `# exit N` ending a command: it is expected to exit N (and to print its error).
#   - A command ending in `&` runs in the background and is waited for, and checked, at the
#     end of its block.
#   - The README says which commands need root: `schedkit run`, `restore`, `ctl` and the real
#     parts of `experiment` (those without --sim-only). As anyone else they are skipped, with
#     the reason printed; everything else (the simulator's tours) runs as anyone.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

install_flags=()
while [ $# -gt 0 ]; do
    case "$1" in
        --debug) install_flags+=(--debug --locked) ;;
        --profile) install_flags+=(--profile "$2" --locked); shift ;;
        *) echo "usage: scripts/tours.sh [--debug | --profile NAME]" >&2; exit 2 ;;
    esac
    shift
done

work=$(mktemp -d "${TMPDIR:-/tmp}/schedkit-tours.XXXXXX")
cleanup() {
    # Background runs of a block that failed early are stopped, not left behind.
    for p in "${bg_pids[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT
root="$work/install"
logs="$work/logs"
mkdir -p "$logs" "$work/tour/home"
cp -r examples "$work/tour/"
start=$SECONDS

# The ```sh blocks, one line each: BLOCK, MARK and LINE separated by the ASCII unit separator
# (a tab is whitespace to `read`, and two would collapse around an empty MARK). MARK: what the
# `<!-- tour: ... -->` line right before the fence says, or empty. Lines ending in a backslash
# are joined.
blocks=$(awk '
    /^<!-- tour: .* -->[[:space:]]*$/ {
        mark = $0; sub(/^<!-- tour: */, "", mark); sub(/ *-->[[:space:]]*$/, "", mark); next
    }
    /^```sh[[:space:]]*$/ && !inside { inside = 1; block++; bmark = mark; mark = ""; next }
    /^```/ && inside { inside = 0; next }
    inside {
        line = $0
        if (line ~ /\\$/) { sub(/\\$/, "", line); held = held line; next }
        print block "\037" bmark "\037" held line; held = ""; next
    }
    NF { mark = "" }
' README.md)
[ -n "$blocks" ] || { echo "tours: no \`\`\`sh blocks in README.md" >&2; exit 1; }

failures=()
bg_pids=()
bg_cmds=()
bg_logs=()
n=0

# Whether the README says `code` needs root (see the header).
needs_root() {
    local re_real='^schedkit[[:space:]]+(run|restore|ctl)([[:space:]]|$)'
    local re_exp='^schedkit[[:space:]]+experiment[[:space:]]'
    [[ $1 =~ $re_real ]] || { [[ $1 =~ $re_exp ]] && [[ $1 != *--sim-only* ]]; }
}

# Checks one finished command: its exit status against the expected one, and its output for
# an error (an expected failure prints one).
check() {
    local cmd=$1 status=$2 expect=$3 log=$4 took=$5
    local why=""
    if [ "$status" != "$expect" ]; then
        why="exit status $status, expected $expect"
    elif [ "$expect" = 0 ] && grep -qiE '(^|[^[:alnum:]_./-])error' "$log.err"; then
        why="printed an error"
    fi
    if [ -n "$why" ]; then
        echo "tours: FAILED ($why): $cmd" >&2
        echo "--- stderr:" >&2; tail -n 20 "$log.err" >&2
        echo "--- stdout:" >&2; tail -n 20 "$log.out" >&2
        failures+=("$cmd ($why)")
    else
        echo "tours: ok ($took): $cmd" >&2
    fi
}

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# The end of a block: its background commands are waited for and checked.
end_block() {
    local i status
    for i in "${!bg_pids[@]}"; do
        status=0
        wait "${bg_pids[$i]}" || status=$?
        check "${bg_cmds[$i]}" "$status" 0 "${bg_logs[$i]}" "background"
    done
    bg_pids=()
    bg_cmds=()
    bg_logs=()
}

run_command() {
    local mark=$1 cmd=$2 code expect=0 log t0 status
    # The code without its trailing comment; `# exit N` there is the expected status.
    code=$(sed -E 's/(^|[[:space:]]+)#.*$//' <<<"$cmd")
    [ -n "${code//[[:space:]]/}" ] || return 0
    if [[ $cmd =~ \#[[:space:]]*exit[[:space:]]+([0-9]+) ]]; then
        expect=${BASH_REMATCH[1]}
    fi
    if [ "$mark" = install ] && [[ $code =~ ^cargo[[:space:]]+install ]]; then
        # The README's install, into the temporary root; run from the clone, where its
        # relative path points.
        code="cd \"$repo\" && $code --root \"$root\" ${install_flags[*]:-}"
    elif needs_root "$code" && [ "$(id -u)" != 0 ]; then
        echo "tours: skipped (needs root, the README says so): $cmd" >&2
        return 0
    fi
    n=$((n + 1))
    log="$logs/$n"
    if [[ $code =~ \&[[:space:]]*$ ]]; then
        code=${code%&*}
        eval "$code" </dev/null >"$log.out" 2>"$log.err" &
        bg_pids+=($!)
        bg_cmds+=("$cmd")
        bg_logs+=("$log")
        echo "tours: started in the background: $cmd" >&2
        return 0
    fi
    t0=$(now)
    status=0
    # In a subshell: a `cd` (the install's) does not move the tours out of their folder.
    (eval "$code") </dev/null >"$log.out" 2>"$log.err" || status=$?
    check "$cmd" "$status" "$expect" "$log" "$(since "$t0") s"
    if [ "$mark" = install ] && [[ $code == *"cargo install"* ]]; then
        # Everything after the install runs the installed binary, as a new user's shell does.
        export PATH="$root/bin:$PATH"
        if [ "$(command -v schedkit)" != "$root/bin/schedkit" ]; then
            failures+=("the installed schedkit is not the first on PATH")
        fi
    fi
}

cd "$work/tour"
# The toolchain stays where it is (rustup and cargo find it through HOME otherwise).
export CARGO_HOME="${CARGO_HOME:-$HOME/.cargo}" RUSTUP_HOME="${RUSTUP_HOME:-$HOME/.rustup}"
export HOME="$work/tour/home"
current=""
while IFS=$'\037' read -r block mark line; do
    if [ "$block" != "$current" ]; then
        [ -z "$current" ] || end_block
        current=$block
        case "$mark" in
            skip*) echo "tours: block $block skipped:$(sed -E 's/^skip:?//' <<<"$mark")" >&2 ;;
        esac
    fi
    case "$mark" in
        skip*) continue ;;
    esac
    run_command "$mark" "$line"
done <<<"$blocks"
end_block

if ! command -v schedkit >/dev/null || [ "$(command -v schedkit)" != "$root/bin/schedkit" ]; then
    failures+=("no block marked <!-- tour: install --> installed schedkit")
fi
echo "tours: $n command(s) in $((SECONDS - start)) s, ${#failures[@]} failed" >&2
if [ ${#failures[@]} -gt 0 ]; then
    printf 'tours: failed: %s\n' "${failures[@]}" >&2
    exit 1
fi
