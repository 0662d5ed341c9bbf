//go:build linux && !(mips || mips64 || ppc64 || s390x)

package xdp

import (
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// AttachMode says how an XDP program is attached to an interface.
type AttachMode string

// Attach modes.
const (
	// AttachAuto tries the driver's native XDP hook and falls back to the
	// generic (SKB) hook when the driver has none.
	AttachAuto AttachMode = "auto"
	// AttachNative uses the driver's hook only: the fast one, before the
	// kernel allocates an skb.
	AttachNative AttachMode = "native"
	// AttachGeneric uses the generic hook, which every interface has but
	// which runs after skb allocation, at a fraction of native speed.
	AttachGeneric AttachMode = "generic"
)

// ParseAttachMode returns the AttachMode named s ("" is AttachAuto).
func ParseAttachMode(s string) (AttachMode, error) {
	switch m := AttachMode(s); m {
	case "":
		return AttachAuto, nil
	case AttachAuto, AttachNative, AttachGeneric:
		return m, nil
	}
	return "", fmt.Errorf("xdp: unknown XDP attach mode %q: valid modes are auto, native, generic", s)
}

// String returns the mode's name.
func (m AttachMode) String() string { return string(m) }

// Set implements flag.Value.
func (m *AttachMode) Set(s string) error {
	v, err := ParseAttachMode(s)
	if err != nil {
		return err
	}
	*m = v
	return nil
}

// Errors.
var (
	// ErrNoInterface: the interface does not exist (in this namespace).
	ErrNoInterface = errors.New("xdp: no such interface")
	// ErrPermission: the process may not load BPF programs or attach them
	// (it needs CAP_BPF, CAP_PERFMON and CAP_NET_ADMIN, or root).
	ErrPermission = errors.New("xdp: permission denied: loading and attaching XDP programs needs CAP_BPF, CAP_PERFMON and CAP_NET_ADMIN (or root)")
	// ErrUnsupported: the kernel or the interface's driver lacks a feature
	// the mode needs (the error says which).
	ErrUnsupported = errors.New("xdp: not supported")
)

// InterfaceIndex returns the index of the interface called name.
func InterfaceIndex(name string) (int, error) {
	if name == "" {
		return 0, fmt.Errorf("%w: no interface given (--iface)", ErrNoInterface)
	}
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return 0, fmt.Errorf("%w %q", ErrNoInterface, name)
	}
	return ifi.Index, nil
}

// Attach attaches prog to the interface with index ifindex through a BPF
// link, so that the kernel detaches it when the last reference to the link
// goes, including when the process is killed. It returns the link and the
// mode it used: with AttachAuto, native when the driver takes it, else
// generic.
func Attach(prog *ebpf.Program, ifindex int, mode AttachMode) (link.Link, AttachMode, error) {
	try := func(m AttachMode) (link.Link, error) {
		flags := link.XDPDriverMode
		if m == AttachGeneric {
			flags = link.XDPGenericMode
		}
		return link.AttachXDP(link.XDPOptions{Program: prog, Interface: ifindex, Flags: flags})
	}
	switch mode {
	case AttachNative, AttachGeneric:
		l, err := try(mode)
		if err != nil {
			return nil, "", attachError(err, mode)
		}
		return l, mode, nil
	}
	l, err := try(AttachNative)
	if err == nil {
		return l, AttachNative, nil
	}
	if IsPermission(err) {
		return nil, "", attachError(err, AttachNative)
	}
	l, gerr := try(AttachGeneric)
	if gerr != nil {
		return nil, "", fmt.Errorf("native: %w; generic: %w", attachError(err, AttachNative), attachError(gerr, AttachGeneric))
	}
	return l, AttachGeneric, nil
}

// IsPermission reports whether err is the kernel refusing for want of a capability.
func IsPermission(err error) bool {
	return errors.Is(err, os.ErrPermission) || errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES)
}

// attachError explains an attach failure.
func attachError(err error, mode AttachMode) error {
	switch {
	case IsPermission(err):
		return fmt.Errorf("%w: %v", ErrPermission, err)
	case errors.Is(err, syscall.EBUSY), errors.Is(err, syscall.EEXIST):
		return fmt.Errorf("xdp: another XDP program is already attached to the interface (%s mode): %w", mode, err)
	case errors.Is(err, ebpf.ErrNotSupported), errors.Is(err, syscall.EOPNOTSUPP), errors.Is(err, syscall.EINVAL):
		return fmt.Errorf("%w: attaching XDP in %s mode (kernel 5.9+ for XDP links; native mode needs driver support): %v", ErrUnsupported, mode, err)
	}
	return fmt.Errorf("xdp: attaching XDP in %s mode: %w", mode, err)
}

// LoadError explains a failure to load a BPF program or create its maps.
func LoadError(err error) error {
	// A verifier rejection also matches os.ErrPermission (EACCES): tell
	// it apart first. It means a kernel whose verifier is older or
	// stricter than the one the program was written for.
	var ve *ebpf.VerifierError
	if errors.As(err, &ve) {
		// The verifier allows pointer arithmetic on map values only to
		// a process with CAP_PERFMON (or CAP_SYS_ADMIN): without it the
		// program is refused "for !root", which is a permission problem,
		// not an old kernel.
		if !perfmonCapable() {
			return fmt.Errorf("%w: the kernel's verifier accepts the XDP program only from a process with CAP_PERFMON (or CAP_SYS_ADMIN), which this one lacks: %v", ErrPermission, ve)
		}
		return fmt.Errorf("%w: the kernel's verifier rejected the XDP program (kernel too old? 5.8+ is needed): %v", ErrUnsupported, ve)
	}
	switch {
	case IsPermission(err):
		// The library's advice about RLIMIT_MEMLOCK does not apply:
		// kernels with BPF ring buffers account BPF memory to the
		// cgroup, and Open lifts the limit for older ones anyway.
		return ErrPermission
	case errors.Is(err, ebpf.ErrNotSupported):
		return fmt.Errorf("%w: the kernel is too old (BPF ring buffers need 5.8, XDP links 5.9): %v", ErrUnsupported, err)
	}
	return fmt.Errorf("xdp: loading the XDP program: %w", err)
}

// perfmonCapable reports whether the calling thread holds CAP_PERFMON or
// CAP_SYS_ADMIN in its effective set, as the kernel's perfmon_capable()
// asks. When the set cannot be read it says yes, so that the error names
// the verifier's own reason rather than a guess.
func perfmonCapable() bool {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return true
	}
	has := func(c uint) bool { return data[c/32].Effective&(1<<(c%32)) != 0 }
	return has(unix.CAP_PERFMON) || has(unix.CAP_SYS_ADMIN)
}
