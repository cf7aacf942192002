// Package train is prism's on-line training loop: it simulates training
// data on the fly from a model family, feeds it to the PRISM network
// (package network) and optimises it with engine/optim (AGC + RAdam + EMA),
// with periodic validation on a fixed simulated set, a JSON-lines log, and
// atomic checkpoints from which a run resumes bit-for-bit.
//
// Determinism: everything random derives from Config.Seed. Training
// simulation i of design stream j is drawn from its own generator seeded by
// (stream seed, i) (family.SimulateBatch), step s consumes the simulations
// [Next_j, Next_j + BatchSize) of every stream, and the network's training
// noise is seeded per sample index (network.MakeBatch), so the numbers do
// not depend on how many simulator goroutines run or when they finish.
// Together with the engine's deterministic kernels, the same configuration
// gives byte-identical checkpoints, and a run interrupted at any point
// (even by SIGKILL) and resumed with Resume ends with exactly the weights of
// an uninterrupted run of the same number of steps.
//
// See docs/training.md for the loop, the checkpoint layout and measured
// throughput, and Config for the settings (YAML files in configs/).
package train
