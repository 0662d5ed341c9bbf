# benchtable.awk turns the BenchmarkObserveBatch lines of `go test -bench`
# output into one table: ns per key of one Observe at a time ("one") and of
# ObserveAll ("batch") for each filter at each state size, as `make bench`
# prints it. Usage: awk -f filters/benchtable.awk BENCH_OUTPUT
$1 ~ /^BenchmarkObserveBatch\// {
	split($1, p, "/")          # BenchmarkObserveBatch, filter, size, one|batch-N
	sub(/-[0-9]+$/, "", p[4])
	for (i = 2; i < NF; i++)
		if ($(i + 1) == "ns/key")
			ns[p[2], p[3], p[4]] = $i
	if (!((p[2]) in seen)) { seen[p[2]] = 1; names[++n] = p[2] }
	if (!((p[3]) in seenSize)) { seenSize[p[3]] = 1; sizes[++m] = p[3] }
}
END {
	if (n == 0) exit
	printf "\nns/key, one Observe at a time vs ObserveAll (BenchmarkObserveBatch)\n%-10s", "filter"
	for (j = 1; j <= m; j++) printf " %9s %9s", sizes[j] " one", "batch"
	printf "\n"
	for (i = 1; i <= n; i++) {
		printf "%-10s", names[i]
		for (j = 1; j <= m; j++)
			printf " %9s %9s", cell(names[i], sizes[j], "one"), cell(names[i], sizes[j], "batch")
		printf "\n"
	}
}
function cell(f, s, k) { return ((f, s, k) in ns) ? ns[f, s, k] : "-" }
