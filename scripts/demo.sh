#!/usr/bin/env bash
# Sets everything up, then shows ferry's job as far as it is built today: an inventory
# folder where every save from any tool becomes one revision within milliseconds, read back
# with ferry's commands and with plain shell tools. (Replication between two folders comes
# with the wire protocol; this script will then sync two folders instead.)
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x /opt/swift/usr/bin/swift ] && export PATH=/opt/swift/usr/bin:$PATH
bash scripts/setup.sh >/dev/null
ferry=$PWD/.build/debug/ferry
work=$(mktemp -d /tmp/ferry-demo-XXXXXX)
folder=$work/inventory
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

say "ferry init --sample $folder"
"$ferry" init --sample "$folder"
cd "$folder"
ls -la

say "ferry serve --no-listen   (the agent: watches the folder, records every save)"
"$ferry" serve --no-listen > "$work/agent.log" 2>&1 &
agent=$!
trap 'kill $agent 2>/dev/null || true' EXIT
for _ in $(seq 100); do grep -q watching "$work/agent.log" && break; sleep 0.05; done

say "edit with sed -i: Apples 20 -> 25"
sed -i '0,/"value": 20/s//"value": 25/' samplelist.json
sleep 0.2
say "edit with vim: rename the list"
vim -u NONE -es -c '%s/"Inventory"/"Kitchen inventory"/' -c wq samplelist.json
sleep 0.2
say "a new document, written half-way (invalid JSON), then completed"
printf '{"type": ' > notes.json
sleep 0.2
"$ferry" status | grep -E 'unreadable|pending' || true
printf '{"type": "note", "text": "buy more apples"}\n' > notes.json
sleep 0.2

say "what the agent logged"
cat "$work/agent.log"

say "ferry log   (newest first: seq, time, rev, doc, what, origin)"
"$ferry" log

say "the log is JSON Lines:  jq -c '{seq, doc, rev, parent}' .ferry/revs.log"
jq -c '{seq, doc, rev, parent}' .ferry/revs.log

say "ferry show samplelist.json | jq '.items[0]'   (each item carries an image blob)"
"$ferry" show samplelist.json | jq '.items[0]'
digest=$("$ferry" show samplelist.json | jq -r '.items[0].image.digest' | sed 's/sha256-//')
say "the image is an object whose sha256sum is its own name"
sha256sum ".ferry/objects/${digest:0:2}/${digest:2}"

kill $agent; wait $agent 2>/dev/null || true
trap - EXIT
say "ferry verify"
"$ferry" verify
printf '\nThe folder is kept at %s\n' "$folder"
