package main

import (
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/prismsbi/prism/models"
	"github.com/prismsbi/prism/posterior"
)

// netFlags are the two ways of naming a trained network: --checkpoint (a
// `prism train` output directory or weights file) or --model (a network
// shipped inside the binary, package models). Every command that needs a
// posterior uses them, through addNetFlags and load.
type netFlags struct {
	checkpoint, model *string
}

// addNetFlags defines --checkpoint and --model on fs; what describes the
// network the command expects (e.g. "trained network").
func addNetFlags(fs *flag.FlagSet, what string) *netFlags {
	return &netFlags{
		checkpoint: fs.String("checkpoint", "", what+": a `prism train` output directory (EMA weights) or a weights file"),
		model:      fs.String("model", "", what+" shipped with prism, instead of --checkpoint: "+strings.Join(models.Names(), ", ")),
	}
}

// given reports whether a network was named.
func (n *netFlags) given() bool { return *n.checkpoint != "" || *n.model != "" }

// source names the network for messages and records: the checkpoint path
// or "model:NAME".
func (n *netFlags) source() string {
	if *n.model != "" {
		return "model:" + *n.model
	}
	return *n.checkpoint
}

// load reads the network named by exactly one of the two flags.
func (n *netFlags) load() (*posterior.Posterior, error) {
	return loadPosterior(*n.checkpoint, *n.model)
}

// errNoNetwork is returned when neither flag is given.
var errNoNetwork = errors.New("give the trained network with --checkpoint DIR or --model NAME (shipped: " + strings.Join(models.Names(), ", ") + ")")

// oneNetwork checks that exactly one of a checkpoint and a shipped model
// is named.
func oneNetwork(checkpoint, model string) error {
	switch {
	case checkpoint != "" && model != "":
		return errors.New("give --checkpoint or --model, not both")
	case checkpoint == "" && model == "":
		return errNoNetwork
	}
	return nil
}

// loadPosterior returns the posterior of a checkpoint (directory or
// weights file) or of a shipped model; exactly one must be given.
func loadPosterior(checkpoint, model string) (*posterior.Posterior, error) {
	if err := oneNetwork(checkpoint, model); err != nil {
		return nil, err
	}
	if model != "" {
		p, err := models.Open(model)
		if err != nil {
			return nil, fmt.Errorf("--model: %w", err)
		}
		return p, nil
	}
	p, err := posterior.Load(checkpoint)
	if err != nil {
		return nil, fmt.Errorf("--checkpoint: %w", err)
	}
	return p, nil
}
