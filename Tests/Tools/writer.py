#!/usr/bin/env python3
"""A tool that saves one member of a JSON document over and over: it reads the file, sets its
member to a counter, and writes the file back, at --rate saves per second for --seconds, either
by writing a temp file and renaming it over the document (as most editors and tools do) or in
place. Prints the last value it wrote, as JSON, when it stops."""
import argparse
import json
import os
import sys
import time


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--file", required=True)
    p.add_argument("--member", required=True)
    p.add_argument("--rate", type=float, required=True)
    p.add_argument("--seconds", type=float, required=True)
    p.add_argument("--mode", choices=["rename", "inplace"], default="rename")
    a = p.parse_args()
    period = 1.0 / a.rate
    start = time.time()
    value = 0
    skipped = 0
    while time.time() - start < a.seconds:
        due = start + value * period
        if due > time.time():
            time.sleep(due - time.time())
        try:
            with open(a.file) as f:
                doc = json.load(f)
        except (ValueError, FileNotFoundError):
            skipped += 1            # caught a file mid-write: read it again next time
            time.sleep(0.001)
            continue
        value += 1
        doc[a.member] = value
        text = json.dumps(doc, indent=2, sort_keys=True) + "\n"
        if a.mode == "rename":
            temp = f"{a.file}.{os.getpid()}.tmp"
            with open(temp, "w") as f:
                f.write(text)
            os.replace(temp, a.file)
        else:
            with open(a.file, "w") as f:
                f.write(text)
    print(json.dumps({"member": a.member, "last": value, "unreadable": skipped}), flush=True)


if __name__ == "__main__":
    sys.exit(main())
