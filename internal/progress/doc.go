// Package progress draws a one-line progress bar for long-running pzrun apps.
//
// A Bar writes to a terminal only: New returns a Bar that prints nothing when
// its writer is not a terminal (a pipe, a file, CI logs), so machine-readable
// output on stdout and logs on stderr stay clean. Only the root rank should
// create a visible bar; the others pass io.Discard.
//
// The bar redraws at most every 100 ms, so calling Add in a hot loop costs an
// atomic add and a clock read.
package progress
