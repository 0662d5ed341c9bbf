//go:build linux && !(mips || mips64 || ppc64 || s390x)

package cli

import (
	"github.com/spf13/pflag"

	"github.com/flowdedup/flowdedup/capture/afxdp"
)

// afxdpFlags are the flags of --mode afxdp.
type afxdpFlags struct {
	queues string
	mode   afxdp.BindMode
	frames int
}

func (a *afxdpFlags) bind(fs *pflag.FlagSet) {
	a.mode = afxdp.BindAuto
	fs.StringVar(&a.queues, "afxdp-queues", "", "receive `QUEUES` to capture with --mode afxdp, e.g. 0,2,4-7 (default: all); frames of other queues reach the kernel stack")
	fs.Var(typed{&a.mode, "MODE"}, "afxdp-bind", "AF_XDP socket mode: auto (zero-copy where the driver has it, else copy) | copy | zerocopy")
	fs.IntVar(&a.frames, "afxdp-frames", afxdp.DefaultNumFrames, "UMEM frames (and ring entries) per queue, a power of two")
}

// openAFXDP opens the AF_XDP sockets of --mode afxdp.
func openAFXDP(live liveFlags, xf xdpFlags, af afxdpFlags) (*afxdp.Capture, error) {
	queues, err := afxdp.ParseQueues(af.queues)
	if err != nil {
		return nil, usageError{err}
	}
	return afxdp.Open(afxdp.Config{
		Iface: live.iface, Queues: queues, Attach: xf.attach, Bind: af.mode,
		NumFrames: af.frames, PollTimeout: live.pollTimeout,
	})
}
