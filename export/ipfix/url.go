package ipfix

import (
	"fmt"
	"net/url"

	"github.com/flowdedup/flowdedup/record"
)

// URL schemes of --export destinations this package serves.
const (
	SchemeUDP = "ipfix"     // ipfix://HOST:PORT: IPFIX over UDP
	SchemeTCP = "ipfix+tcp" // ipfix+tcp://HOST:PORT: IPFIX over TCP
)

// ParseURL returns the Config that sends to the destination of an --export
// URL: ipfix://HOST:PORT (UDP) or ipfix+tcp://HOST:PORT (TCP). HOST is a
// name, an IPv4 address or a bracketed IPv6 address; the port is required
// (collectors listen on many ports, 4739 and 2055 the commonest, so none is
// guessed). Only Network and Address are set: the caller fills in the rest.
//
// Another scheme, a missing or invalid port, credentials, a path, a query or
// a fragment are errors wrapping ErrURL. The name is not resolved here.
func ParseURL(s string) (Config, error) {
	u, err := url.Parse(s)
	if err != nil {
		return Config{}, fmt.Errorf("%w: %v", ErrURL, err)
	}
	var network string
	switch u.Scheme {
	case SchemeUDP:
		network = "udp"
	case SchemeTCP:
		network = "tcp"
	default:
		return Config{}, fmt.Errorf("%w %q: scheme %q is neither %s:// (UDP) nor %s:// (TCP)", ErrURL, s, u.Scheme, SchemeUDP, SchemeTCP)
	}
	if u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return Config{}, fmt.Errorf("%w %q: want %s://HOST:PORT, with no credentials, path or query", ErrURL, s, u.Scheme)
	}
	if err := record.CheckAddress(u.Host); err != nil {
		return Config{}, fmt.Errorf("%w %q: %v", ErrURL, s, err)
	}
	return Config{Network: network, Address: u.Host}, nil
}
