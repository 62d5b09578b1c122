#!/usr/bin/env python3
"""Saves a JSON file with a real editor, over and over, the way a user does.

vim and nano run in a pseudo-terminal for the whole session and get keystrokes; emacs runs
once per save (`emacs --batch`), so that every save is its session's first, the one emacs
saves by renaming the file to its backup. All three use their default settings: run this
with a fresh HOME. Each save changes the document's "name" member, except every
--unchanged-every-th, which saves the content as it is. After each save the script waits
until the folder's revs.log has recorded it (changed saves) or for --quiet seconds
(unchanged ones), so that each save is its own event. Prints one line per save.
"""
import argparse
import json
import os
import pty
import re
import select
import subprocess
import sys
import time


def log_lines(log, doc):
    """The local revisions of doc in the log: its complete lines only, since a line being
    appended can be read half-written (a read does not wait for the write's copy)."""
    try:
        with open(log, "rb") as f:
            complete = f.read().split(b"\n")[:-1]
    except FileNotFoundError:
        return 0
    entries = (json.loads(line) for line in complete)
    return sum(1 for entry in entries if entry.get("doc") == doc and entry.get("origin") == "local")


class Terminal:
    """An editor in a pseudo-terminal: keystrokes in, screen output drained."""

    def __init__(self, argv):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            os.execvp(argv[0], argv)
        self.output = b""

    def drain(self, seconds):
        deadline = time.time() + seconds
        while True:
            left = deadline - time.time()
            if left <= 0:
                return
            ready, _, _ = select.select([self.fd], [], [], left)
            if not ready:
                return
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:
                return
            if not chunk:
                return
            self.output = (self.output + chunk)[-65536:]

    def send(self, keys, settle=0.05):
        os.write(self.fd, keys.encode() if isinstance(keys, str) else keys)
        self.drain(settle)

    def wait_for(self, pattern, seconds=5):
        deadline = time.time() + seconds
        while time.time() < deadline:
            if re.search(pattern, self.output):
                return True
            self.drain(0.05)
        return False

    def close(self):
        try:
            os.waitpid(self.pid, 0)
        except ChildProcessError:
            pass


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--editor", choices=["vim", "nano", "emacs"], required=True)
    p.add_argument("--file", required=True, help="the document, relative to --folder")
    p.add_argument("--folder", required=True)
    p.add_argument("--saves", type=int, default=100)
    p.add_argument("--unchanged-every", type=int, default=10)
    p.add_argument("--quiet", type=float, default=0.8)
    a = p.parse_args()
    os.chdir(a.folder)
    log = os.path.join(a.folder, ".ferry", "revs.log")
    path = a.file
    current = json.load(open(path))["name"]
    recorded = log_lines(log, path)

    term = None
    if a.editor == "vim":
        term = Terminal(["vim", path])
        term.drain(1.0)
    elif a.editor == "nano":
        term = Terminal(["nano", path])
        term.drain(1.0)

    changed = unchanged = 0
    for i in range(1, a.saves + 1):
        change = i % a.unchanged_every != 0
        new = f"Edited {a.editor} {i}" if change else current
        if a.editor == "vim":
            if change:
                term.send(f':%s/"name": "[^"]*"/"name": "{new}"/\r')
            term.send(":w\r")
            if re.search(rb"really want to write", term.output[-400:]):
                term.send("y\r")
        elif a.editor == "nano":
            if change:
                term.send(b"\x1c")                      # ^\ : replace
                term.send(f'"name": "{current}"\r')     # search for (literal)
                term.send(f'"name": "{new}"\r')         # replace with
                term.send("y", settle=0.1)              # this instance
            term.send(b"\x0f")                          # ^O : write out
            term.send("\r", settle=0.1)                 # to the same name
        else:
            edit = (f'(progn (goto-char (point-min)) (re-search-forward "\\"name\\": \\"[^\\"]*\\"")'
                    f' (replace-match "\\"name\\": \\"{new}\\"" t t))') if change else "(set-buffer-modified-p t)"
            subprocess.run(["emacs", "--batch", path, "--eval", f"(progn {edit} (save-buffer))"],
                           check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        current = new
        if change:
            changed += 1
            deadline = time.time() + 5
            while log_lines(log, path) < recorded + changed and time.time() < deadline:
                time.sleep(0.01)
            time.sleep(0.03)
        else:
            unchanged += 1
            time.sleep(a.quiet)
        on_disk = json.load(open(path))["name"]
        print(f"save {i}: {'changed' if change else 'unchanged'} name={on_disk!r}", flush=True)
        if on_disk != current:
            print(f"the editor did not save: {on_disk!r} on disk, {current!r} expected", file=sys.stderr)
            return 1

    if a.editor == "vim":
        term.send(":qa!\r", settle=0.3)
        term.close()
    elif a.editor == "nano":
        term.send(b"\x18", settle=0.3)   # ^X
        term.close()
    print(f"{changed} changed and {unchanged} unchanged saves", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
