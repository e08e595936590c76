#!/bin/sh
# Stands in for tfc-compile next to a copy of tfc-bench: records the
# directory of -o's file (tfc-bench's temporary directory) in $FAKE_LOG,
# sends tfc-bench (its parent) $FAKE_SIGNAL, and waits to be killed.
# tfc-bench runs it as: tfc-compile SRC -o LIB --target=T ...
ls -d "${3%/*}" >> "$FAKE_LOG"
kill -"$FAKE_SIGNAL" "$PPID"
exec sleep 20
