#!/bin/sh
# replay-vs-tcpdump.sh: wall time of `flowdedup replay` against tcpdump's
# bare copy of the same capture, measured interleaved.
#
#   scripts/replay-vs-tcpdump.sh [-r ROUNDS] [-n RUNS] [-b BINARY] [-w "1 2"] [-k KEY] FILE
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
# The commands (the ones docs/benchmarks.md gives):
#   cat FILE > /dev/null                      (the I/O floor: the file from the page cache)
#   tcpdump -r FILE -w /dev/null               (tcpdump's bare copy)
#   flowdedup replay --key KEY --out /dev/null --workers W FILE   (for each W)
# Each replay line gives its ratio to tcpdump and to cat in the same round,
# and, from the second W on, to the first W's (w2/w1 below).
#
# Needs hyperfine, tcpdump and awk. BINARY defaults to bin/flowdedup
# (make build).
set -eu

rounds=10
runs=5
bin=bin/flowdedup
workers="1 2"
key=src
while getopts r:n:b:w:k: opt; do
	case $opt in
	r) rounds=$OPTARG ;;
	n) runs=$OPTARG ;;
	b) bin=$OPTARG ;;
	w) workers=$OPTARG ;;
	k) key=$OPTARG ;;
	*) exit 2 ;;
	esac
done
shift $((OPTIND - 1))
if [ $# -ne 1 ]; then
	echo "usage: $0 [-r ROUNDS] [-n RUNS] [-b BINARY] [-w \"1 2\"] [-k KEY] FILE" >&2
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
	printf 'cat\tsh -c "cat %s > /dev/null"\n' "$file"
	printf 'tcpdump\ttcpdump -r %s -w /dev/null\n' "$file"
	for w in $workers; do
		printf 'replay-w%s\t%s replay --key %s --out /dev/null --workers %s %s\n' "$w" "$bin" "$key" "$w" "$file"
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
ratio() { # median and range over the rounds of $1's median / $2's
	awk -v a="$1" -v b="$2" '
		$2 == b { d[$1] = $3 }
		$2 == a { t[$1] = $3 }
		END { for (r in t) print t[r] / d[r] }' "$tmp/medians" | summary
}
first=
cut -f1 "$tmp/commands" | while read -r name; do
	ms=$(awk -v name="$name" '$2 == name { print $3 * 1000 }' "$tmp/medians" | summary)
	case $name in
	cat | tcpdump)
		printf '%-10s %s ms\n' "$name" "$ms"
		continue
		;;
	esac
	printf '%-10s %s ms  /tcpdump %s  /cat %s' "$name" "$ms" "$(ratio "$name" tcpdump)" "$(ratio "$name" cat)"
	if [ -z "$first" ]; then
		first=$name
		printf '\n'
	else
		printf '  /%s %s\n' "$first" "$(ratio "$name" "$first")"
	fi
done
