// Package gen writes synthetic packet captures: a known number of packets
// over a known number of distinct flows, with controlled popularity, address
// families, VLAN tags, timing and broken frames. The project's tests, its
// testdata/pcaps and `flowdedup gen` use it; because the generator knows the
// ground truth, [Stats] reports the distinct keys of every kind the capture
// holds, so a replay of the file can be checked against exact numbers.
//
// [Write] writes the capture a [Config] describes to an io.Writer, as pcap
// or pcapng, and returns its Stats; [Config.Validate] refuses a Config that
// cannot be met with a [*ConfigError]. Flows are laid over clients and
// servers so that the distinct source, destination, pair and 5-tuple
// counts all differ; packets draw their flows uniformly or by a Zipf law;
// Malformed, Fragments, Jitter, Interfaces with InterfaceSkew, and CutShort
// add the mess real captures have, each from a random stream of its own.
// The repository's docs/gen.md describes the flow model, the packets and
// the messy options in full.
//
// The output is a function of the Config alone: the same Config gives the
// same bytes (the pcapng section header names no host, the gzip header no
// time). The generator holds about 30 bytes per flow, so Flows is capped at
// [MaxFlows]; the per-packet work allocates nothing.
//
// Example, a capture whose 100000 flows follow a Zipf law:
//
//	f, err := os.Create("big.pcap")
//	st, err := gen.Write(f, gen.Config{Packets: 1000000, Flows: 100000, Zipf: 1.0, Seed: 42})
//	fmt.Println(st.Sources, st.FiveTuples) // distinct source addresses, distinct 5-tuples
package gen
