//go:build race

package engine

// The race detector makes sync.Pool drop items at random and instruments
// allocations, so allocation counts are meaningless under -race.
const raceEnabled = true
