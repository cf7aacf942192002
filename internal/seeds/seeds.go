// Package seeds derives prism's independent random streams from a user's
// seed. Every stream seed is built from the SplitMix64 finaliser (Steele,
// Lea and Flood 2014), which maps nearby inputs — seed 1 and seed 2, sample
// 7 and sample 8 — to unrelated 64-bit values, so that streams for
// different purposes, samples and observations never overlap in practice
// and any one of them can be reproduced on its own.
package seeds

// Mix is the SplitMix64 finaliser: a bijection of uint64 with full
// avalanche.
func Mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// Derive returns the seed of the stream tagged tag of a run seeded with
// seed: Mix(Mix(seed) ⊕ Mix(tag)).
func Derive(seed, tag uint64) uint64 { return Mix(Mix(seed) ^ Mix(tag)) }
