package bpf

// xdp.c is compiled by bpf2go into xdp_bpfel.o and xdp_bpfel.go (loadXdp and
// the xdp* types, unexported: the package's API is bpf.go's). Only the
// little-endian object is built, for Linux. <linux/types.h> includes
// asm/types.h, which Debian and Ubuntu keep in the multiarch include
// directory. -mcpu=v3 (32-bit subregisters and jumps, Linux 5.1) saves the
// zero extensions of 32-bit values.
//
// Regenerate this object alone with `go generate -run 'xdp\.c' ./bpf/`.
//go:generate sh -c "go tool bpf2go -tags linux -target bpfel -type fd_counters -cflags \"-O2 -g -mcpu=v3 -Wall -Werror -fno-strict-aliasing -I/usr/include/$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || ${BPF2GO_CC:-clang} -print-multiarch)\" xdp xdp.c"
