package main

import (
	"math"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"
)

// TestBucketQuantileInterpolatesWithinTheBucket: quantiles fall linearly inside the bucket
// holding their rank, and beyond the last finite bucket they are its bound.
func TestBucketQuantileInterpolatesWithinTheBucket(t *testing.T) {
	bucket := func(upper float64, cumulative uint64) *dto.Bucket {
		return &dto.Bucket{UpperBound: proto.Float64(upper), CumulativeCount: proto.Uint64(cumulative)}
	}
	h := &dto.Histogram{SampleCount: proto.Uint64(100), Bucket: []*dto.Bucket{
		bucket(0.001, 0), bucket(0.002, 50), bucket(0.004, 98), bucket(0.008, 98),
	}}
	for _, tc := range []struct{ q, want float64 }{
		{0.25, 0.0015}, // rank 25 of the 50 in (1, 2] ms
		{0.5, 0.002},
		{0.74, 0.003}, // rank 74: 24 of the 48 in (2, 4] ms
		{0.99, 0.008}, // beyond the last finite bucket
	} {
		if got := bucketQuantile(h, tc.q); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("q %v: %v, want %v", tc.q, got, tc.want)
		}
	}
}
