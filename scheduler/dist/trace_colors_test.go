package dist_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
	"github.com/pzgo/pz/scheduler/dist"
)

// The merged Gantt chart gives the codelets the palette's colours in the
// order the program submitted their first tasks, which every rank
// submits alike, not in the order of the tasks rank 0 happened to run:
// a codelet submitted first but run only on other ranks at first kept
// its turn until rank 0 ran one, so the colours changed with the ranks'
// shares of the work (pzrun cholesky drew gemm yellow and syrk purple on
// a 2x2 grid, gemm purple and syrk yellow on 3x2). Here "first" is
// submitted first, on rank 1; "second" next, on rank 0; then "first" on
// rank 0: "first" must take the palette's first colour, as it does on
// one rank.
func TestMergedGanttColorsFollowSubmissionOrder(t *testing.T) {
	nop := func(name string) *scheduler.Codelet {
		return &scheduler.Codelet{Name: name, CPU: func(*scheduler.Call) error { return nil }}
	}
	first, second := nop("first"), nop("second")
	path := filepath.Join(t.TempDir(), "order.json")
	err := runRanksWith(t, 2, []scheduler.Option{scheduler.WithWorkers(1), scheduler.WithStats(true)}, func(ctx context.Context, d *dist.Scheduler) error {
		hs, err := onePerRank[int64](d, 4)
		if err != nil {
			return err
		}
		if err := d.Submit(ctx, first, dist.RW(hs[1])); err != nil {
			return err
		}
		if err := d.Submit(ctx, second, dist.RW(hs[0])); err != nil {
			return err
		}
		if err := d.Submit(ctx, first, dist.RW(hs[0])); err != nil {
			return err
		}
		if err := d.WaitAll(ctx); err != nil {
			return err
		}
		return d.WriteTraceFiles(ctx, path, 0)
	})
	require.NoError(t, err)
	svg, err := os.ReadFile(filepath.Join(filepath.Dir(path), "order.svg"))
	require.NoError(t, err)
	swatch := func(name string) string {
		m := regexp.MustCompile(`fill="(#[0-9a-f]{6})"/><text [^>]*>` + name + `: `).FindSubmatch(svg)
		require.NotNil(t, m, "no legend entry for %s in\n%s", name, svg)
		return string(m[1])
	}
	require.Equal(t, "#4e79a7", swatch("first"), "the codelet submitted first takes the palette's first colour (blue)")
	require.Equal(t, "#f28e2b", swatch("second"), "the codelet submitted second takes the palette's second colour (orange)")
}
