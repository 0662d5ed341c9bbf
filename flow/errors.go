package flow

import "errors"

// Errors returned by Parse. Parse returns these values themselves, never
// wrapped, so that a failed parse costs no allocation; compare with == or
// [errors.Is].
var (
	// ErrTruncated: the frame ends inside a header the key kind needs.
	ErrTruncated = errors.New("flow: frame truncated inside a needed header")
	// ErrNotIP: the frame is well formed but carries no IPv4 or IPv6
	// packet (ARP, LLDP, PPPoE discovery, an MPLS pseudowire, ...). It is
	// unsupported traffic, not corruption.
	ErrNotIP = errors.New("flow: not an IP packet")
	// ErrBadHeader: a header is invalid (IP version mismatch, IPv4 header
	// length below 5 words, an IP length shorter than its header, ...).
	ErrBadHeader = errors.New("flow: malformed header")
	// ErrUnsupportedLink: Parse does not know the link type.
	ErrUnsupportedLink = errors.New("flow: unsupported link type")
	// ErrTooManyHeaders: the frame stacks more than MaxLinkHeaders VLAN
	// tags, MPLS labels and PPPoE headers, or more than MaxIPv6Headers IPv6
	// extension headers.
	ErrTooManyHeaders = errors.New("flow: too many stacked headers")
	// ErrBadKind: the key kind is not one of KeySrc, KeyDst, KeyPair,
	// Key5Tuple.
	ErrBadKind = errors.New("flow: invalid key kind")
)

// reasons lists the sentinels with their labels, in the order Reasons
// returns them.
var reasons = [...]struct {
	err   error
	label string
}{
	{ErrTruncated, "truncated"},
	{ErrNotIP, "not_ip"},
	{ErrBadHeader, "bad_header"},
	{ErrUnsupportedLink, "unsupported_link"},
	{ErrTooManyHeaders, "too_many_headers"},
	{ErrBadKind, "bad_kind"},
}

// Reason returns a short stable label for err, for use as a metrics label:
// "truncated", "not_ip", "bad_header", "unsupported_link",
// "too_many_headers" or "bad_kind" for the package's errors (wrapped or
// not), "ok" for nil and "other" for any other error. It does not allocate.
func Reason(err error) string {
	if err == nil {
		return "ok"
	}
	for _, r := range reasons {
		if err == r.err {
			return r.label
		}
	}
	for _, r := range reasons {
		if errors.Is(err, r.err) {
			return r.label
		}
	}
	return "other"
}

// Reasons returns every label Reason can return for a non-nil error, so that
// metrics can be registered up front. The caller owns the returned slice.
func Reasons() []string {
	labels := make([]string, 0, len(reasons)+1)
	for _, r := range reasons {
		labels = append(labels, r.label)
	}
	return append(labels, "other")
}

// IsMalformed reports whether err says the frame is corrupt or cut short
// (ErrTruncated, ErrBadHeader, ErrTooManyHeaders), as opposed to traffic the
// parser does not key (ErrNotIP, ErrUnsupportedLink) or a caller mistake
// (ErrBadKind). Window summaries count the former as malformed.
func IsMalformed(err error) bool {
	return errors.Is(err, ErrTruncated) || errors.Is(err, ErrBadHeader) || errors.Is(err, ErrTooManyHeaders)
}
