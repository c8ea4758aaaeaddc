#!/bin/sh
# Counts the TODO markers under the current folder.
grep -rI "TODO" . 2>/dev/null | grep -v '^./.agents/' | wc -l
