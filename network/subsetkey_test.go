package network

import "testing"

// TestSubsetKey: token subsets get distinct cache keys however many
// tokens a family has (indices beyond 63 included), and equal subsets the
// same key.
func TestSubsetKey(t *testing.T) {
	subsets := [][]int{{0}, {64}, {0, 64}, {1, 100}, {100}, {107}, {0, 1, 2}, {}}
	seen := map[string]int{}
	for i, s := range subsets {
		k := subsetKey(s)
		if j, dup := seen[k]; dup {
			t.Errorf("subsets %v and %v share the key %q", subsets[j], s, k)
		}
		seen[k] = i
		if subsetKey(append([]int(nil), s...)) != k {
			t.Errorf("subset %v: key not reproducible", s)
		}
	}
}
