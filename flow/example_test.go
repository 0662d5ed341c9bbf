package flow_test

import (
	"fmt"

	"github.com/flowdedup/flowdedup/flow"
)

func ExampleParse() {
	// A raw IPv4 packet: 192.0.2.1 > 198.51.100.2, UDP 5353 > 53.
	packet := []byte{
		0x45, 0, 0, 28, 0, 0, 0, 0, 64, 17, 0, 0,
		192, 0, 2, 1,
		198, 51, 100, 2,
		0x14, 0xe9, 0, 53, 0, 8, 0, 0,
	}
	for _, kind := range []flow.KeyKind{flow.KeySrc, flow.KeyPair, flow.Key5Tuple} {
		k, err := flow.Parse(packet, flow.LinkRaw, kind)
		if err != nil {
			fmt.Println(flow.Reason(err))
			continue
		}
		fmt.Printf("%-6v %v\n", kind, k)
	}
	_, err := flow.Parse(packet[:20], flow.LinkRaw, flow.Key5Tuple)
	fmt.Println(flow.Reason(err))
	// Output:
	// src    192.0.2.1
	// pair   192.0.2.1 > 198.51.100.2
	// 5tuple udp 192.0.2.1:5353 > 198.51.100.2:53
	// truncated
}

func ExampleShardOf() {
	const workers = 4
	k, _ := flow.Parse([]byte{
		0x45, 0, 0, 20, 0, 0, 0, 0, 64, 1, 0, 0,
		10, 0, 0, 1, 10, 0, 0, 2,
	}, flow.LinkIPv4, flow.KeyPair)
	seed := uint64(42) // random per run, unless --seed is given
	h := k.Hash(seed)
	// The filter of the shard observes h itself; the shard comes from a
	// remix of h, so it says nothing about the bits the filter reads.
	shard := flow.ShardOf(h, workers)
	fmt.Println(shard >= 0 && shard < workers)
	// Output: true
}
