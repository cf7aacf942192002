package models

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/prismsbi/prism/checkpoint"
	"github.com/prismsbi/prism/engine/safetensors"
	"github.com/prismsbi/prism/family"
	"github.com/prismsbi/prism/network"
	"github.com/prismsbi/prism/posterior"
	"github.com/prismsbi/prism/train"
)

// shipped are the shipped models (issues 8, 21 and 25), with their families.
var shipped = map[string]string{"b3s": "b3s", "b3s-brain": "b3s-brain", "bszt": "bszt", "bszt-brain": "bszt-brain", "bszt-conv": "bszt-conv", "symbolic-k15": "symbolic-k15", "symbolic-k50": "symbolic-k50"}

func TestNames(t *testing.T) {
	if got, want := Names(), []string{"b3s", "b3s-brain", "bszt", "bszt-brain", "bszt-conv", "symbolic-k15", "symbolic-k50"}; !slices.Equal(got, want) {
		t.Fatalf("Names() = %v, want %v", got, want)
	}
}

// TestInfo checks each Info against the file in this directory, read
// independently of the embedded copy: same bytes, SHA-256 of the file,
// the family and step in its metadata, and training commands naming the
// shipped configuration.
func TestInfo(t *testing.T) {
	for name, fam := range shipped {
		info, err := Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		disk, err := os.ReadFile(name + Ext)
		if err != nil {
			t.Fatal(err)
		}
		emb, err := Weights(name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(disk, emb) {
			t.Errorf("%s: embedded bytes differ from %s%s", name, name, Ext)
		}
		sum := sha256.Sum256(disk)
		if info.SHA256 != hex.EncodeToString(sum[:]) || info.Bytes != len(disk) {
			t.Errorf("%s: SHA-256 %s (%d bytes), file %x (%d bytes)", name, info.SHA256, info.Bytes, sum, len(disk))
		}
		ts, meta, err := safetensors.Read(name + Ext)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, x := range ts {
			n += len(x.Data)
		}
		if info.Family != fam || meta["prism.family"] != fam || info.Weights != "ema" || info.Params != n {
			t.Errorf("%s: family %q (metadata %q), weights %q, %d params (file %d)", name, info.Family, meta["prism.family"], info.Weights, info.Params, n)
		}
		if info.Step <= 0 || meta["prism.step"] == "" {
			t.Errorf("%s: step %d: the shipped weights must come from a trained run", name, info.Step)
		}
		cfg := "--config configs/" + name + ".yaml "
		if !strings.HasPrefix(info.Train, "prism train "+cfg) || !strings.Contains(info.Reproduce, cfg) || !strings.Contains(info.Reproduce, " --steps ") {
			t.Errorf("%s: commands %q, %q", name, info.Train, info.Reproduce)
		}
		// b3s-brain is a warm start from the shipped b3s run; its commands
		// must say so, in the runs/NAME layout of README.md.
		if warm := strings.Contains(info.Train, "--init-from runs/b3s-anneal"); warm != (name == "b3s-brain") || strings.Contains(info.Reproduce, "--init-from runs/b3s-anneal") != warm {
			t.Errorf("%s: commands %q, %q: warm start shown %v", name, info.Train, info.Reproduce, warm)
		}
		// The final schedule may end a chain of resumed segments (the
		// command's last flag).
		if fl := info.Config.Optimizer.Schedule.String(); fl != "" && (!strings.Contains(info.Train+" ", " --lr-schedule "+fl+" ") || !strings.Contains(info.Reproduce+" ", " --lr-schedule "+fl+" ")) {
			t.Errorf("%s: the commands %q, %q omit the learning-rate schedule %s", name, info.Train, info.Reproduce, fl)
		}
		if _, err := os.Stat(filepath.Join("..", "configs", name+".yaml")); err != nil {
			t.Errorf("%s: the training command's config is missing: %v", name, err)
		}
	}
}

// TestOpenMatchesLoad: the network built from the embedded
// bytes has exactly the parameters posterior.Load reads from
// the file, and answers a query identically (same weights and code give
// bit-identical numbers).
func TestOpenMatchesLoad(t *testing.T) {
	for name := range shipped {
		p, err := Open(name)
		if err != nil {
			t.Fatal(err)
		}
		q, err := posterior.Load(name + Ext)
		if err != nil {
			t.Fatal(err)
		}
		a, b := p.Net().Params().All(), q.Net().Params().All()
		if len(a) != len(b) {
			t.Fatalf("%s: %d vs %d parameter tensors", name, len(a), len(b))
		}
		for i := range a {
			if a[i].Name != b[i].Name || !slices.Equal(a[i].Data, b[i].Data) {
				t.Fatalf("%s: parameter %s differs", name, a[i].Name)
			}
		}
		f := p.Family()
		if f.Name() != shipped[name] {
			t.Errorf("%s: family %s", name, f.Name())
		}
		s := make([]family.Sample, 2)
		family.SimulateBatch(f, family.SimOptions{Seed: 3, Lambda: 0.3}, 0, s)
		obs := []posterior.Observation{{Design: s[0].Design, X: s[0].X}, {Design: s[1].Design, X: s[1].X}}
		masks := [][][]bool{{s[0].Mask, s[1].Mask}, {s[1].Mask, s[0].Mask}}
		la, err := p.LogProbMasks(obs, 0.3, masks, posterior.Options{})
		if err != nil {
			t.Fatal(err)
		}
		lb, err := q.LogProbMasks(obs, 0.3, masks, posterior.Options{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range la {
			if !slices.Equal(la[i], lb[i]) {
				t.Errorf("%s: log q %v vs %v", name, la[i], lb[i])
			}
		}
	}
}

func TestUnknownModel(t *testing.T) {
	for _, f := range []func(string) error{
		func(n string) error { _, err := Open(n); return err },
		func(n string) error { _, err := Lookup(n); return err },
		func(n string) error { _, err := Weights(n); return err },
	} {
		err := f("b3")
		if err == nil || !strings.Contains(err.Error(), `"b3"`) || !strings.Contains(err.Error(), "b3s, b3s-brain, bszt, bszt-brain, bszt-conv, symbolic-k15, symbolic-k50") {
			t.Errorf("unknown model: error %v, want the name and the list", err)
		}
	}
}

// fakeRun lays out a `prism train` output directory whose committed
// checkpoint holds weights as its ema.safetensors.
func fakeRun(t *testing.T, weights []byte) string {
	t.Helper()
	dir := t.TempDir()
	ck := "ckpt-000000000042"
	if err := os.Mkdir(filepath.Join(dir, ck), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ck, checkpoint.EMAFile), weights, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, checkpoint.LatestFile), []byte(ck+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestExport: the export of a run is byte-identical to its EMA weights
// file and describes it; runs without a checkpoint and files that are not
// EMA weights are refused without writing anything.
func TestExport(t *testing.T) {
	w, err := Weights("symbolic-k15")
	if err != nil {
		t.Fatal(err)
	}
	run := fakeRun(t, w)
	out := filepath.Join(t.TempDir(), "k15"+Ext)
	info, err := Export(run, out)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := Lookup("symbolic-k15")
	if !bytes.Equal(got, w) || info.Name != "k15" || info.SHA256 != want.SHA256 || info.Step != want.Step {
		t.Errorf("export: %d bytes, info %+v", len(got), info)
	}

	// Re-encode the weights with other metadata: a training checkpoint
	// and raw weights are not what models ships.
	ts, meta, err := safetensors.Decode(w)
	if err != nil {
		t.Fatal(err)
	}
	variant := func(key, val string) []byte {
		m := map[string]string{}
		for k, v := range meta {
			m[k] = v
		}
		m[key] = val
		var b bytes.Buffer
		if err := safetensors.Encode(&b, ts, m); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	for _, c := range []struct {
		run, want string
	}{
		{t.TempDir(), "no committed checkpoint"},
		{fakeRun(t, variant("prism.kind", "checkpoint")), `prism.kind is "checkpoint"`},
		{fakeRun(t, variant("prism.weights", "raw")), `"raw" weights`},
		{fakeRun(t, variant("prism.format_version", "2")), "prism.format_version"},
		{fakeRun(t, variant("prism.family", "b3s")), "disagrees"},
		{fakeRun(t, w[:len(w)-4]), "safetensors"},
	} {
		out := filepath.Join(t.TempDir(), "x"+Ext)
		_, err := Export(c.run, out)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("export: error %v, want %q", err, c.want)
		}
		if _, serr := os.Stat(out); serr == nil {
			t.Errorf("export wrote %s despite %v", out, err)
		}
	}
}

// TestDescribeCommands: the training command follows the configuration's
// limit (minutes or steps), the reproduction command the step count.
func TestDescribeCommands(t *testing.T) {
	w, _ := Weights("symbolic-k15")
	ts, meta, err := safetensors.Decode(w)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for k, v := range meta {
		m[k] = v
	}
	m["prism.step"] = "1234"
	// A run from scratch limited by 5000 steps, without minutes and
	// without a learning-rate schedule (whatever the shipped run had).
	var cfg map[string]any
	if err := json.Unmarshal([]byte(meta["prism.config"]), &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["steps"], cfg["minutes"] = 5000, 0
	delete(cfg["optimizer"].(map[string]any), "schedule")
	delete(cfg, "init_from")
	cfg["seed"] = 0
	delete(cfg, "replicas")
	// describe stores cfg in the weights file's metadata and describes it.
	describe := func() Info {
		t.Helper()
		js, err := json.Marshal(cfg)
		if err != nil {
			t.Fatal(err)
		}
		m["prism.config"] = string(js)
		var b bytes.Buffer
		if err := safetensors.Encode(&b, ts, m); err != nil {
			t.Fatal(err)
		}
		info, err := Describe("symbolic-k15", b.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		return info
	}
	info := describe()
	if info.Step != 1234 || info.Reproduce != "prism train --config configs/symbolic-k15.yaml --steps 1234 --out runs/symbolic-k15" {
		t.Errorf("step %d, reproduce %q", info.Step, info.Reproduce)
	}
	if info.Config.Minutes != 0 || info.Train != "prism train --config configs/symbolic-k15.yaml --steps 5000 --out runs/symbolic-k15" {
		t.Errorf("minutes %v: train %q", info.Config.Minutes, info.Train)
	}

	// A warm start decayed over 1000 steps, resumed at 1000 under a
	// constant rate to 1100 and then at 1100 under a second decay: the
	// chain of three invocations.
	opt := cfg["optimizer"].(map[string]any)
	opt["schedule"] = map[string]any{"kind": "cosine", "start": 1100, "steps": 134, "final": 0.05}
	opt["earlier_schedules"] = []map[string]any{
		{"until": 1000, "schedule": map[string]any{"kind": "cosine", "start": 0, "steps": 1000, "final": 0.05}},
		{"until": 1100, "schedule": map[string]any{}},
	}
	cfg["init_from"] = "/somewhere/models/symbolic-k15.safetensors"
	cfg["seed"], cfg["replicas"] = 23, 2 // not the config file's: named on the first invocation
	info = describe()
	chain := "prism train --config configs/symbolic-k15.yaml --seed 23 --replicas 2 --steps 1000 --lr-schedule cosine:0:1000:0.05 --init-from models/symbolic-k15.safetensors --out runs/symbolic-k15" +
		" && prism train --resume runs/symbolic-k15 --steps 1100 --lr-schedule constant && prism train --resume runs/symbolic-k15"
	if want := chain + " --steps 1234 --lr-schedule cosine:1100:134:0.05"; info.Reproduce != want {
		t.Errorf("reproduce\n%s\nwant\n%s", info.Reproduce, want)
	}
	if want := chain + " --steps 5000 --lr-schedule cosine:1100:134:0.05"; info.Train != want {
		t.Errorf("train\n%s\nwant\n%s", info.Train, want)
	}

	// A warm start at a rate given with --lr (the file's rate recorded in
	// config_lr): the flag follows the seed and replicas.
	opt["lr"], opt["config_lr"] = 0.00025, 0.0005
	opt["schedule"] = map[string]any{"kind": "cosine", "start": 0, "steps": 1234, "final": 0.05}
	delete(opt, "earlier_schedules")
	info = describe()
	if want := "prism train --config configs/symbolic-k15.yaml --seed 23 --replicas 2 --lr 0.00025 --steps 1234 --lr-schedule cosine:0:1234:0.05 --init-from models/symbolic-k15.safetensors --out runs/symbolic-k15"; info.Reproduce != want {
		t.Errorf("reproduce\n%s\nwant\n%s", info.Reproduce, want)
	}
}

// TestConfigFileMatches: every shipped network was trained with the
// network, batch and optimiser of the configuration file its training
// command names, so that `prism models`' reproduce command is true when a
// recipe changes (the learning-rate schedule comes from the command line
// and is checked by TestInfo).
func TestConfigFileMatches(t *testing.T) {
	for name := range shipped {
		info, err := Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		file, err := train.LoadConfig(filepath.Join("..", "configs", name+".yaml"), "")
		if err != nil {
			t.Fatal(err)
		}
		got, want := info.Config, file
		f, err := got.LookupFamily()
		if err != nil {
			t.Fatal(err)
		}
		// SameFor ignores the embedding sections of other observation kinds
		// (weights older than a section carry zeros there).
		if !network.SameFor(f, got.Network, want.Network) {
			t.Errorf("%s: network %+v, configs/%s.yaml has %+v", name, got.Network, name, want.Network)
		}
		// Describe names a seed other than 0 and replicas on the command
		// line, so the files must hold seed 0 and no replicas.
		if file.Seed != 0 || file.Replicas > 1 {
			t.Errorf("configs/%s.yaml: seed %d, replicas %d; the reproduce command assumes 0 and none", name, file.Seed, file.Replicas)
		}
		got.Optimizer.Schedule, want.Optimizer.Schedule = train.Schedule{}, train.Schedule{}
		got.Optimizer.EarlierSchedules = nil
		// A rate given with --lr is named by the reproduce command; the
		// file must hold the rate it replaced.
		if got.Optimizer.ConfigLR != 0 {
			got.Optimizer.LR, got.Optimizer.ConfigLR = got.Optimizer.ConfigLR, 0
		}
		if got.BatchSize != want.BatchSize || !reflect.DeepEqual(got.Optimizer, want.Optimizer) || got.Family != want.Family {
			t.Errorf("%s: family %s, batch %d, optimiser %+v; configs/%s.yaml: %s, %d, %+v", name,
				got.Family, got.BatchSize, got.Optimizer, name, want.Family, want.BatchSize, want.Optimizer)
		}
	}
}

// TestDescribeCalibrated: a weights file with a denoiser calibration
// names the `prism calibrate` command that added it (options that are not
// the command's defaults spelled out); one without has none.
func TestDescribeCalibrated(t *testing.T) {
	w, err := os.ReadFile("../posterior/testdata/lingauss-k6-ema.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	plain, err := Describe("x", w)
	if err != nil {
		t.Fatal(err)
	}
	if plain.Calibrate != "" {
		t.Fatalf("an uncalibrated file describes a calibrate command %q", plain.Calibrate)
	}
	for _, tc := range []struct{ js, want string }{
		{`{"log_sigma":[0,1],"scale":[1,1],"simulations":2000,"per_level":8,"seed":1,"width":{"boost":0.1,"sigma_full":0.03,"sigma_zero":0.3,"simulations":1000,"samples":50}}`,
			"prism calibrate --checkpoint runs/x --out models/x.safetensors --n 2000 --levels 2 --width 1000 --seed 1"},
		{`{"log_sigma":[0,1],"scale":[1,1],"simulations":500,"per_level":4,"seed":7,"width":{"boost":0.1,"sigma_full":0.03,"sigma_zero":0.3,"simulations":300,"samples":20}}`,
			"prism calibrate --checkpoint runs/x --out models/x.safetensors --n 500 --levels 2 --per-level 4 --width 300 --width-samples 20 --seed 7"},
		{`{"log_sigma":[0,1],"scale":[1,1],"simulations":2000,"per_level":8,"seed":1}`,
			"prism calibrate --checkpoint runs/x --out models/x.safetensors --n 2000 --levels 2 --width 0 --seed 1"},
	} {
		cal, err := checkpoint.WithMetadata(w, checkpoint.MetaDenoiserCalibration, tc.js)
		if err != nil {
			t.Fatal(err)
		}
		info, err := Describe("x", cal)
		if err != nil {
			t.Fatal(err)
		}
		if info.Calibrate != tc.want {
			t.Errorf("calibrate command\n %q, want\n %q", info.Calibrate, tc.want)
		}
	}
}

// TestExportAs: --init-from-as renames the warm start's source in the
// recipe and changes nothing else — the tensors are identical and every
// other configuration field is the run's; a run that was not warm-started
// is refused.
func TestExportAs(t *testing.T) {
	w, err := Weights("symbolic-k50")
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "symbolic-k50"+Ext)
	info, err := ExportAs(fakeRun(t, w), out, "models/elsewhere.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(info.Train, " --init-from models/elsewhere.safetensors") {
		t.Errorf("recipe %q does not name the new source", info.Train)
	}
	shipped, _ := Lookup("symbolic-k50")
	if want := strings.Replace(shipped.Train, "models/symbolic-k50.safetensors", "models/elsewhere.safetensors", 1); info.Train != want {
		t.Errorf("recipe %q, want %q", info.Train, want)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	ts0, meta0, err := safetensors.Decode(w)
	if err != nil {
		t.Fatal(err)
	}
	ts1, meta1, err := safetensors.Decode(got)
	if err != nil {
		t.Fatal(err)
	}
	if len(ts0) != len(ts1) {
		t.Fatalf("%d tensors, want %d", len(ts1), len(ts0))
	}
	for i := range ts0 {
		if ts0[i].Name != ts1[i].Name || !slices.Equal(ts0[i].Shape, ts1[i].Shape) || !slices.Equal(ts0[i].Data, ts1[i].Data) {
			t.Fatalf("tensor %s changed", ts0[i].Name)
		}
	}
	var c0, c1 map[string]any
	if err := json.Unmarshal([]byte(meta0["prism.config"]), &c0); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(meta1["prism.config"]), &c1); err != nil {
		t.Fatal(err)
	}
	if c1["init_from"] != "models/elsewhere.safetensors" {
		t.Errorf("init_from %v", c1["init_from"])
	}
	delete(c0, "init_from")
	delete(c1, "init_from")
	if !reflect.DeepEqual(c0, c1) {
		t.Errorf("the rest of the configuration changed:\n%v\n%v", c0, c1)
	}
	for k, v := range meta0 {
		if k != "prism.config" && meta1[k] != v {
			t.Errorf("metadata %s: %q, want %q", k, meta1[k], v)
		}
	}

	// Without a warm start there is nothing to rename (c0 has no
	// init_from any more).
	plain, err := json.Marshal(c0)
	if err != nil {
		t.Fatal(err)
	}
	meta0["prism.config"] = string(plain)
	var b bytes.Buffer
	if err := safetensors.Encode(&b, ts0, meta0); err != nil {
		t.Fatal(err)
	}
	if _, err := ExportAs(fakeRun(t, b.Bytes()), filepath.Join(t.TempDir(), "x"+Ext), "models/x.safetensors"); err == nil ||
		!strings.Contains(err.Error(), "did not start from other weights") {
		t.Errorf("a run without init_from: err %v", err)
	}
}
