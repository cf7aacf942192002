package network

import (
	"slices"
	"testing"

	"github.com/prismsbi/prism/engine"
)

// TestReplicaSharesValuesNotGradients: a replica computes the same loss as
// its network, follows in-place updates of the shared values and keeps
// gradients of its own.
func TestReplicaSharesValuesNotGradients(t *testing.T) {
	n := newNet(t, "lingauss-k6", tinyConfig, 3)
	r, err := n.Replica()
	if err != nil {
		t.Fatal(err)
	}
	var b Batch
	if err := n.MakeBatch(simulate(n.fam, 6, 0, 8), 5, &b); err != nil {
		t.Fatal(err)
	}
	loss := func(m *Net) float32 {
		g := engine.NewGraph()
		total, _, _ := m.Loss(g, &b)
		g.Backward(total)
		return total.Item()
	}
	if ln, lr := loss(n), loss(r); ln != lr {
		t.Fatalf("loss %v on the network, %v on its replica", ln, lr)
	}
	np, rp := n.Params().All(), r.Params().All()
	if !slices.Equal(np[0].Grad, rp[0].Grad) || &np[0].Grad[0] == &rp[0].Grad[0] {
		t.Fatal("replica gradients are not equal-valued separate buffers")
	}
	before := loss(r)
	for _, p := range np { // an in-place update of the network's values
		for i := range p.Data {
			p.Data[i] *= 0.5
		}
	}
	if after := loss(r); after == before {
		t.Fatal("the replica did not see the network's updated values")
	}
	if &np[0].Data[0] != &rp[0].Data[0] {
		t.Fatal("values are not shared")
	}
}
