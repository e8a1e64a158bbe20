#!/bin/sh
# The command the example image runs: whatever the activity does.
set -eu
echo "extracting for ${STAGE:-demo}"
sleep 2
echo "done"
