// Package progress draws a one-line progress bar for long-running pzrun
// apps, with github.com/schollz/progressbar/v3.
//
// A Bar writes to a terminal only: New returns a Bar that prints nothing when
// its writer is not a terminal (a pipe, a file, CI logs), so machine-readable
// output on stdout and logs on stderr stay clean. pzrun passes standard
// error, never standard output. Only the root rank should create a visible
// bar; the others pass io.Discard.
//
// The bar redraws at most every RedrawEvery (and when the work completes),
// so calling Add in a hot loop costs a lock and a clock read; on a disabled
// bar, Add costs a nil check.
package progress
