package ipfix_test

import (
	"fmt"

	"github.com/flowdedup/flowdedup/export/ipfix"
	"github.com/flowdedup/flowdedup/flow"
)

// An --export URL gives the transport and the collector; the rest of the
// Config comes from other flags.
func ExampleParseURL() {
	for _, u := range []string{"ipfix://192.0.2.7:4739", "ipfix+tcp://[2001:db8::7]:4739", "ipfix://192.0.2.7"} {
		cfg, err := ipfix.ParseURL(u)
		if err != nil {
			fmt.Println(err)
			continue
		}
		cfg.Kind = flow.Key5Tuple // --key
		cfg.ObservationDomain = 1 // this router's ID at the collector
		fmt.Println(cfg.Network, cfg.Address)
	}
	// Output:
	// udp 192.0.2.7:4739
	// tcp [2001:db8::7]:4739
	// ipfix: invalid export URL "ipfix://192.0.2.7": address "192.0.2.7": want HOST:PORT (address 192.0.2.7: missing port in address)
}
