// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import "golang.org/x/time/rate"

func newBucket(qps float64, burst int) *rate.Limiter {
	return rate.NewLimiter(rate.Limit(qps), burst)
}
