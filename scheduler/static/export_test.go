package static

// WithoutKeyLines returns a copy of s without the lines of keys that
// Parse records besides each element's Line, so that tests of the
// static_test package can compare a parsed Spec with a literal one.
func WithoutKeyLines(s *Spec) *Spec {
	out := *s
	out.Hyperepochs = append([]HyperepochSpec(nil), s.Hyperepochs...)
	for i := range out.Hyperepochs {
		out.Hyperepochs[i].resourcesLine = 0
	}
	out.Runnables = append([]RunnableSpec(nil), s.Runnables...)
	for i := range out.Runnables {
		out.Runnables[i].keys = keyLines{}
	}
	return &out
}
