// Package servers runs the real receivers flowdedup's export tests send to,
// each an unprivileged process on loopback that the test's cleanup stops:
// clickhouse-server (StartClickHouse) and nfdump's nfcapd (StartNfcapd),
// with readers of what nfcapd stored (ReadNfdump, ReadNfdumpExporters),
// and the Prometheus server that scrapes flowdedup's metrics
// (StartPrometheus, with instant queries: Query, WaitSample). A
// test whose server is not installed skips, saying why
// (testutil.SkipOrFail).
package servers
