package clickhouse_test

import (
	"fmt"

	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/report/clickhouse"
)

// An --export URL gives the server, the database and, optionally, who logs
// in; the rest of the Config comes from other flags.
func ExampleParseURL() {
	for _, u := range []string{
		"clickhouse://127.0.0.1:8123/flows",
		"clickhouse://writer:secret@[2001:db8::7]:8123/netflows",
		"clickhouse://127.0.0.1/flows",
		"clickhouse://127.0.0.1:8123/",
	} {
		cfg, err := clickhouse.ParseURL(u)
		if err != nil {
			fmt.Println(err)
			continue
		}
		cfg.Kind = flow.Key5Tuple // --key
		cfg.Observer = "edge-1"   // --observer
		fmt.Printf("%s %s user=%q\n", cfg.Address, cfg.Database, cfg.User)
	}
	// Output:
	// 127.0.0.1:8123 flows user=""
	// [2001:db8::7]:8123 netflows user="writer"
	// clickhouse: invalid export URL "clickhouse://127.0.0.1/flows": address "127.0.0.1": want HOST:PORT (address 127.0.0.1: missing port in address)
	// clickhouse: invalid export URL "clickhouse://127.0.0.1:8123/": no database: want clickhouse://HOST:PORT/DB
}
