// Package pcapfile reads capture files as a capture.Source: pcap (micro- or
// nanosecond timestamps, either byte order) and pcapng (any number of
// sections and interfaces, each with its link type and timestamp
// resolution), plain or gzip-compressed, several files one after another.
// Open checks every file's header up front and returns a *Reader.
//
// Files are streamed through one fixed buffer: memory does not grow with
// the size or the number of the files, and reading a record allocates
// nothing. Packets are handed out zero-copy: a capture.Packet's Data is
// valid until the next call to Next; NextBatch hands out a buffer's worth of
// records at once, valid until ReleaseBatch, so that other goroutines can
// parse them while the Reader reads on. A Reader is used by one goroutine
// (ReleaseBatch excepted).
//
// Damage is reported, never trusted: a record whose header cannot be right,
// or a file that ends inside its header or a record (an empty file too),
// ends its file with an *Error wrapping capture.ErrCorrupt, naming the file,
// record and offset, and the next Next moves on to the next file. Open
// fails only for files that are missing or of another kind. Lengths
// are checked against MaxCaptureLength and the enclosing block before
// anything is read, so a file cannot make the reader allocate what it
// claims.
//
// The formats are framed here rather than by gopacket's pcapgo, which the
// fuzz test uses as its reference decoder; Reader says what pcapgo v1.7.7
// gets wrong. Apart from opening and reading files the package makes no
// system calls.
package pcapfile
