package memlimit

import (
	"math"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	const gb = 1e9
	for _, tc := range []struct {
		name                 string
		n                    int64
		fixed, perUnit, free float64
		want                 string // "" when it fits
	}{
		{"fits", 1000, 1e6, 1e3, 1 * gb, ""},
		{"exactly the budget", 800, 0, 1e6, 1 * gb, ""},
		{"one over the budget", 801, 0, 1e6, 1 * gb, "the largest value that fits is about 800"},
		{"two billion models", 2_000_000_000, 0, 78, 20 * gb, "--models 2000000000 needs about 156 GB"},
		{"fixed part alone too big", 1, 30 * gb, 1, 20 * gb, "no value fits"},
		{"unknown memory", 1 << 62, 0, 1e9, math.Inf(1), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Check("--models", tc.n, tc.fixed, tc.perUnit, tc.free)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
	// The largest value reported must itself pass, and one more must not.
	err := Check("--n", 1e6, 5e6, 3e3, 1e9)
	if err == nil {
		t.Fatal("no error")
	}
	var largest int64
	i := strings.LastIndex(err.Error(), "about ")
	for _, c := range err.Error()[i+6:] {
		largest = 10*largest + int64(c-'0')
	}
	if Check("--n", largest, 5e6, 3e3, 1e9) != nil || Check("--n", largest+1, 5e6, 3e3, 1e9) == nil {
		t.Errorf("largest fitting value %d is wrong", largest)
	}
}

func TestAvailable(t *testing.T) {
	a := Available()
	if !(a > 0) {
		t.Fatalf("Available() = %v", a)
	}
	t.Logf("available: %s", Size(a))
}
