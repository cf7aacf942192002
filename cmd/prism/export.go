package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/prismsbi/prism/models"
)

func init() {
	register("export", "write a training run's EMA weights as one weights file (what models/ embeds for --model)", runExport)
	register("models", "list the trained networks shipped inside prism (--model NAME): family, steps, SHA-256, training command", runModels)
}

func runModels(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("models", "[--json]", stderr)
	asJSON := fs.Bool("json", false, "print the full descriptions (including the training configuration) as JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var infos []models.Info
	for _, name := range models.Names() {
		info, err := models.Lookup(name)
		if err != nil {
			return err
		}
		infos = append(infos, info)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(infos)
	}
	for _, in := range infos {
		fmt.Fprintf(stdout, "%s\n  family %s, %d training steps, %d parameters (%s weights), %d bytes\n  sha256 %s\n  trained with: %s\n  reproduce:    %s\n",
			in.Name, in.Family, in.Step, in.Params, in.Weights, in.Bytes, in.SHA256, in.Train, in.Reproduce)
		if in.Calibrate != "" {
			fmt.Fprintf(stdout, "  calibrated:   %s\n", in.Calibrate)
		}
	}
	return nil
}

func runExport(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("export", "--checkpoint DIR --out FILE.safetensors [--init-from-as PATH]", stderr)
	ckpt := fs.String("checkpoint", "", "`prism train` output directory (its committed checkpoint's EMA weights are exported)")
	out := fs.String("out", "", "weights file to write, e.g. models/b3s.safetensors")
	initAs := fs.String("init-from-as", "", "for a warm-started run: record this path as the weights it started from (e.g. models/symbolic-k50.safetensors when the run began from a copy of that file), so that `prism models` prints the recipe with it")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *ckpt == "" || *out == "" {
		return errors.New("--checkpoint and --out are required")
	}
	info, err := models.ExportAs(*ckpt, *out, *initAs)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s: family %s, step %d, %s weights, %d parameters, %d bytes, sha256 %s\n",
		*out, info.Family, info.Step, info.Weights, info.Params, info.Bytes, info.SHA256)
	return nil
}
