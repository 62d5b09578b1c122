#!/usr/bin/env bash
# Reads `swift build` output on stdin and prints a progress line every tenth of the way
# (SwiftPM prints [n/N] per step), every error and warning about ferry's own code, and the
# closing line: a newcomer sees the build move without hundreds of lines.
awk '
  /^\[[0-9]+\/[0-9]+\]/ {
    split(substr($1, 2, length($1) - 2), p, "/")
    step = int(p[1] * 10 / p[2])
    if (step > shown) { shown = step; printf "  building: %d%% (%s of %s steps)\n", step * 10, p[1], p[2]; fflush() }
    next
  }
  /error:|Build complete|Compiling plugin/ { print "  " $0; fflush(); next }
  /warning:/ && /\/Sources\// && !/\.build\// { print "  " $0; fflush() }
'
