#!/usr/bin/env bash
# Runs a command that may print nothing for minutes (a go build from an
# empty build cache) and says every PROGRESS_EVERY seconds (30) that it is
# still at work, with the time so far, so that a newcomer's first make test
# or make demo never sits silent:
#
#	scripts/progress.sh 'building flowdedup' go build -o bin/flowdedup ./cmd/flowdedup
#
# The command's output and exit status are its own.
set -uo pipefail
what=$1
shift
every=${PROGRESS_EVERY:-30}
start=$SECONDS
"$@" &
pid=$!
# The ticker ends with the command: it checks every second whether the
# command still runs, so that it never outlives it by more than that.
(
	n=0
	while kill -0 "$pid" 2>/dev/null; do
		sleep 1
		n=$((n + 1))
		if ((n % every == 0)) && kill -0 "$pid" 2>/dev/null; then
			echo "  $what: still at work after $((SECONDS - start)) s"
		fi
	done
) &
ticker=$!
wait "$pid"
status=$?
wait "$ticker" 2>/dev/null
exit "$status"
