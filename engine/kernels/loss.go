package kernels

import "math"

// BCEWithLogits returns the summed binary cross-entropy of n logits against
// targets in [0, 1], Σ w_i·(max(x,0) − x·t + log(1 + e^{−|x|})), the
// numerically stable form of −t·log σ(x) − (1−t)·log(1−σ(x)). weights nil
// means 1 (use 0/1 weights as a mask). The sum is accumulated in float64;
// divide by the number of terms for a mean.
func BCEWithLogits(logits, targets, weights []float32, n int) (loss float64) {
	checkLen("logits", logits, n)
	checkLen("targets", targets, n)
	checkOpt("weights", weights, n)
	for i := 0; i < n; i++ {
		x, t := float64(logits[i]), float64(targets[i])
		l := max(x, 0) - x*t + math.Log1p(math.Exp(-math.Abs(x)))
		if weights != nil {
			l *= float64(weights[i])
		}
		loss += l
	}
	return loss
}

// BCEWithLogitsBackward accumulates dlogits += scale·w·(σ(x) − t), the
// gradient of scale·BCEWithLogits.
func BCEWithLogitsBackward(logits, targets, weights []float32, n int, scale float32, dlogits []float32) {
	checkLen("logits", logits, n)
	checkLen("targets", targets, n)
	checkOpt("weights", weights, n)
	checkLen("dlogits", dlogits, n)
	for i := 0; i < n; i++ {
		x := float64(logits[i])
		var sig float64
		if x >= 0 {
			sig = 1 / (1 + math.Exp(-x))
		} else {
			e := math.Exp(x)
			sig = e / (1 + e)
		}
		g := float64(scale) * (sig - float64(targets[i]))
		if weights != nil {
			g *= float64(weights[i])
		}
		dlogits[i] += float32(g)
	}
}

// MaskedSquaredError returns Σ m_i·(pred_i − target_i)² over n elements
// (mask nil means 1), accumulated in float64.
func MaskedSquaredError(pred, target, mask []float32, n int) (loss float64) {
	checkLen("pred", pred, n)
	checkLen("target", target, n)
	checkOpt("mask", mask, n)
	for i := 0; i < n; i++ {
		d := float64(pred[i]) - float64(target[i])
		l := d * d
		if mask != nil {
			l *= float64(mask[i])
		}
		loss += l
	}
	return loss
}

// MaskedSquaredErrorBackward accumulates the gradient of
// scale·MaskedSquaredError: dpred += 2·scale·m·(pred − target) and dtarget
// −= the same; either may be nil.
func MaskedSquaredErrorBackward(pred, target, mask []float32, n int, scale float32, dpred, dtarget []float32) {
	checkLen("pred", pred, n)
	checkLen("target", target, n)
	checkOpt("mask", mask, n)
	checkOpt("dpred", dpred, n)
	checkOpt("dtarget", dtarget, n)
	for i := 0; i < n; i++ {
		g := 2 * scale * (pred[i] - target[i])
		if mask != nil {
			g *= mask[i]
		}
		if dpred != nil {
			dpred[i] += g
		}
		if dtarget != nil {
			dtarget[i] -= g
		}
	}
}
