package testexporter

import "testing"

// TestSfprobeFinished: pmacctd's exit 1 counts as a finished run only
// after its end-of-capture shutdown, every plugin stopped on request.
func TestSfprobeFinished(t *testing.T) {
	const (
		raced = "INFO ( default/core ): PCAP capture file, sleeping for 2 seconds\n" +
			"WARN ( d1/sfprobe ): Shutting down on user request.\n" +
			"WARN ( d0/sfprobe ): Shutting down on user request.\n" +
			"WARN ( default/core ): connection lost to 'd1-sfprobe'; closing connection.\n" +
			"WARN ( default/core ): connection lost to 'd0-sfprobe'; closing connection.\n" +
			"WARN ( default/core ): no more plugins active. Shutting down.\n"
		// A plugin that died on its own: the core stops for want of
		// plugins, in the middle of the capture.
		died = "INFO ( default/core ): PCAP capture file, sleeping for 2 seconds\n" +
			"WARN ( d0/sfprobe ): Shutting down on user request.\n" +
			"WARN ( default/core ): connection lost to 'd1-sfprobe'; closing connection.\n" +
			"WARN ( default/core ): connection lost to 'd0-sfprobe'; closing connection.\n" +
			"WARN ( default/core ): no more plugins active. Shutting down.\n"
	)
	for _, c := range []struct {
		code     int
		out      string
		nplugins int
		want     bool
	}{
		{1, raced, 2, true},
		{1, died, 2, false},
		{1, raced, 3, false},
		{2, raced, 2, false},
		{1, "ERROR ( default/core ): pcap_savefile: unsupported link layer.\n", 1, false},
	} {
		if got := sfprobeFinished(c.code, c.out, c.nplugins); got != c.want {
			t.Errorf("sfprobeFinished(%d, %q, %d) = %v, want %v", c.code, c.out, c.nplugins, got, c.want)
		}
	}
}
