package family

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"
)

func TestParamsJSON(t *testing.T) {
	p := Params{
		Components: map[int]map[string]float64{
			10: {"c1": 0.1},
			2:  {"theta": 1.5, "phi": -3, "d": 1e-3},
			0:  {},
		},
		Shared:    map[string]float64{"d_std": 0.001, "d": 0.002},
		Fractions: []float64{0.25, 0.75, 0},
	}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"components":{"0":{},"2":{"d":0.001,"phi":-3,"theta":1.5},"10":{"c1":0.1}},"shared":{"d":0.002,"d_std":0.001},"fractions":[0.25,0.75,0]}`
	if string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
	var back Params
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, p) {
		t.Errorf("round trip: %+v", back)
	}
	if b, _ := json.Marshal(Params{}); string(b) != `{"components":{}}` {
		t.Errorf("empty params: %s", b)
	}
	if _, err := json.Marshal(Params{Shared: map[string]float64{"d": math.NaN()}}); err == nil {
		t.Error("NaN was marshalled")
	}
}
