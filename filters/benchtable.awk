# benchtable.awk turns the BenchmarkObserveBatch lines of `go test -bench`
# output into one table: ns per key of one Observe at a time ("one") and of
# ObserveAll ("batch") for each filter at each state size, the median of
# the runs when -count gives several. The blocked layouts (bloom:blocked=1,
# sbf:blocked=1) are rows of their own, under their family's. `make bench`
# prints it.
# Usage: awk -f filters/benchtable.awk BENCH_OUTPUT
$1 ~ /^BenchmarkObserveBatch\// {
	split($1, p, "/")          # BenchmarkObserveBatch, filter, size, one|batch-N
	sub(/-[0-9]+$/, "", p[4])
	for (i = 2; i < NF; i++)
		if ($(i + 1) == "ns/key") {
			k = p[2] SUBSEP p[3] SUBSEP p[4]
			runs[k] = runs[k] " " $i
		}
	if (!(p[2] in seen)) { seen[p[2]] = 1; names[++n] = p[2]; if (length(p[2]) > w) w = length(p[2]) }
	if (!(p[3] in seenSize)) { seenSize[p[3]] = 1; sizes[++m] = p[3] }
}
END {
	if (n == 0) exit
	printf "\nns/key: one Observe at a time (one) and ObserveAll (batch), BenchmarkObserveBatch\n%-*s", w, "filter"
	for (j = 1; j <= m; j++) printf " %9s %9s", sizes[j], ""
	printf "\n%-*s", w, ""
	for (j = 1; j <= m; j++) printf " %9s %9s", "one", "batch"
	printf "\n"
	for (i = 1; i <= n; i++) {
		printf "%-*s", w, names[i]
		for (j = 1; j <= m; j++)
			printf " %9s %9s", median(names[i], sizes[j], "one"), median(names[i], sizes[j], "batch")
		printf "\n"
	}
}
function median(f, s, kind,    k, c, v, i, j, t) {
	k = f SUBSEP s SUBSEP kind
	if (!(k in runs)) return "-"
	c = split(runs[k], v, " ")
	for (i = 2; i <= c; i++)       # insertion sort, numerically
		for (j = i; j > 1 && v[j - 1] + 0 > v[j] + 0; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
	return c % 2 ? v[(c + 1) / 2] : sprintf("%.4g", (v[c / 2] + v[c / 2 + 1]) / 2)
}
