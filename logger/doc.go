// Package logger builds the zap loggers of one rank.
//
// Every rank of a parallel program runs the same code, so a plain logger
// prints each message once per rank. New returns, for one rank, two
// loggers that share level, format and output:
//
//   - Logger.Zap, the rank-selected logger: by default only the root (rank
//     0) prints, so code that runs everywhere logs once. RuntimeView.Logger
//     returns it.
//   - Logger.Local, the process-local logger: every rank prints.
//     ResourceSet.Logger returns it.
//
// Every line carries the rank: in JSON as a "rank" field, on the console
// as the logger name ("rank 3") at the start of the line.
//
//	l, err := logger.New(rank, size)           // reads PZ_LOG* from the environment
//	l.Zap().Info("starting", zap.Int("ranks", size))
//	defer l.Close()
//
// # Configuration
//
// Options set the level (WithLevel, WithOff), the ranks that print
// (WithRoot, WithRanks, WithAllRanks, WithRootOnly), the encoding
// (WithFormat: Console or JSON), and the output (standard error by
// default, WithFile, WithWriter, or WithCore for a zap core such as
// zaptest/observer). The environment fills whatever the options leave
// open, so a user can turn on debugging without recompiling:
//
//	PZ_LOG=debug|info|warn|error|off     level (default info; see EnvLevel)
//	PZ_LOG_RANKS=all|root|0,2,4-7        ranks that print on Zap (default root; a list naming no rank of the job is an error)
//	PZ_LOG_FORMAT=console|json           encoding (default console)
//	PZ_LOG_FILE=out/pz-{rank}.log        one file per rank ({rank} is replaced)
//
// A log file is created in an existing directory (New does not make
// directories; when one is missing, its error says so and names it) and
// appended to. A line logged after Close cannot reach the closed file: it
// goes to standard error instead, after a one-time note naming the file.
//
// PZ_LOG also takes warning (warn), none (off) and Zap's dpanic, panic and
// fatal, which write only the messages of Zap's DPanic, Panic and Fatal
// calls (pz makes none); any case is read. An invalid value makes New fail
// with an error wrapping ErrConfig that names the variable and the accepted
// values. WithEnv replaces the lookup (WithEnv(nil) ignores the
// environment).
//
// The package holds no global state: in-process ranks each build their own
// Logger. A writer shared by several of them must be safe for concurrent
// use.
package logger
