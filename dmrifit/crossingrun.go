package dmrifit

import (
	"fmt"
	"math"

	"github.com/prismsbi/prism/internal/atomicfile"
	"github.com/prismsbi/prism/posterior"
)

// RunCrossing builds the crossing-fibre phantom of spec, fits post to
// every protocol's voxels with the settings s and returns the cells of
// every protocol (EvaluateCrossing), in the order of spec.Protocols.
func RunCrossing(post *posterior.Posterior, s FitSettings, spec CrossingSpec) ([]CrossingCell, error) {
	ph, err := NewCrossingPhantom(spec)
	if err != nil {
		return nil, err
	}
	ft, err := NewFitter(post, s)
	if err != nil {
		return nil, err
	}
	var all []CrossingCell
	for _, proto := range spec.Protocols {
		scan := ph.Scans[proto]
		b, err := ft.FitBatch(scan, 0, len(scan.Voxels))
		if err != nil {
			return nil, err
		}
		cells, err := EvaluateCrossing(ph, proto, b, ft.Models)
		if err != nil {
			return nil, err
		}
		all = append(all, cells...)
	}
	return all, nil
}

// WriteCrossingJSON writes the cells with the network's name, family,
// fit settings and phantom spec to path atomically; NaN metrics (no
// second stick) are written as −1, JSON having no NaN.
func WriteCrossingJSON(path, network, family string, s FitSettings, spec CrossingSpec, cells []CrossingCell) error {
	all := append([]CrossingCell(nil), cells...)
	for i := range all {
		for _, p := range []*float64{&all[i].Dyads2, &all[i].Within, &all[i].Dispersion2} {
			if math.IsNaN(*p) {
				*p = -1
			}
		}
	}
	if err := atomicfile.WriteJSON(path, map[string]any{"network": network, "family": family, "settings": s, "phantom": spec, "cells": all}); err != nil {
		return fmt.Errorf("--json: %w", err)
	}
	return nil
}
