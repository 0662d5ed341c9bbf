//go:build linux && !(mips || mips64 || ppc64 || s390x)

package cli

import (
	"github.com/spf13/pflag"

	"github.com/flowdedup/flowdedup/capture/afpacket"
	"github.com/flowdedup/flowdedup/fastpath"
)

// afxdpFlags are the flags of --mode afxdp.
type afxdpFlags struct {
	queues string
	mode   fastpath.XSKBindMode
	frames int
}

func (a *afxdpFlags) bind(fs *pflag.FlagSet) {
	a.mode = fastpath.XSKBindAuto
	fs.StringVar(&a.queues, "afxdp-queues", "", "receive `QUEUES` to capture with --mode afxdp, e.g. 0,2,4-7 (default: all); frames of other queues reach the kernel stack")
	fs.Var(typed{&a.mode, "MODE"}, "afxdp-bind", "AF_XDP socket mode: auto (zero-copy where the driver has it, else copy) | copy | zerocopy")
	fs.IntVar(&a.frames, "afxdp-frames", fastpath.DefaultAFXDPNumFrames, "UMEM frames (and ring entries) per queue, a power of two")
}

// openAFXDP opens the AF_XDP sockets of --mode afxdp.
func openAFXDP(afp afpacket.Config, xf xdpFlags, af afxdpFlags) (*fastpath.AFXDP, error) {
	queues, err := fastpath.ParseQueues(af.queues)
	if err != nil {
		return nil, usageError{err}
	}
	return fastpath.OpenAFXDP(fastpath.AFXDPConfig{
		Iface: afp.Iface, Queues: queues, Attach: xf.attach, Bind: af.mode,
		NumFrames: af.frames, PollTimeout: afp.PollTimeout,
	})
}
