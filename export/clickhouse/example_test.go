package clickhouse_test

import (
	"fmt"

	"github.com/flowdedup/flowdedup/export/clickhouse"
	"github.com/flowdedup/flowdedup/flow"
)

// An --export URL gives the server, the database and, optionally, who logs
// in and where the password is; the rest of the Config comes from other
// flags. Config reads the password file, here from the process's files
// (OSEnv).
func ExampleParseURL() {
	for _, s := range []string{
		"clickhouse://127.0.0.1:8123/flows",
		"clickhouse://writer@[2001:db8::7]:8123/netflows?password_file=/nonexistent/clickhouse-password",
		"clickhouse://127.0.0.1/flows",
		"clickhouse://127.0.0.1:8123/",
	} {
		u, err := clickhouse.ParseURL(s)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Printf("%s %s user=%q password_file=%q\n", u.Address, u.Database, u.User, u.PasswordFile)
		cfg, err := u.Config(clickhouse.OSEnv())
		if err != nil {
			fmt.Println(err)
			continue
		}
		cfg.Kind = flow.Key5Tuple // --key
		cfg.Observer = "edge-1"   // --observer
	}
	// Output:
	// 127.0.0.1:8123 flows user="" password_file=""
	// [2001:db8::7]:8123 netflows user="writer" password_file="/nonexistent/clickhouse-password"
	// clickhouse: cannot read the password file "/nonexistent/clickhouse-password": no such file or directory
	// clickhouse: invalid export URL "clickhouse://127.0.0.1/flows": address "127.0.0.1": want HOST:PORT (address 127.0.0.1: missing port in address)
	// clickhouse: invalid export URL "clickhouse://127.0.0.1:8123/": no database: want clickhouse://HOST:PORT/DB
}
