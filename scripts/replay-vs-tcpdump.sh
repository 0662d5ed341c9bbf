#!/bin/sh
# replay-vs-tcpdump.sh: wall and CPU time of `flowdedup replay` against
# tcpdump's bare copy and cat of the same capture, measured interleaved.
#
#   scripts/replay-vs-tcpdump.sh [-r ROUNDS] [-n RUNS] [-b BINARY] [-w "1 2 2p0"] [-k KEY] FILE
#
# hyperfine times each command on its own, one after the other, so the load
# other processes put on the machine can favour one command over another.
# This script runs hyperfine (-N, one warmup) on each command in turn for
# RUNS runs, for ROUNDS rounds, rotating which command goes first, and
# compares each round's figures: the ratio of replay to tcpdump is taken
# within a round, where both saw the same load, and the median over the
# rounds is reported with its range. The capture should be in the page
# cache (the warmup runs put it there).
#
# Each command gets two lines: its wall time (hyperfine's median of the
# round) and its CPU time (user + system, hyperfine's mean of the round).
# On a machine that other jobs keep busy the wall time is mostly the wait
# for a CPU; the CPU time is what the command cost, and what it would take
# on the cores it has to itself. The load average is printed before and
# after.
#
# The commands (the ones docs/benchmarks.md gives):
#   cat FILE > /dev/null                      (the I/O floor: the file from the page cache)
#   tcpdump -r FILE -w /dev/null               (tcpdump's bare copy)
#   flowdedup replay --key KEY --out /dev/null --summary '' --workers W FILE
# for each W of -w; "2p0" is --workers 2 --parsers 0 (the reading goroutine
# keys every frame, as before parse goroutines). Each replay line gives its
# ratio to tcpdump and to cat in the same round, and, from the second W on,
# to the first W's (/replay-w1 below).
#
# Needs hyperfine, tcpdump and awk. BINARY defaults to bin/flowdedup
# (make build).
set -eu

rounds=10
runs=5
bin=bin/flowdedup
workers="1 2 2p0"
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
	echo "usage: $0 [-r ROUNDS] [-n RUNS] [-b BINARY] [-w \"1 2 2p0\"] [-k KEY] FILE" >&2
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
		case $w in
		*p*) flags="--workers ${w%p*} --parsers ${w#*p}" ;;
		*) flags="--workers $w" ;;
		esac
		printf "replay-w%s\t%s replay --key %s --out /dev/null --summary '' %s %s\n" "$w" "$bin" "$key" "$flags" "$file"
	done
} >"$tmp/commands"
n=$(wc -l <"$tmp/commands")

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
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
		awk -F, -v r="$round" -v name="$name" 'NR == 2 { print r, name, $4, $5 + $6 }' "$tmp/csv" >>"$tmp/rounds"
		i=$((i + 1))
	done
	round=$((round + 1))
done
echo "load average after:  $(cut -d' ' -f1-3 /proc/loadavg)"

# Per command and measure (wall: field 3, cpu: field 4): the median over
# the rounds, and of its ratio to another command's in the same round,
# with the range.
printf 'rounds %s, runs %s per command per round; ms, median over the rounds (range); ratios within each round\n' "$rounds" "$runs"
summary() { # median and range of the numbers on stdin, one a line
	sort -n | awk '{ v[NR] = $1 } END { printf "%.2f (%.2f..%.2f)", v[int((NR + 1) / 2)], v[1], v[NR] }'
}
ms() { # $1's figures in field $2, in ms
	awk -v name="$1" -v f="$2" '$2 == name { print $f * 1000 }' "$tmp/rounds" | summary
}
ratio() { # $1's figure in field $3 over $2's, round by round
	awk -v a="$1" -v b="$2" -v f="$3" '
		$2 == b { d[$1] = $f }
		$2 == a { t[$1] = $f }
		END { for (r in t) print t[r] / d[r] }' "$tmp/rounds" | summary
}
first=
cut -f1 "$tmp/commands" | while read -r name; do
	for m in wall cpu; do
		f=3
		[ "$m" = cpu ] && f=4
		case $name in
		cat | tcpdump)
			printf '%-12s %-4s %s ms\n' "$name" "$m" "$(ms "$name" $f)"
			continue
			;;
		esac
		printf '%-12s %-4s %s ms  /tcpdump %s  /cat %s' "$name" "$m" "$(ms "$name" $f)" "$(ratio "$name" tcpdump $f)" "$(ratio "$name" cat $f)"
		if [ -n "$first" ] && [ "$first" != "$name" ]; then
			printf '  /%s %s' "$first" "$(ratio "$name" "$first" $f)"
		fi
		printf '\n'
	done
	if [ -z "$first" ]; then
		case $name in
		replay-*) first=$name ;;
		esac
	fi
done
