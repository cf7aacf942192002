package network

import "fmt"

// Replica returns a network of n's family and configuration whose
// parameters share their values with n's but accumulate gradients of their
// own. Data-parallel training (train.Config.Replicas) runs one replica per
// core on a shard of every batch, sums the replicas' gradients into n's and
// lets the optimiser update n's values in place, which every replica then
// reads. A replica is for training graphs (Loss) only, and the shared
// values must only ever be updated in place, never replaced.
func (n *Net) Replica() (*Net, error) {
	r, err := New(n.fam, n.cfg, 0)
	if err != nil {
		return nil, fmt.Errorf("network: replica: %w", err)
	}
	src, dst := n.store.All(), r.store.All()
	if len(src) != len(dst) {
		return nil, fmt.Errorf("network: replica has %d parameter tensors, the network %d", len(dst), len(src))
	}
	for i, p := range dst {
		if p.Name != src[i].Name || len(p.Data) != len(src[i].Data) {
			return nil, fmt.Errorf("network: replica parameter %d is %s (%d values), the network's %s (%d values)",
				i, p.Name, len(p.Data), src[i].Name, len(src[i].Data))
		}
		p.Data = src[i].Data
	}
	return r, nil
}
