package config

import (
	"strings"
	"testing"
)

func TestParseOutputBufferLimit(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want OutputBufferLimit
		err  string
	}{
		{"normal 0 0 0", OutputBufferLimit{}, ""},
		{"normal 64mb 16mb 60", OutputBufferLimit{64 << 20, 16 << 20, 60}, ""},
		{"NORMAL 1gb 1g 0", OutputBufferLimit{1 << 30, 1e9, 0}, ""},
		{"normal 1k 1KB 5", OutputBufferLimit{1000, 1024, 5}, ""},
		{"normal 10b 7 1", OutputBufferLimit{10, 7, 1}, ""},
		{"normal 1 2 3 normal 4 5 6", OutputBufferLimit{4, 5, 6}, ""},
		{"", OutputBufferLimit{}, "wrong number"},
		{"normal 0 0", OutputBufferLimit{}, "wrong number"},
		{"replica 0 0 0", OutputBufferLimit{}, "only the normal class"},
		{"pubsub 32mb 8mb 60", OutputBufferLimit{}, "only the normal class"},
		{"master 0 0 0", OutputBufferLimit{}, "invalid client class"},
		{"normal -1 0 0", OutputBufferLimit{}, "error in hard"},
		{"normal 1x 0 0", OutputBufferLimit{}, "error in hard"},
		{"normal mb 0 0", OutputBufferLimit{}, "error in hard"},
		{"normal 0 0 -1", OutputBufferLimit{}, "error in hard"},
		{"normal 0 0 1s", OutputBufferLimit{}, "error in hard"},
		{"normal 99999999999gb 0 0", OutputBufferLimit{}, "error in hard"},
	} {
		got, err := ParseOutputBufferLimit(tc.in)
		switch {
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("%q: %+v, %v; want %+v", tc.in, got, err, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: error %v, want one containing %q", tc.in, err, tc.err)
		}
	}
}
