#!/usr/bin/env bash
# Reads `swift build` output on stdin and prints a progress line every tenth of the way
# (SwiftPM prints [n/N] per step; plugins first get a short count of their own, and the total
# can grow as planning goes on), every error and warning about ferry's own code, and the
# closing line: a newcomer sees the build move without hundreds of lines.
awk '
  /^\[[0-9]+\/[0-9]+\]/ {
    split(substr($1, 2, length($1) - 2), p, "/")
    if (p[2] < 20) next
    if (p[2] + 0 < total * 0.5 || total == 0) { shown = 0 }
    total = p[2]
    step = int(p[1] * 10 / p[2])
    if (step > shown) { shown = step; printf "  building: %d%% (%s of %s steps)\n", step * 10, p[1], p[2]; fflush() }
    next
  }
  /error:|Build complete/ { print "  " $0; fflush(); next }
  /warning:/ && /\/Sources\// && !/\.build\// { print "  " $0; fflush() }
'
