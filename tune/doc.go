// Package tune picks the duplicate filter, and its parameters, for a
// user's own traffic, window and memory per core: it replays a sample the
// way `flowdedup replay` would run it, with every filter family over a
// grid of its parameters, against exact ground truth, and ranks them by an
// objective. It is what `flowdedup tune` runs.
//
// [Run] does all of it and returns a [Result]; Result.WriteText, WriteJSON
// and Plot render the answer. [Config] names the samples (capture files,
// read in order as one capture, or eval's stream specs), the key kind,
// window, workers and memory per shard as replay takes them, and the
// [Objective] (min-errors, min-fnr:fpr<=X or min-fpr:fnr<=X).
//
// The counts Run reports for a filter and a seed are exactly the errors
// `flowdedup replay --seed S` makes with it: keys are hashed, dealt to
// shards and windowed as replay does, and a test checks this against the
// pipeline's records. A coarse pass on a thinned sample prunes the grid; the
// best filters of each family then run on the whole sample with several
// seeds, in parallel, within Config.Budget (what did not run is counted,
// not waited for). The pick and the runner-up are compared by a paired
// t-test over the seeds ([Confidence]). The repository's docs/filters.md
// ("How tune works") describes the search and the ranking in full.
//
// Memory: a capture's keys, one key id and truth flag per packet, and per
// seed 9 bytes per packet of dealt hashes (about 40 MB for a million-packet
// sample), plus Parallelism x Workers filters of Mem at once.
//
// Example:
//
//	obj, err := tune.ParseObjective("min-fnr:fpr<=0.01")
//	res, err := tune.Run(ctx, tune.Config{Samples: []string{"day.pcap"}, Key: flow.Key5Tuple, Window: time.Minute, Mem: "64KiB", Objective: obj})
//	err = res.WriteText(os.Stdout)
package tune
