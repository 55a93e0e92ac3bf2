package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/pzgo/pz/hardware"
	"github.com/pzgo/pz/internal/apps/tiled"
	"github.com/pzgo/pz/resourceset"
	"github.com/pzgo/pz/runtimeview"
)

// infoRecord is one line of `pzrun info --json`. Its field names are a
// stable interface, documented in docs/pzrun.md.
type infoRecord struct {
	Rank              int            `json:"rank"`
	Size              int            `json:"size"`
	Host              string         `json:"host"`
	Backend           string         `json:"backend"`
	LogicalCores      int            `json:"cpu_logical_cores"`
	PhysicalCores     int            `json:"cpu_physical_cores"`
	AllowedCores      int            `json:"cpu_allowed_cores"`
	CPUQuota          float64        `json:"cpu_quota"`
	NUMANodes         int            `json:"numa_nodes"`
	GOMAXPROCS        int            `json:"gomaxprocs"`
	GOMAXPROCSReason  string         `json:"gomaxprocs_reason"`
	RAMTotalBytes     uint64         `json:"ram_total_bytes"`
	RAMAvailableBytes uint64         `json:"ram_available_bytes"`
	GPUs              []hardware.GPU `json:"gpus"`
	// Devices are the rank's device components (simulated devices with
	// PZ_NSIM), omitted when none.
	Devices []hardware.Accelerator `json:"devices,omitempty"`
	// Warnings are the parts of the rank's hardware discovery that
	// failed (hardware.Machine.Warnings: a file it could not read, and
	// so a 0 above that means unknown), omitted when none.
	Warnings []string `json:"warnings,omitempty"`
}

// procsFacts is what only the rank itself knows: how its runtime is sized.
type procsFacts struct {
	GOMAXPROCS int
	Reason     string
}

func myProcs(rt *runtimeview.RuntimeView) procsFacts {
	f := procsFacts{GOMAXPROCS: runtime.GOMAXPROCS(0), Reason: "in-process ranks share the process's GOMAXPROCS"}
	if w := rt.MPIWorld(); w != nil && rt.Backend() == runtimeview.MPI {
		f.Reason = w.Procs().Reason
	}
	return f
}

func infoApp() app {
	return app{
		name:    "info",
		summary: "every rank's resource set (host, CPU cores, RAM, GPUs, GOMAXPROCS) as a table, or --json",
		setup: func(fs *flag.FlagSet, e *env) func(context.Context, *runtimeview.RuntimeView) error {
			asJSON := fs.Bool("json", false, "print one JSON object per rank (fields: see docs/pzrun.md)")
			return func(ctx context.Context, rt *runtimeview.RuntimeView) error {
				facts, ok, err := resourceset.GatherValues(ctx, rt.ResourceSet(0), myProcs(rt))
				if err != nil || !ok {
					return err
				}
				recs := make([]infoRecord, rt.Size())
				for i := range recs {
					recs[i] = newInfoRecord(rt, i, facts[i])
				}
				if *asJSON {
					for _, r := range recs {
						if err := writeJSON(e.stdout, r); err != nil {
							return err
						}
					}
					return nil
				}
				return infoTable(e.stdout, recs)
			}
		},
	}
}

func newInfoRecord(rt *runtimeview.RuntimeView, rank int, f procsFacts) infoRecord {
	rs := rt.ResourceSet(rank)
	cpu := rs.CPU()
	return infoRecord{
		Rank: rank, Size: rt.Size(), Host: rs.Host().Hostname, Backend: string(rt.Backend()),
		LogicalCores: cpu.LogicalCores, PhysicalCores: cpu.PhysicalCores,
		AllowedCores: len(cpu.AllowedCPUs), CPUQuota: cpu.CgroupCPUQuota, NUMANodes: len(cpu.NUMANodes),
		GOMAXPROCS: f.GOMAXPROCS, GOMAXPROCSReason: f.Reason,
		RAMTotalBytes: rs.RAM().TotalBytes(), RAMAvailableBytes: rs.RAM().AvailableBytes(),
		GPUs: rs.GPUs(), Devices: rs.Machine().Accelerators, Warnings: rs.Machine().Warnings,
	}
}

func infoTable(w io.Writer, recs []infoRecord) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RANK\tHOST\tCORES(log/phys/allowed)\tNUMA\tGOMAXPROCS\tRAM total\tRAM avail\tGPUs")
	for _, r := range recs {
		gpus := "-"
		var parts []string
		for _, g := range r.GPUs {
			parts = append(parts, fmt.Sprintf("%s (%s, %d SMs)", g.Name, gib(g.MemoryTotalBytes), g.SMs))
		}
		for _, d := range r.Devices {
			parts = append(parts, fmt.Sprintf("%s (%s, %s)", d.Name, d.Kind, gib(uint64(d.MemoryBytes))))
		}
		if len(parts) > 0 {
			gpus = strings.Join(parts, "; ")
		}
		total, avail := "unknown", "unknown"
		if r.RAMTotalBytes > 0 {
			total, avail = gib(r.RAMTotalBytes), gib(r.RAMAvailableBytes)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s/%s/%s\t%d\t%d\t%s\t%s\t%s\n", r.Rank, r.Host,
			count(r.LogicalCores), count(r.PhysicalCores), count(r.AllowedCores), r.NUMANodes, r.GOMAXPROCS,
			total, avail, gpus)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// What the discovery could not read, under the table: a "?" or an
	// "unknown" above says why.
	for _, r := range recs {
		for _, msg := range r.Warnings {
			if _, err := fmt.Fprintf(w, "rank %d: warning: %s\n", r.Rank, msg); err != nil {
				return err
			}
		}
	}
	return nil
}

// count writes a CPU count, "?" when it is unknown (0: package hardware
// could not read it).
func count(n int) string {
	if n <= 0 {
		return "?"
	}
	return strconv.Itoa(n)
}

// gib writes a size in GiB to a tenth ("23.5 GiB"), or, below a GiB,
// which would read "0.2 GiB" for a 256 MiB limit, in the unit that fits
// ("256.0 MiB", "0 B").
func gib(b uint64) string {
	if b < 1<<30 {
		return tiled.FormatBytes(float64(b))
	}
	return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30))
}

// writeJSON writes v as one line of JSON.
func writeJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}
