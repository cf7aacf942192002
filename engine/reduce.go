package engine

import (
	"fmt"
	"math"

	"github.com/prismsbi/prism/engine/kernels"
)

// ---------------------------------------------------------------------------
// Sum / Mean over all elements: out [] (a scalar) = c·Σ x, c = 1 or 1/size.
// Accumulated in float64.

// Sum returns the sum of all elements as a scalar tensor.
func (g *Graph) Sum(x *Tensor) *Tensor { return g.sumAll(x, 1) }

// Mean returns the mean of all elements as a scalar tensor.
func (g *Graph) Mean(x *Tensor) *Tensor { return g.sumAll(x, 1/float32(x.Size())) }

func (g *Graph) sumAll(x *Tensor, c float32) *Tensor {
	out := g.newTensor(g.anyGrad(x))
	var s float64
	for _, v := range x.Data {
		s += float64(v)
	}
	out.Data[0] = float32(s * float64(c))
	if out.requiresGrad {
		nd := g.record(out, sumAllBackward)
		nd.unary = unaryRec{x: x, alpha: c}
	}
	return out
}

// dx += c·dout.
func sumAllBackward(g *Graph, nd *node) {
	x := nd.unary.x
	if !x.needsGrad() {
		return
	}
	d := nd.unary.alpha * nd.out.Grad[0]
	for i := range x.Grad {
		x.Grad[i] += d
	}
}

// ---------------------------------------------------------------------------
// SumLast / MeanLast over the last axis: x [..., D] → out [...] = c·Σ_d x.

// SumLast sums over the last axis, dropping it.
func (g *Graph) SumLast(x *Tensor) *Tensor { return g.sumLast(x, 1) }

// MeanLast averages over the last axis, dropping it.
func (g *Graph) MeanLast(x *Tensor) *Tensor { return g.sumLast(x, 1/float32(x.Cols())) }

func (g *Graph) sumLast(x *Tensor, c float32) *Tensor {
	if x.Rank() == 0 {
		panic("engine: SumLast of a scalar")
	}
	rows, d := x.Rows(), x.Cols()
	out := g.newTensor(g.anyGrad(x), x.Shape[:x.Rank()-1]...)
	for r := range rows {
		var s float32
		for _, v := range x.Data[r*d : (r+1)*d] {
			s += v
		}
		out.Data[r] = c * s
	}
	if out.requiresGrad {
		nd := g.record(out, sumLastBackward)
		nd.unary = unaryRec{x: x, alpha: c, rows: rows, d: d}
	}
	return out
}

// dx[r, :] += c·dout[r].
func sumLastBackward(g *Graph, nd *node) {
	x, dy, c, d := nd.unary.x, nd.out.Grad, nd.unary.alpha, nd.unary.d
	if !x.needsGrad() {
		return
	}
	for r := range nd.unary.rows {
		v := c * dy[r]
		for j := range x.Grad[r*d : (r+1)*d] {
			x.Grad[r*d+j] += v
		}
	}
}

// ---------------------------------------------------------------------------
// Losses. Both return a scalar: the sum over all elements (weighted/masked);
// divide by the batch size with Scale for a mean over samples.

// BCEWithLogits returns Σ_i w_i·BCE(σ(logits_i), targets_i) in the
// numerically stable form max(x,0) − x·t + log(1 + e^{−|x|}). targets (in
// [0, 1]) are constants; weights (0/1 for a mask) may be nil.
func (g *Graph) BCEWithLogits(logits, targets, weights *Tensor) *Tensor {
	n := logits.Size()
	if targets.Size() != n || (weights != nil && weights.Size() != n) {
		panic(fmt.Sprintf("engine: BCEWithLogits of logits %v, targets %v, weights %v", logits.Shape, targets.Shape, shapeOf(weights)))
	}
	out := g.newTensor(g.anyGrad(logits))
	out.Data[0] = float32(kernels.BCEWithLogits(logits.Data, targets.Data, dataOf(weights), n))
	if out.requiresGrad {
		nd := g.record(out, bceBackward)
		nd.loss = lossRec{input: logits, target: targets, weights: weights}
	}
	return out
}

// dlogits += dout·w·(σ(x) − t).
func bceBackward(g *Graph, nd *node) {
	x := nd.loss.input
	if x.needsGrad() {
		kernels.BCEWithLogitsBackward(x.Data, nd.loss.target.Data, dataOf(nd.loss.weights), x.Size(), nd.out.Grad[0], x.Grad)
	}
}

// SoftmaxCrossEntropy returns Σ_r w_r·(−log softmax(logits_r + bias_r)[t_r])
// over the rows r of logits [R, K]: the negative log-likelihood of the
// classes targets (length R, each in [0, K)) under categorical
// distributions with log-probabilities logits + bias − logsumexp. bias
// ([R, K] or nil) and weights ([R] or nil, 1 if nil) are constants; every
// biased logit of a row must be finite, and targets must not change
// before Backward. Gradient:
// dlogits_r = dout·w_r·(softmax(logits_r + bias_r) − onehot(t_r)).
func (g *Graph) SoftmaxCrossEntropy(logits, bias *Tensor, targets []int32, weights *Tensor) *Tensor {
	if logits.Rank() < 1 {
		panic(fmt.Sprintf("engine: SoftmaxCrossEntropy of logits %v", logits.Shape))
	}
	k := logits.Cols()
	r := logits.Size() / max(k, 1)
	if k == 0 || len(targets) != r || (bias != nil && bias.Size() != r*k) || (weights != nil && weights.Size() != r) {
		panic(fmt.Sprintf("engine: SoftmaxCrossEntropy of logits %v, bias %v, %d targets, weights %v", logits.Shape, shapeOf(bias), len(targets), shapeOf(weights)))
	}
	out := g.newTensor(g.anyGrad(logits))
	// z holds the biased logits, then (kept for backward) their softmax.
	z := g.buf(r * k)
	copy(z, logits.Data[:r*k])
	if bias != nil {
		for j, b := range bias.Data[:r*k] {
			z[j] += b
		}
	}
	var loss float64
	for i := range r {
		row := z[i*k : (i+1)*k]
		t := int(targets[i])
		if t < 0 || t >= k {
			panic(fmt.Sprintf("engine: SoftmaxCrossEntropy target %d of row %d outside [0, %d)", t, i, k))
		}
		mx := float64(row[0])
		for _, v := range row {
			mx = math.Max(mx, float64(v))
		}
		target := float64(row[t])
		sum := 0.0
		for j, v := range row {
			e := math.Exp(float64(v) - mx)
			row[j] = float32(e)
			sum += e
		}
		w := 1.0
		if weights != nil {
			w = float64(weights.Data[i])
		}
		loss += w * (mx + math.Log(sum) - target)
		inv := float32(1 / sum)
		for j := range row {
			row[j] *= inv
		}
	}
	out.Data[0] = float32(loss)
	if out.requiresGrad {
		nd := g.record(out, softmaxCEBackward)
		nd.loss = lossRec{input: logits, bias: bias, weights: weights, classes: targets, probs: z}
	}
	return out
}

// dlogits_r += dout·w_r·(p_r − onehot(t_r)).
func softmaxCEBackward(g *Graph, nd *node) {
	r := &nd.loss
	x := r.input
	if !x.needsGrad() {
		return
	}
	k := x.Cols()
	dout := nd.out.Grad[0]
	for i, t := range r.classes {
		w := dout
		if r.weights != nil {
			w *= r.weights.Data[i]
		}
		gr, p := x.Grad[i*k:(i+1)*k], r.probs[i*k:(i+1)*k]
		for j := range gr {
			gr[j] += w * p[j]
		}
		gr[t] -= w
	}
}

// MaskedSquaredError returns Σ_i m_i·(pred_i − target_i)²; mask may be nil.
// Gradients flow into pred and target.
func (g *Graph) MaskedSquaredError(pred, target, mask *Tensor) *Tensor {
	n := pred.Size()
	if target.Size() != n || (mask != nil && mask.Size() != n) {
		panic(fmt.Sprintf("engine: MaskedSquaredError of pred %v, target %v, mask %v", pred.Shape, target.Shape, shapeOf(mask)))
	}
	out := g.newTensor(g.anyGrad(pred, target))
	out.Data[0] = float32(kernels.MaskedSquaredError(pred.Data, target.Data, dataOf(mask), n))
	if out.requiresGrad {
		nd := g.record(out, mseBackward)
		nd.loss = lossRec{input: pred, target: target, weights: mask}
	}
	return out
}

// dpred += 2·dout·m·(pred − target);  dtarget −= the same.
func mseBackward(g *Graph, nd *node) {
	p, t := nd.loss.input, nd.loss.target
	kernels.MaskedSquaredErrorBackward(p.Data, t.Data, dataOf(nd.loss.weights), p.Size(), nd.out.Grad[0], gradOf(p), gradOf(t))
}
