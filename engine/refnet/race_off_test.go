//go:build !race

package refnet

const raceEnabled = false
