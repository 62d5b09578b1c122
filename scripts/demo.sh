#!/usr/bin/env bash
# Sets everything up, then shows ferry's main job on this machine: two folders kept in sync
# over a WebSocket with TLS on 127.0.0.1. Folder "laptop" gets the inventory sample and a
# listener; folder "desktop" starts empty with a replicator pointed at it, pinning the
# listener's certificate. Edits made with sed -i, vim and cp on either side cross over within
# milliseconds; then both read the same history.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x /opt/swift/usr/bin/swift ] && export PATH=/opt/swift/usr/bin:$PATH
bash scripts/setup.sh
ferry=$PWD/.build/debug/ferry
# In the home folder, not /tmp: there vim saves by renaming the file away and writing a new
# one, as it does for users (under /tmp it writes in place).
work=$(mktemp -d "${HOME:-/tmp}/ferry-demo-XXXXXX")
laptop=$work/laptop desktop=$work/desktop
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT
# Waits (at most 5 s) until a command succeeds, and says how long it took.
until_true() {
    local start=$(date +%s%N)
    for _ in $(seq 500); do
        if eval "$1" >/dev/null 2>&1; then
            printf '   arrived after %d ms\n' $(( ($(date +%s%N) - start) / 1000000 ))
            return 0
        fi
        sleep 0.01
    done
    echo "   did not arrive within 5 s"; return 1
}

say "ferry init --sample laptop; ferry init desktop   (same database name: inventory)"
"$ferry" init --sample "$laptop" --name inventory
"$ferry" init "$desktop" --name inventory

say "laptop:  ferry serve --interface 127.0.0.1 --delta-sync   (the listener, the passive peer; TLS by default; edits travel as deltas)"
"$ferry" -C "$laptop" serve --interface 127.0.0.1 --delta-sync > "$work/laptop.log" 2>&1 &
pids+=($!)
for _ in $(seq 200); do grep -q watching "$work/laptop.log" && break; sleep 0.05; done
url=$(sed -n 's/^listening on //p' "$work/laptop.log" | head -n 1)
echo "   $url"
say "laptop:  ferry identity show   (the self-signed identity it generated on first start)"
"$ferry" -C "$laptop" identity show
cert=$laptop/.ferry/tls/anonymous.pem

say "desktop: ferry serve --no-listen --peer $url --pin laptop's certificate   (the replicator, the active peer)"
"$ferry" -C "$desktop" serve --no-listen --peer "$url" --pin "$cert" > "$work/desktop.log" 2>&1 &
pids+=($!)
until_true "test -f '$desktop/samplelist.json'"
"$ferry" -C "$desktop" show samplelist.json | jq -c '.list[0]'

say "laptop: sed -i changes Apples 20 -> 25"
sed -i '0,/"value": 20/s//"value": 25/' "$laptop/samplelist.json"
until_true "jq -e '.list[0].value == 25' '$desktop/samplelist.json'"

say "desktop: vim (its default settings) retitles the list \"Inventory\" -> \"Kitchen inventory\"; vim saves by renaming the file to samplelist.json~ first"
vim -u DEFAULTS -es -c '%s/"Inventory"/"Kitchen inventory"/' -c wq "$desktop/samplelist.json"
until_true "grep -q 'Kitchen inventory' '$laptop/samplelist.json'"
echo "   recorded on desktop as one edit, no deletion:"
"$ferry" -C "$desktop" log samplelist.json --count 1 | cut -f 3-6 | sed 's/^/   /'

say "desktop: cp a new document in; laptop: rm it again   (a file counts as deleted once it has stayed away 0.5 s)"
printf '{"type": "note", "text": "buy more apples"}\n' > "$work/note.json"
cp "$work/note.json" "$desktop/notes.json"
until_true "test -f '$laptop/notes.json'"
rm "$laptop/notes.json"
until_true "! test -e '$desktop/notes.json'"

say "desktop: ferry status   (asks the running agent)"
"$ferry" -C "$desktop" status

say "laptop: ferry log   (newest first: seq, time, rev, doc, what, origin)"
"$ferry" -C "$laptop" log

say "the log is JSON Lines:  jq -c '{seq, doc, rev, origin}' desktop/.ferry/revs.log"
jq -c '{seq, doc, rev, origin}' "$desktop/.ferry/revs.log"

say "both folders hold the same list:  diff <(jq -S . laptop/samplelist.json) <(jq -S . desktop/samplelist.json)"
diff <(jq -S . "$laptop/samplelist.json") <(jq -S . "$desktop/samplelist.json") && echo "   identical"

say "and the same history:  diff <(jq -r .rev laptop/.ferry/revs.log | sort -u) <(jq -r .rev desktop/.ferry/revs.log | sort -u)"
diff <(jq -r .rev "$laptop/.ferry/revs.log" | sort -u) <(jq -r .rev "$desktop/.ferry/revs.log" | sort -u) && echo "   identical"

say "every item's image is an object on both sides; its sha256sum is its own name"
digest=$("$ferry" -C "$desktop" show samplelist.json | jq -r '.list[0].image.digest' | sed 's/sha256-//')
sha256sum "$desktop/.ferry/objects/${digest:0:2}/${digest:2}"

kill "${pids[@]}"; wait "${pids[@]}" 2>/dev/null || true
trap - EXIT
say "ferry verify, on both sides"
"$ferry" -C "$laptop" verify
"$ferry" -C "$desktop" verify
printf '\nThe folders are kept at %s\n' "$work"
