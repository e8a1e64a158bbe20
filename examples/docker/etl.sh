#!/bin/sh
# The command the example image runs: whatever the activity does. The data
# files are the wrapper's, inside the container (no volume): progress goes
# to $WHIMBREL_PROGRESS, the output — small, or a reference to big data —
# to $WHIMBREL_OUTPUT.
set -eu
echo "extracting for ${STAGE:-demo}"
if [ -n "${WHIMBREL_PROGRESS:-}" ]; then
  echo "extracting" > "$WHIMBREL_PROGRESS"
fi
sleep 2
if [ -n "${WHIMBREL_OUTPUT:-}" ]; then
  echo "{\"rows\": \"s3://example-bucket/${STAGE:-demo}/rows.csv\"}" > "$WHIMBREL_OUTPUT"
fi
echo "done"
