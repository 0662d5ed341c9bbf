// Package testframe builds the Ethernet frames and IP packets the capture,
// filter and pipeline tests send and parse (Ethernet, IPv4, IPv6,
// Transport, ARP, UDP4Frame), so that a frame means the same in every test
// that uses it. It sends nothing.
package testframe
