package network

import (
	"testing"

	"github.com/prismsbi/prism/engine"
)

func TestLossRunsEveryFamily(t *testing.T) {
	for _, name := range families {
		n := newNet(t, name, tinyConfig, 1)
		s := simulate(n.fam, 2, 0, 4)
		var b Batch
		if err := n.MakeBatch(s, 3, &b); err != nil {
			t.Fatal(err)
		}
		g := engine.NewGraph()
		tot, ml, pl := n.Loss(g, &b)
		n.Params().ZeroGrad()
		g.Backward(tot)
		t.Logf("%s: tokens %d dPad %d loss %v mask %v param %v", name, len(n.tokens), n.dPad, tot.Item(), ml, pl)
	}
}
