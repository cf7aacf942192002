// Package eval is prism's evaluation suite: the metrics of the PRISM paper
// (App. A.1, B) that judge a trained network on freshly
// simulated data, and Run, which computes all of them from a posterior and
// writes report.json, summary.csv and the figures (`prism eval`).
//
// Every metric is a function of plain slices so that it can be tested on
// cases with known answers:
//
//   - calibration: RandomizedRank (model SBC on log q with randomised ties),
//     PIT (parameter SBC), CalibrationError on a 100-point grid, and the band
//     expected under perfect calibration, by simulation (UniformCEBand,
//     SelfConsistentCEBand);
//   - sample quality: KSD, the preconditioned multi-scale kernel Stein
//     discrepancy (U-statistic), whose ratio to the prior's KSD is rKSD;
//   - importance sampling: ESS, R2 (agreement of two evidence estimates),
//     TV (total variation between model posteriors);
//   - prediction: RMSE;
//   - classification: Confusion, TopKAccuracy, MacroScores.
//
// Monte Carlo uncertainties of summary figures come from Bootstrap over
// test observations.
package eval
