package network

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestConfigLegacyKeys: checkpoints and configuration files written before
// the encoders had their own sections (flat points_per_token, grid_linear,
// max_b, b_embed, tensor_features) read into the sections; keys given both
// ways must agree; unknown keys stay errors; a written Config reads back
// unchanged.
func TestConfigLegacyKeys(t *testing.T) {
	base := DefaultConfig(nil)
	read := func(js string) (Config, error) {
		c := base
		err := json.Unmarshal([]byte(js), &c)
		return c, err
	}
	c, err := read(`{"model_dim": 32, "points_per_token": 5, "grid_linear": true, "max_b": 3000, "b_embed": 8, "tensor_features": true}`)
	if err != nil {
		t.Fatal(err)
	}
	want := base
	want.ModelDim = 32
	want.Grid = GridEncoderConfig{PointsPerToken: 5, Linear: true}
	want.Diffusion = DiffusionEncoderConfig{MaxB: 3000, BEmbed: 8, TensorFeatures: true}
	if c != want {
		t.Errorf("legacy keys: got %+v, want %+v", c, want)
	}
	// Keys not given keep the defaults (as a YAML file over the defaults).
	if c, err = read(`{"diffusion": {"tensor_features": true}}`); err != nil || c.Diffusion.MaxB != 4000 || c.Diffusion.BEmbed != 12 || !c.Diffusion.TensorFeatures {
		t.Errorf("section over defaults: %+v, %v", c.Diffusion, err)
	}
	if _, err = read(`{"b_embed": 12, "diffusion": {"b_embed": 12}}`); err != nil {
		t.Errorf("agreeing legacy and section keys refused: %v", err)
	}
	if _, err = read(`{"b_embed": 8, "diffusion": {"b_embed": 12}}`); err == nil || !strings.Contains(err.Error(), "b_embed is given both") {
		t.Errorf("conflicting keys: error %v", err)
	}
	if _, err = read(`{"model_dims": 32}`); err == nil || !strings.Contains(err.Error(), "model_dims") {
		t.Errorf("unknown key: error %v", err)
	}
	if _, err = read(`{"grid": {"points": 3}}`); err == nil {
		t.Error("unknown key inside a section accepted")
	}
	js, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	var back Config
	if err := json.Unmarshal(js, &back); err != nil || back != want {
		t.Errorf("round trip: %+v, %v (from %s)", back, err, js)
	}
	if strings.Contains(string(js), `"max_b":3000,"b_embed"`) && !strings.Contains(string(js), `"diffusion":{`) {
		t.Errorf("written config %s lacks the diffusion section", js)
	}
}

// TestSameFor: configurations that differ only in the input-embedding
// section of another observation kind build the same network (a file
// written before that section existed lacks it), or only in the training
// noise distribution, build the same network; any other difference counts.
func TestSameFor(t *testing.T) {
	b3s, lg := lookup(t, "b3s"), lookup(t, "lingauss-k6")
	a := DefaultConfig(nil)
	b := a
	b.Points = PointsEncoderConfig{}
	b.Grid.PointsPerToken = 3
	if !SameFor(b3s, a, b) {
		t.Error("b3s: unused grid/points sections made a difference")
	}
	if SameFor(lg, a, b) {
		t.Error("lingauss: a different points_per_token went unnoticed")
	}
	c := a
	c.Diffusion.MaxB = 3000
	if SameFor(b3s, a, c) || !SameFor(lg, a, c) {
		t.Error("diffusion.max_b must matter for b3s only")
	}
	e := a
	e.LogSigmaMean, e.LogSigmaStd, e.SigmaMin = -2, 1.6, 1e-4
	if !SameFor(lg, a, e) || !SameFor(b3s, a, e) {
		t.Error("the training noise distribution must not count: it does not change the tensors")
	}
	d := a
	d.ModelDim = 32
	if SameFor(lg, a, d) || SameFor(b3s, a, d) {
		t.Error("model_dim difference went unnoticed")
	}
}
