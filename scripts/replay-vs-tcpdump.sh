#!/bin/sh
# replay-vs-tcpdump.sh: wall time of `flowdedup replay` against tcpdump's
# bare copy of the same capture, measured interleaved.
#
#   scripts/replay-vs-tcpdump.sh [-r ROUNDS] [-n RUNS] [-b BINARY] [-w "1 2"] FILE
#
# hyperfine times each command on its own, one after the other, so the load
# other processes put on the machine can favour one command over another.
# This script runs hyperfine (-N, one warmup) on each command in turn for
# RUNS runs, for ROUNDS rounds, rotating which command goes first, and
# compares each round's medians: the ratio of replay to tcpdump is taken
# within a round, where both saw the same load, and the median over the
# rounds is reported with its range. The capture should be in the page
# cache (the warmup runs put it there).
#
# The commands (the ones README's table gives):
#   tcpdump -r FILE -w /dev/null
#   flowdedup replay --key 5tuple --out /dev/null --workers W FILE   (for each W)
#
# Needs hyperfine, tcpdump and awk. BINARY defaults to bin/flowdedup
# (make build).
set -eu

rounds=10
runs=5
bin=bin/flowdedup
workers="1 2"
while getopts r:n:b:w: opt; do
	case $opt in
	r) rounds=$OPTARG ;;
	n) runs=$OPTARG ;;
	b) bin=$OPTARG ;;
	w) workers=$OPTARG ;;
	*) exit 2 ;;
	esac
done
shift $((OPTIND - 1))
if [ $# -ne 1 ]; then
	echo "usage: $0 [-r ROUNDS] [-n RUNS] [-b BINARY] [-w \"1 2\"] FILE" >&2
	exit 2
fi
file=$1
for tool in hyperfine tcpdump "$bin"; do
	command -v "$tool" >/dev/null || { echo "$0: $tool not found" >&2; exit 1; }
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The commands, one per line: a name, a tab, the command.
{
	printf 'tcpdump\ttcpdump -r %s -w /dev/null\n' "$file"
	for w in $workers; do
		printf 'replay-w%s\t%s replay --key 5tuple --out /dev/null --workers %s %s\n' "$w" "$bin" "$w" "$file"
	done
} >"$tmp/commands"
n=$(wc -l <"$tmp/commands")

# Each round: every command, starting with a different one each round.
round=1
while [ "$round" -le "$rounds" ]; do
	i=0
	while [ "$i" -lt "$n" ]; do
		line=$(( (round + i) % n + 1 ))
		name=$(sed -n "${line}p" "$tmp/commands" | cut -f1)
		cmd=$(sed -n "${line}p" "$tmp/commands" | cut -f2)
		hyperfine -N --style none --warmup 1 --runs "$runs" --export-csv "$tmp/csv" "$cmd" >/dev/null 2>&1
		# CSV: command,mean,stddev,median,user,system,min,max (seconds)
		median=$(awk -F, 'NR == 2 { print $4 }' "$tmp/csv")
		printf '%s %s %s\n' "$round" "$name" "$median" >>"$tmp/medians"
		i=$((i + 1))
	done
	round=$((round + 1))
done

# Per command: the median over the rounds of its round medians, and of its
# ratio to tcpdump's median of the same round, with the range.
printf 'rounds %s, runs %s per command per round (medians in ms; ratio = replay / tcpdump in the same round)\n' "$rounds" "$runs"
summary() { # median and range of the numbers on stdin, one a line
	sort -n | awk '{ v[NR] = $1 } END { printf "%.2f (%.2f..%.2f)", v[int((NR + 1) / 2)], v[1], v[NR] }'
}
cut -f1 "$tmp/commands" | while read -r name; do
	ms=$(awk -v name="$name" '$2 == name { print $3 * 1000 }' "$tmp/medians" | summary)
	if [ "$name" = tcpdump ]; then
		printf '%-10s %s ms\n' "$name" "$ms"
		continue
	fi
	ratio=$(awk -v name="$name" '
		$2 == "tcpdump" { td[$1] = $3 }
		$2 == name { t[$1] = $3 }
		END { for (r in t) print t[r] / td[r] }' "$tmp/medians" | summary)
	printf '%-10s %s ms  ratio %s\n' "$name" "$ms" "$ratio"
done
