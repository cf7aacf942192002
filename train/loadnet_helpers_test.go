package train

import (
	"github.com/prismsbi/prism/checkpoint"
	"github.com/prismsbi/prism/network"
)

// loadNetwork reads a run's network (checkpoint.LoadRun, the loader
// inference uses) together with its training configuration and state.
func loadNetwork(dir string, ema bool) (*network.Net, Config, State, error) {
	net, _, err := checkpoint.LoadRun(dir, ema)
	if err != nil {
		return nil, Config{}, State{}, err
	}
	ck, err := loadCheckpoint(dir)
	if err != nil {
		return nil, Config{}, State{}, err
	}
	return net, ck.cfg, ck.state, nil
}
