package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/prismsbi/prism/models"
)

func init() {
	register("export", "write a training run's EMA weights as one weights file (what models/ embeds for --model)", runExport)
}

func runExport(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("export", "--checkpoint DIR --out FILE.safetensors", stderr)
	ckpt := fs.String("checkpoint", "", "`prism train` output directory (its committed checkpoint's EMA weights are exported)")
	out := fs.String("out", "", "weights file to write, e.g. models/b3s.safetensors")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *ckpt == "" || *out == "" {
		return errors.New("--checkpoint and --out are required")
	}
	info, err := models.Export(*ckpt, *out)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s: family %s, step %d, %s weights, %d parameters, %d bytes, sha256 %s\n",
		*out, info.Family, info.Step, info.Weights, info.Params, info.Bytes, info.SHA256)
	return nil
}
