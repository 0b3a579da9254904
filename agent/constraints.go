package agent

import (
	"fmt"
	"math"
	"time"
)

// constraints are the Noema input's "constraints": {"maxTime": ms,
// "maxCost": USD, "requiredQuality": 0..1}. They tighten the run's
// budgets, never loosen them, and a confidence below requiredQuality
// makes the run partial.
type constraints struct {
	maxTime time.Duration
	maxCost float64
	quality float64
}

// constraintsOf reads the input's constraints; a value of the wrong kind
// is a problem naming it.
func constraintsOf(input map[string]any) (constraints, []string) {
	var c constraints
	raw, ok := input["constraints"]
	if !ok || raw == nil {
		return c, nil
	}
	m, ok := raw.(map[string]any)
	if !ok {
		return c, []string{fmt.Sprintf("constraints: want an object with maxTime, maxCost and requiredQuality, not %T", raw)}
	}
	var probs []string
	num := func(key string, limit float64) float64 {
		v, ok := m[key]
		if !ok || v == nil {
			return 0
		}
		f, ok := number(v)
		if !ok || f < 0 || f > limit || math.IsNaN(f) {
			probs = append(probs, fmt.Sprintf("constraints.%s %v: want a number from 0 to %v", key, v, limit))
			return 0
		}
		return f
	}
	c.maxTime = time.Duration(num("maxTime", math.MaxInt64/float64(time.Millisecond)) * float64(time.Millisecond))
	c.maxCost = num("maxCost", math.MaxFloat64)
	c.quality = num("requiredQuality", 1)
	return c, probs
}

// number is v as a float64 when it is a JSON or Go number.
func number(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case float32:
		return float64(n), true
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	case interface{ Float64() (float64, error) }: // json.Number
		f, err := n.Float64()
		return f, err == nil
	}
	return 0, false
}

// constrain tightens b by the input's constraints.
func (b *budget) constrain(c constraints) {
	if c.maxTime > 0 && (b.timeout <= 0 || c.maxTime < b.timeout) {
		b.timeout = c.maxTime
	}
	capPositive(&b.maxCost, c.maxCost)
}

// checkQuality makes a successful run whose confidence is below the
// required quality partial, and returns why: its answer stands, its
// success does not.
func checkQuality(res *Result, quality float64) error {
	if quality <= 0 || !res.Success || res.Confidence >= quality {
		return nil
	}
	err := withDetails(fmt.Errorf("%w: confidence %.2f, required %.2f", ErrLowQuality, res.Confidence, quality),
		map[string]any{"confidence": res.Confidence, "required_quality": quality})
	end := endingOf(err)
	res.Success, res.Outcome = false, end.outcome
	res.Error = &ErrorInfo{Code: end.code, Message: err.Error(), Details: detailsOf(err), Recoverable: end.recoverable}
	return err
}
