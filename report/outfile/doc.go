// Package outfile names and manages the output files of a long run: files
// named by a time pattern, one per period, that readers only ever see
// whole, a retention count, and plain files reopened on request (SIGHUP).
//
// A [Pattern] is a path whose file name holds strftime-like conversions
// ([Conversions]: %Y %m %d %H %M %S %j %F %s %%), expanded in UTC, as
// window times are. [Files] writes one file per expansion: under
// NAME.tmp while it is written, renamed to NAME by [Files.Commit] (after
// an fsync), so that a reader, a collector or a copy job never reads a
// file that is still growing; an existing NAME is never overwritten (the
// new file takes NAME with ".1" before its extension). With a retention
// count, each commit removes the oldest committed files of the pattern
// beyond it, ordered by the time their names give. A NAME.tmp left by a
// process that was killed is kept as NAME.partial when the name is opened
// again, with a notice.
//
// [Reopener] is a plain file that reopens its path at its next write after
// [Reopener.Reopen], for logrotate's postrotate `kill -HUP`.
//
// Everything here is used from one goroutine but Reopener.Reopen, which
// any goroutine may call.
package outfile
