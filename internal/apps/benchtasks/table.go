package benchtasks

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// WriteTable writes recs as an aligned table, one row per record: pz's
// figure, StarPU's and the ratio pz/StarPU, the OpenMP peer's and the
// ratio pz/OpenMP and, when the OpenMP peer ran round by round beside
// pz's rounds, the median of the rounds' ratios (PAIRED, see Record's
// openmp_paired_ratio); "-" where a peer has no figure. Overhead rows are in
// µs per task (lower is better), grain rows in parallel efficiency (higher
// is better). SUBMITTERS reads "1 working" for submitters that are among
// the workers (Options.SubmittersWork), and "1 batch 256" for submitters
// that flush a batch every 256 tasks (Options.Batch). C2C NS is the
// machine's core-to-core round trip during the rounds (c2c_ns).
func WriteTable(w io.Writer, recs []Record) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CASE\tPOLICY\tWORKERS\tSUBMITTERS\tUNIT\tPZ\tSTARPU\tPZ/STARPU\tOPENMP\tPZ/OPENMP\tPAIRED\tC2C NS")
	for _, r := range recs {
		c := string(r.Case)
		if r.Case == CaseGrain {
			c = fmt.Sprintf("grain %dus", r.GrainUS)
		}
		unit := r.Unit
		if unit == "ratio" {
			unit = "efficiency"
		}
		sub := fmt.Sprint(r.Submitters)
		if r.SubmittersWork {
			sub += " working"
		}
		if r.Batch > 0 {
			sub += fmt.Sprintf(" batch %d", r.Batch)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%.3f\t%s\t%s\t%s\t%s\t%s\t%s\n", c, r.Policy, r.Workers, sub, unit, r.Value,
			optional(r.PeerValue, "%.3f"), optional(r.Ratio, "%.2f"), optional(r.OpenMPValue, "%.3f"), optional(r.OpenMPRatio, "%.2f"), optional(r.OpenMPPaired, "%.2f"),
			optional(r.C2CNs, "%.0f"))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("benchtasks: writing the table: %w", err)
	}
	return nil
}

func optional(v *float64, format string) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf(format, *v)
}
