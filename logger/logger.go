package logger

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// ErrConfig is wrapped by the error New returns for an invalid option or
// environment variable.
var ErrConfig = errors.New("logger: invalid configuration")

// The environment variables New reads (unless WithEnv says otherwise).
// Explicit options take precedence over them.
const (
	// EnvLevel sets the minimum level written: debug, info (the
	// default), warn (or warning), error, dpanic, panic or fatal (Zap's
	// levels: the last three write only the messages of Zap's DPanic,
	// Panic and Fatal calls, which pz itself does not make), or off (or
	// none), nothing. Any case is read.
	EnvLevel = "PZ_LOG"
	// EnvRanks selects the ranks that print: all, root, or a list of ranks
	// and ranges such as "0,2,4-7".
	EnvRanks = "PZ_LOG_RANKS"
	// EnvFormat selects the encoding: console or json.
	EnvFormat = "PZ_LOG_FORMAT"
	// EnvFile sends the output to a file instead of standard error. Every
	// "{rank}" in the value is replaced by the rank, giving one file per
	// rank; the values "stderr" and "stdout" name those streams.
	EnvFile = "PZ_LOG_FILE"
)

// Format is the encoding of log lines.
type Format int

// The formats.
const (
	// Console is zap's human-readable, tab-separated encoding. The rank is
	// the logger name at the start of each line ("rank 3").
	Console Format = iota
	// JSON writes one JSON object per line with a "rank" field.
	JSON
)

// String returns "console" or "json".
func (f Format) String() string {
	switch f {
	case Console:
		return "console"
	case JSON:
		return "json"
	}
	return "Format(" + strconv.Itoa(int(f)) + ")"
}

// An Option configures New.
type Option func(*config)

// config is New's configuration. The set* flags record explicit options so
// that the environment fills only what the caller left open.
type config struct {
	level      zapcore.Level
	off        bool
	setLevel   bool
	ranks      []int // nil: root only; see allRanks
	allRanks   bool
	root       int
	setRanks   bool
	ranksEnv   string      // EnvRanks' value when it chose the ranks
	envRanges  []rankRange // EnvRanks' list, kept as ranges (never expanded)
	format     Format
	setFormat  bool
	file       string
	setFile    bool
	fileEnv    bool // file came from EnvFile
	writer     io.Writer
	core       zapcore.Core
	noTime     bool
	lookup     func(string) (string, bool)
	zapOptions []zap.Option
}

// WithLevel sets the minimum level that is written (default Info).
func WithLevel(l zapcore.Level) Option {
	return func(c *config) { c.level, c.off, c.setLevel = l, false, true }
}

// WithOff disables all output of both loggers.
func WithOff() Option {
	return func(c *config) { c.off, c.setLevel = true, true }
}

// WithRoot makes rank r the root whose lines the rank-selected logger
// prints by default (default 0). It does not change an explicit rank
// selection.
func WithRoot(r int) Option { return func(c *config) { c.root = r } }

// WithRanks makes exactly the given ranks print on the rank-selected logger.
// Ranks beyond the job are ignored, but New refuses a negative rank, and a
// list naming no rank of the job (nothing would print); WithRanks() with
// no rank silences the rank-selected logger.
func WithRanks(ranks ...int) Option {
	return func(c *config) {
		c.ranks, c.allRanks, c.setRanks = slices.Clone(ranks), false, true
		if c.ranks == nil {
			c.ranks = []int{}
		}
		slices.Sort(c.ranks)
	}
}

// WithAllRanks makes every rank print on the rank-selected logger.
func WithAllRanks() Option {
	return func(c *config) { c.ranks, c.allRanks, c.setRanks = nil, true, true }
}

// WithRootOnly restores the default: only the root prints.
func WithRootOnly() Option {
	return func(c *config) { c.ranks, c.allRanks, c.setRanks = nil, false, true }
}

// WithFormat selects the encoding (default Console).
func WithFormat(f Format) Option {
	return func(c *config) { c.format, c.setFormat = f, true }
}

// WithFile writes to the file named by pattern, with every "{rank}"
// replaced by the rank; "stderr" and "stdout" name those streams. The file
// is created or appended to and closed by Logger.Close. Without "{rank}",
// all ranks append to one file.
func WithFile(pattern string) Option {
	return func(c *config) { c.file, c.setFile, c.writer = pattern, true, nil }
}

// WithWriter writes to w instead of standard error or a file. When several
// in-process ranks share w, it must be safe for concurrent use; each line
// is written with a single Write call.
func WithWriter(w io.Writer) Option {
	return func(c *config) { c.writer, c.file, c.setFile = w, "", true }
}

// WithCore sends entries to core (for example a zaptest/observer core)
// instead of encoding them; level and format settings are ignored, while
// rank selection still applies and every entry carries a "rank" field.
func WithCore(core zapcore.Core) Option { return func(c *config) { c.core = core } }

// WithoutTime omits the timestamp from each line (useful when another layer
// adds one, and for reproducible output).
func WithoutTime() Option { return func(c *config) { c.noTime = true } }

// WithEnv reads the environment variables through lookup instead of
// os.LookupEnv; WithEnv(nil) ignores the environment.
func WithEnv(lookup func(string) (string, bool)) Option {
	// Resolved here, not in the closure: an Option may be applied by several
	// in-process ranks at once and must not write shared state.
	if lookup == nil {
		lookup = func(string) (string, bool) { return "", false }
	}
	return func(c *config) { c.lookup = lookup }
}

// WithZapOptions adds zap options (hooks, caller annotation, a clock, ...)
// to both loggers.
func WithZapOptions(opts ...zap.Option) Option {
	return func(c *config) { c.zapOptions = append(c.zapOptions, opts...) }
}

// Logger holds the two loggers of one rank and the file they write to.
// Both are safe for concurrent use; Close releases the file.
type Logger struct {
	rank   int
	prints bool
	ranked *zap.Logger
	local  *zap.Logger
	sync   func() error
	close  func() error
	file   *fileSink // the file New opened, if any
	once   sync.Once
	err    error
}

// New returns the loggers of rank in a group of size ranks. Options are
// applied in order; the environment variables (EnvLevel, EnvRanks,
// EnvFormat, EnvFile) then fill in whatever the options did not set. An
// invalid option or variable returns an error wrapping ErrConfig that names
// it; a file that cannot be opened returns an error wrapping the open error
// that names the file, the option or variable that named it, and the fix
// (for a missing directory: create it first).
func New(rank, size int, opts ...Option) (*Logger, error) {
	if size < 1 || rank < 0 || rank >= size {
		return nil, fmt.Errorf("%w: rank %d of size %d", ErrConfig, rank, size)
	}
	c := config{level: zapcore.InfoLevel, lookup: os.LookupEnv}
	for _, o := range opts {
		o(&c)
	}
	if err := c.applyEnv(); err != nil {
		return nil, err
	}
	if c.ranksEnv != "" && !slices.ContainsFunc(c.envRanges, func(r rankRange) bool { return r.lo < size }) {
		// A list that fits another job size is fine; one that leaves
		// every rank silent is a mistake.
		return nil, fmt.Errorf("%w: %s=%q names no rank of this job of %d (ranks 0-%d): nothing would print; name one of them, root or all", ErrConfig, EnvRanks, c.ranksEnv, size, size-1)
	}
	if c.ranksEnv == "" && len(c.ranks) > 0 {
		// WithRanks: the same mistakes as in EnvRanks. (WithRanks() with
		// no rank silences Zap on purpose.)
		if c.ranks[0] < 0 {
			return nil, fmt.Errorf("%w: WithRanks%v: rank %d is negative; the ranks of this job are 0-%d", ErrConfig, c.ranks, c.ranks[0], size-1)
		}
		if c.ranks[0] >= size {
			return nil, fmt.Errorf("%w: WithRanks%v names no rank of this job of %d (ranks 0-%d): nothing would print; name one of them, or use WithRootOnly or WithAllRanks (WithRanks() silences Zap on purpose)", ErrConfig, c.ranks, size, size-1)
		}
	}
	if !c.allRanks && c.ranks == nil && c.ranksEnv == "" && (c.root < 0 || c.root >= size) {
		return nil, fmt.Errorf("%w: root %d out of range [0, %d)", ErrConfig, c.root, size)
	}
	if c.format != Console && c.format != JSON {
		return nil, fmt.Errorf("%w: unknown format %v", ErrConfig, c.format)
	}

	l := &Logger{rank: rank, sync: func() error { return nil }, close: func() error { return nil }}
	switch {
	case c.allRanks:
		l.prints = true
	case c.ranksEnv != "":
		l.prints = slices.ContainsFunc(c.envRanges, func(r rankRange) bool { return r.lo <= rank && rank <= r.hi })
	case c.ranks != nil:
		l.prints = slices.Contains(c.ranks, rank)
	default:
		l.prints = rank == c.root
	}

	core, err := c.buildCore(l, rank)
	if err != nil {
		return nil, err
	}
	l.local = zap.New(core, c.zapOptions...)
	if c.core == nil && c.format == Console {
		l.local = l.local.Named("rank " + strconv.Itoa(rank))
	} else {
		l.local = l.local.With(zap.Int("rank", rank))
	}
	if l.prints {
		l.ranked = l.local
	} else {
		l.ranked = zap.NewNop()
	}
	return l, nil
}

// buildCore returns the core both loggers write through and sets l's sync
// and close functions for the sink it opens.
func (c *config) buildCore(l *Logger, rank int) (zapcore.Core, error) {
	if c.off {
		return zapcore.NewNopCore(), nil
	}
	if c.core != nil {
		return c.core, nil
	}
	var ws zapcore.WriteSyncer
	switch {
	case c.writer != nil:
		ws = zapcore.AddSync(c.writer)
	case c.file == "" || c.file == "stderr":
		ws = zapcore.Lock(stream{os.Stderr})
	case c.file == "stdout":
		ws = zapcore.Lock(stream{os.Stdout})
	default:
		name := strings.ReplaceAll(c.file, "{rank}", strconv.Itoa(rank))
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			from := fmt.Sprintf("WithFile(%q)", c.file)
			if c.fileEnv {
				from = fmt.Sprintf("%s=%q", EnvFile, c.file)
			}
			return nil, openError(rank, name, from, err)
		}
		sink := &fileSink{f: f, rank: rank, stderr: os.Stderr}
		l.file = sink
		ws = sink
		l.close = sink.Close
	}
	l.sync = ws.Sync

	ec := zap.NewProductionEncoderConfig()
	ec.EncodeTime = zapcore.ISO8601TimeEncoder
	ec.CallerKey = zapcore.OmitKey
	ec.StacktraceKey = zapcore.OmitKey
	if c.noTime {
		ec.TimeKey = zapcore.OmitKey
	}
	var enc zapcore.Encoder
	if c.format == JSON {
		enc = zapcore.NewJSONEncoder(ec)
	} else {
		ec.EncodeLevel = zapcore.CapitalLevelEncoder
		enc = zapcore.NewConsoleEncoder(ec)
	}
	return zapcore.NewCore(enc, ws, c.level), nil
}

// envLevels are the values of EnvLevel (lower case; any case is read):
// Zap's level names, warning for warn, and off or none for no output.
var envLevels = map[string]struct {
	level zapcore.Level
	off   bool
}{
	"debug":   {level: zapcore.DebugLevel},
	"info":    {level: zapcore.InfoLevel},
	"warn":    {level: zapcore.WarnLevel},
	"warning": {level: zapcore.WarnLevel},
	"error":   {level: zapcore.ErrorLevel},
	"dpanic":  {level: zapcore.DPanicLevel},
	"panic":   {level: zapcore.PanicLevel},
	"fatal":   {level: zapcore.FatalLevel},
	"off":     {off: true},
	"none":    {off: true},
}

// envLevelNames lists envLevels in a bad EnvLevel's error.
const envLevelNames = "debug, info, warn (or warning), error, dpanic, panic, fatal, or off (or none)"

// applyEnv fills the settings that no option set from the environment.
func (c *config) applyEnv() error {
	if v, ok := c.lookup(EnvLevel); ok && !c.setLevel && v != "" {
		l, ok := envLevels[strings.ToLower(v)]
		if !ok {
			return fmt.Errorf("%w: %s=%q: want %s", ErrConfig, EnvLevel, v, envLevelNames)
		}
		if l.off {
			c.off = true
		} else {
			c.level = l.level
		}
	}
	if v, ok := c.lookup(EnvRanks); ok && !c.setRanks && v != "" {
		switch strings.ToLower(v) {
		case "all":
			c.allRanks = true
		case "root":
		default:
			// Kept as ranges: expanded, 0-2000000000 (a typo for 0-2)
			// took every rank's memory, and a bound of MaxInt never ended.
			ranges, problem := parseRankRanges(v)
			if problem != "" {
				return fmt.Errorf("%w: %s=%q: %s: want all, root or a list such as 0,2,4-7", ErrConfig, EnvRanks, v, problem)
			}
			c.envRanges, c.ranksEnv = ranges, v
		}
	}
	if v, ok := c.lookup(EnvFormat); ok && !c.setFormat && v != "" {
		switch strings.ToLower(v) {
		case "json":
			c.format = JSON
		case "console", "text":
			c.format = Console
		default:
			return fmt.Errorf("%w: %s=%q: want json or console", ErrConfig, EnvFormat, v)
		}
	}
	if v, ok := c.lookup(EnvFile); ok && !c.setFile && v != "" {
		c.file, c.fileEnv = v, true
	}
	return nil
}

// MaxParsedRanks is the most ranks ParseRanks returns: a list naming more
// (a range such as 0-2000000000) is refused rather than expanded into
// gigabytes. New reads EnvRanks without expanding it, so any range works
// there.
const MaxParsedRanks = 1 << 20

// ParseRanks parses a list of ranks and inclusive ranges such as
// "0,2,4-7" into sorted, distinct ranks. It refuses (ErrConfig) a list
// that names more than MaxParsedRanks ranks, counting repeats.
func ParseRanks(s string) ([]int, error) {
	ranges, problem := parseRankRanges(s)
	if problem != "" {
		return nil, fmt.Errorf("%w: rank list %q: %s", ErrConfig, s, problem)
	}
	n := 0
	for _, r := range ranges {
		if r.hi-r.lo >= MaxParsedRanks-n { // hi-lo+1 > MaxParsedRanks-n, without overflow
			return nil, fmt.Errorf("%w: rank list %q names more than %d ranks", ErrConfig, s, MaxParsedRanks)
		}
		n += r.hi - r.lo + 1
	}
	out := make([]int, 0, n)
	for _, r := range ranges {
		for k := 0; k <= r.hi-r.lo; k++ { // not r.lo..r.hi: r.hi may be MaxInt
			out = append(out, r.lo+k)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// A rankRange is the inclusive range of ranks [lo, hi] of one item of a
// rank list ("4-7"; a single rank "2" is [2, 2]).
type rankRange struct{ lo, hi int }

// parseRankRanges parses a list such as "0,2,4-7" into its ranges, in the
// order given, without expanding them. For a malformed list it returns
// what is wrong with it instead (`bad range "2-1"`).
func parseRankRanges(s string) (ranges []rankRange, problem string) {
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(strings.TrimSpace(lo))
		if err != nil || a < 0 {
			return nil, fmt.Sprintf("bad rank %q", part)
		}
		b := a
		if isRange {
			b, err = strconv.Atoi(strings.TrimSpace(hi))
			if err != nil || b < a {
				return nil, fmt.Sprintf("bad range %q", part)
			}
		}
		ranges = append(ranges, rankRange{a, b})
	}
	return ranges, ""
}

// Zap returns the rank-selected logger: it prints only on the selected
// ranks (by default the root, rank 0) and discards everything elsewhere, so
// code that runs on every rank can log once. Each line carries the rank.
func (l *Logger) Zap() *zap.Logger { return l.ranked }

// Local returns the process-local logger: it prints on every rank, each
// line carrying the rank. It shares Zap's level, format and output.
func (l *Logger) Local() *zap.Logger { return l.local }

// Prints reports whether this rank's Zap logger prints.
func (l *Logger) Prints() bool { return l.prints }

// Rank returns the rank the logger was made for.
func (l *Logger) Rank() int { return l.rank }

// Sync flushes buffered output.
func (l *Logger) Sync() error { return l.sync() }

// Close flushes and closes the file the logger writes to, if it opened
// one. It is idempotent. Close the logger last: a line logged after Close
// cannot go to the closed file, so it goes to standard error instead,
// after a note (once) naming the file and saying so; nothing is lost.
func (l *Logger) Close() error {
	l.once.Do(func() {
		// Syncing a terminal or pipe fails with EINVAL; that is not an error.
		_ = l.sync()
		if err := l.close(); err != nil {
			l.err = fmt.Errorf("logger: rank %d: close: %w", l.rank, err)
		}
	})
	return l.err
}

// stream is the process's standard error or output as a log sink. Syncing
// a pipe or a terminal fails (EINVAL, ENOTSUP, ENOTTY: there is nothing
// to flush to a disk), which would make the common defer Logger().Sync()
// report an error whenever stderr is piped; stream reports only real
// failures.
type stream struct{ *os.File }

func (s stream) Sync() error {
	err := s.File.Sync()
	if errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOTSUP) || errors.Is(err, syscall.ENOTTY) {
		return nil
	}
	return err
}

// openError explains why the log file name (from the option or variable
// from) could not be opened, and what to do about it. It wraps err.
func openError(rank int, name, from string, err error) error {
	dir := filepath.Dir(name)
	var why string
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if _, serr := os.Stat(dir); serr != nil {
			why = fmt.Sprintf("its directory %s does not exist: create it first (mkdir -p %s) or name a file in an existing directory", dir, dir)
		} else {
			why = "it is a broken symbolic link, or a part of its path does not exist: name a file in an existing directory"
		}
	case errors.Is(err, syscall.EROFS):
		why = fmt.Sprintf("%s is on a read-only file system: name a file on a writable one", dir)
	case errors.Is(err, fs.ErrPermission):
		why = fmt.Sprintf("this process may not write it (is %s, or the file, read-only?): name a file in a directory it can write, or fix the permissions", dir)
	case errors.Is(err, syscall.EISDIR):
		why = fmt.Sprintf("it is a directory: name a file, such as %s", filepath.Join(name, "pz-{rank}.log"))
	case errors.Is(err, syscall.ENOTDIR):
		why = "a part of its path is a file, not a directory: name a file in a directory"
	default:
		why = "name a file this process can create or append to"
	}
	return fmt.Errorf("logger: rank %d: cannot open the log file %s (from %s): %s: %w", rank, name, from, why, err)
}

// fileSink is a log file opened by New. Once closed, the lines still
// logged go to standard error, after a note naming the file, rather than
// being lost to a write error.
type fileSink struct {
	mu     sync.Mutex
	f      *os.File
	rank   int
	stderr io.Writer // where lines go after Close
	closed bool
	warned bool
}

func (s *fileSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		return s.f.Write(p)
	}
	if !s.warned {
		s.warned = true
		fmt.Fprintf(s.stderr, "logger: rank %d: a line was logged after Logger.Close closed the log file %s; it and any later ones go to standard error (log before Close: RuntimeView.Close closes the logger after every finalizer)\n", s.rank, s.f.Name())
	}
	return s.stderr.Write(p)
}

func (s *fileSink) Sync() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	return s.f.Sync()
}

// Close closes the file; it is idempotent.
func (s *fileSink) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	return s.f.Close()
}
