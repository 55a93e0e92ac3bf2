// Package progress draws a one-line progress bar for long-running pzrun
// apps, with github.com/schollz/progressbar/v3.
//
// A Bar draws on a terminal. On a file that is not one (a pipe, as under
// mpirun, where every rank's stderr is a pipe; CI logs; a log file) it
// writes a plain line every LogEvery instead, once the work has lasted
// that long, and a last line when it ends: short runs print nothing, so
// logs stay clean, and long ones say how far they got. On any other
// writer it prints nothing. pzrun passes standard error, never standard
// output, so machine-readable output stays clean. Only the root rank
// should create a visible bar; the others pass io.Discard.
//
// The bar redraws at most every RedrawEvery (and when the work completes),
// so calling Add in a hot loop costs a lock and a clock read; on a bar
// that writes lines, Add reads no clock (a timer marks each line due, and
// Done stops it; the bar holds no goroutine), so it costs two atomic
// operations until a line is due; on a disabled bar, Add costs a nil
// check.
package progress
