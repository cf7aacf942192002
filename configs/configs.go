// Package configs embeds the shipped training configurations
// (configs/FAMILY.yaml), the single source of the per-family training
// defaults: train.DefaultConfig reads them, and `prism train --family F`
// without --config trains the shipped setting.
package configs

import "embed"

//go:embed *.yaml
var files embed.FS

// Lookup returns the shipped configuration of a family, if there is one.
func Lookup(family string) ([]byte, bool) {
	data, err := files.ReadFile(family + ".yaml")
	return data, err == nil
}
