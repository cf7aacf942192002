package records

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

// TestWriteLinesAllOrNothing: a value that cannot be encoded is
// reported with its line and nothing is written.
func TestWriteLinesAllOrNothing(t *testing.T) {
	var buf bytes.Buffer
	err := WriteLines(&buf, []any{map[string]float64{"a": 1}, map[string]float64{"a": math.NaN()}})
	if err == nil || !strings.Contains(err.Error(), "output line 2 of 2") || buf.Len() != 0 {
		t.Fatalf("err %v, wrote %q", err, buf.String())
	}
	if err := WriteLines(&buf, []any{1, "x"}); err != nil || buf.String() != "1\n\"x\"\n" {
		t.Fatalf("err %v, wrote %q", err, buf.String())
	}
}
