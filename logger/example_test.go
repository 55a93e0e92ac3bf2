package logger_test

import (
	"os"

	"github.com/pzgo/pz/logger"
)

func Example() {
	// Two ranks of one program; in a real run each is its own process (or
	// in-process rank) and the runtimeview builds these for you.
	for rank := range 2 {
		l, err := logger.New(rank, 2,
			logger.WithEnv(nil), // ignore PZ_LOG* for a reproducible example
			logger.WithWriter(os.Stdout), logger.WithFormat(logger.JSON), logger.WithoutTime())
		if err != nil {
			panic(err)
		}
		l.Zap().Info("printed by the root only")
		l.Local().Info("printed by every rank")
		_ = l.Close()
	}
	// Output:
	// {"level":"info","msg":"printed by the root only","rank":0}
	// {"level":"info","msg":"printed by every rank","rank":0}
	// {"level":"info","msg":"printed by every rank","rank":1}
}
