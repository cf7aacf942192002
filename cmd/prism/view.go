package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"

	"github.com/prismsbi/prism/data"
	"github.com/prismsbi/prism/dmrifit"
	"github.com/prismsbi/prism/family"
	"github.com/prismsbi/prism/obsfile"
	"github.com/prismsbi/prism/posterior"
	"github.com/prismsbi/prism/view"
)

func init() {
	register("view", "local web app: explore λ, models and uncertainty in the browser", runView)
}

// Networks of `prism view --example`.
const (
	exampleGridModel = "symbolic-k15"
	exampleDMRIModel = "b3s-brain"
)

func runView(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("view", "[--example] [(--model NAME | --checkpoint DIR) [--obs FILE [--index I]] [--candidates FILE]] [--dmri FOLDER | --dwi FILE --bval FILE --bvec FILE [--mask FILE]] [--dmri-model NAME | --dmri-checkpoint DIR] [--listen ADDR]", stderr)
	example := fs.Bool("example", false, "the bundled data: the shipped "+exampleGridModel+" network on the bundled symbolic-regression example and the shipped "+exampleDMRIModel+" network on the bundled whole-brain scan")
	gridNet := addNetFlags(fs, "trained network of a grid family (λ explorer)")
	obsPath := fs.String("obs", "", "observation `file` (JSON lines {\"x\":[…]} as prism simulate writes, or CSV rows); default: one observation simulated from the family's prior (--seed, --sim-lambda)")
	index := fs.Int("index", 0, "with --obs: the line (0-based) to explore")
	candidates := fs.String("candidates", "", "models to rank, one 0/1 mask per line of `file` (as for prism select --candidates); default: discovered from draws at λ = 0, 0.1, …, 1")
	simLambda := fs.Float64("sim-lambda", 0.5, "λ of the prior the simulated example is drawn from (without --obs)")
	folder := fs.String("dmri", "", "a prism dmri fit output `folder`: its maps, with its scan and network from run.json")
	var files dmrifit.ScanFiles
	scanFileFlags(fs, &files)
	dmriCheckpoint := fs.String("dmri-checkpoint", "", "trained ball-and-sticks network for the scan: a prism train output `directory` or weights file")
	dmriModel := fs.String("dmri-model", "", "shipped ball-and-sticks network for the scan, instead of --dmri-checkpoint (b3s, b3s-brain)")
	lambda := fs.Float64("lambda", 0, "initial λ of the dMRI maps, 0 < λ < 1 (0: the fit folder's, else 0.3)")
	seed := fs.Uint64("seed", 1, "random seed of every draw (the same --seed of prism select, predict or dmri fit gives the same numbers)")
	listen := fs.String("listen", "127.0.0.1:8080", "address to serve on (port 0: any free port); anything but a loopback address exposes the viewer to the network")
	maxUpload := fs.Int64("max-upload", view.DefaultMaxUpload, "largest accepted request body (an uploaded observation), in bytes")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *maxUpload < 1 || *index < 0 || !(*simLambda >= 0 && *simLambda <= 1) {
		return errors.New("need --max-upload ≥ 1, --index ≥ 0 and --sim-lambda in [0, 1]")
	}
	if *example {
		if gridNet.given() || *obsPath != "" || *folder != "" || files.DWI != "" {
			return errors.New("--example chooses the networks and data itself: give it alone (with --listen, --seed)")
		}
		*gridNet.model, *dmriModel = exampleGridModel, exampleDMRIModel
		dir, err := os.MkdirTemp("", "prism-view-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		if err := data.CopyTo(dir); err != nil {
			return err
		}
		files = dmrifit.ScanFiles{DWI: filepath.Join(dir, data.ScanDWI), Bval: filepath.Join(dir, data.ScanBval),
			Bvec: filepath.Join(dir, data.ScanBvec), Mask: filepath.Join(dir, data.ScanMask)}
	}
	if !gridNet.given() && *folder == "" && files.DWI == "" {
		return errors.New("nothing to show: give a grid-family network (--model/--checkpoint), a fit folder (--dmri), a scan (--dwi/--bval/--bvec with --dmri-model/--dmri-checkpoint), or --example")
	}

	cfg := view.Config{MaxUpload: *maxUpload, Logf: func(format string, a ...any) { fmt.Fprintf(stderr, format+"\n", a...) }}
	if gridNet.given() {
		g, cands, err := loadGridView(gridNet, *obsPath, *index, *candidates, *seed, *simLambda, *example)
		if err != nil {
			return err
		}
		cfg.Grid, cfg.Candidates = g, cands
	} else if *obsPath != "" || *candidates != "" {
		return errors.New("--obs and --candidates need a grid-family network (--model or --checkpoint)")
	}
	if *folder != "" || files.DWI != "" {
		d, err := loadDMRIView(*folder, files, *dmriCheckpoint, *dmriModel, *lambda, *seed, stderr)
		if err != nil {
			return err
		}
		cfg.DMRI = d
	}
	srv, err := view.New(cfg)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("--listen: %w", err)
	}
	if host, _, _ := net.SplitHostPort(*listen); !view.IsLoopback(host) {
		fmt.Fprintf(stderr, "prism view: WARNING: listening on %s: anyone who can reach this machine can use the viewer (and its CPU); use --listen 127.0.0.1:PORT to keep it local\n", ln.Addr())
	}
	fmt.Fprintf(stdout, "prism view: open http://%s/ (Ctrl-C to stop)\n", view.Browsable(ln.Addr()))
	ctx, stop := viewContext(stderr)
	defer stop()
	return srv.Serve(ctx, ln)
}

// viewContext returns the context that stops the server: cancelled on
// SIGINT or SIGTERM (tests replace it).
var viewContext = func(stderr io.Writer) (context.Context, func()) {
	return interruptContext(stderr, "prism view: stopping")
}

// loadGridView reads the grid network, the observation and the
// candidates.
func loadGridView(n *netFlags, obsPath string, index int, candPath string, seed uint64, simLambda float64, example bool) (*view.Grid, [][]bool, error) {
	p, err := n.load()
	if err != nil {
		return nil, nil, err
	}
	f := p.Family()
	var obs posterior.Observation
	var truth []bool
	var name string
	switch {
	case example:
		obs, truth, err = obsfile.BundledExample(f)
		name = "bundled example (" + data.Example(f.Name()) + ")"
	case obsPath != "":
		var rec obsfile.Record
		rec, err = obsfile.ReadOne(obsPath, index, f, func() (family.Design, error) { return obsfile.FixedDesign(f) })
		if err != nil {
			err = fmt.Errorf("--obs (--index %d): %w", index, err)
		}
		obs, truth = rec.Obs, rec.Truth
		name = fmt.Sprintf("%s, observation %d", filepath.Base(obsPath), index)
	default:
		obs, truth, err = view.SimulatedExample(f, seed, simLambda)
		name = fmt.Sprintf("simulated from the prior at λ = %g (seed %d)", simLambda, seed)
	}
	if err != nil {
		return nil, nil, err
	}
	var cands [][]bool
	if candPath != "" {
		if cands, err = obsfile.ReadMasks(candPath, f); err != nil {
			return nil, nil, fmt.Errorf("--candidates: %w", err)
		}
	}
	set := view.DefaultGridSettings()
	set.Seed = seed
	g, err := view.NewGrid(p, obs, truth, cands, name, set)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", n.source(), err)
	}
	return g, cands, nil
}
