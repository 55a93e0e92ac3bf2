package dist

import "time"

// WithTraceClockSkew gives the rank a clock for the merged trace that is
// skew ahead of the others' (time.Now), as another host's may be.
func WithTraceClockSkew(skew time.Duration) Option { return withTraceClockSkew(skew) }
