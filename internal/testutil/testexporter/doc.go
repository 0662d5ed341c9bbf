// Package testexporter runs the real flow exporters that collect's tests
// receive from, over a capture file onto loopback: softflowd (NetFlow v5,
// v9, IPFIX; Softflowd, CaptureSoftflowd) and pmacct's sfprobe (sFlow v5;
// Sfprobe, SfprobeTo, CaptureSfprobe), and pmacct's sFlow collector
// sfacctd (StartSfacctd), which shares pmacct's process handling. A test
// whose exporter is not installed skips, saying why (testutil.SkipOrFail).
package testexporter
