package config

import (
	"errors"
	"strconv"
	"strings"
)

// OutputBufferLimit is Redis's client-output-buffer-limit for the normal
// class of clients: Hard and Soft in bytes (0: none), SoftSeconds how long
// the buffer may stay at or above Soft. The zero value is no limit. It has
// server.OutputBufferLimit's fields, so main converts one to the other.
type OutputBufferLimit struct {
	Hard, Soft  int64
	SoftSeconds int64
}

// String is the normal class as CONFIG GET shows it ("normal 0 0 0").
func (l OutputBufferLimit) String() string {
	return "normal " + strconv.FormatInt(l.Hard, 10) + " " + strconv.FormatInt(l.Soft, 10) + " " + strconv.FormatInt(l.SoftSeconds, 10)
}

// ParseOutputBufferLimit reads Redis's syntax for the normal class:
// "normal <hard> <soft> <soft-seconds>", sizes as ParseBytes reads them
// (plus Redis's "b" unit); repeated groups take the last. Other classes
// (replica, slave, pubsub) are refused: celld has neither replicas nor
// Pub/Sub clients.
func ParseOutputBufferLimit(s string) (OutputBufferLimit, error) {
	f := strings.Fields(s)
	if len(f) == 0 || len(f)%4 != 0 {
		return OutputBufferLimit{}, errors.New("wrong number of arguments in buffer limit configuration: want normal <hard> <soft> <soft-seconds>")
	}
	var lim OutputBufferLimit
	for i := 0; i < len(f); i += 4 {
		switch strings.ToLower(f[i]) {
		case "normal":
		case "replica", "slave", "pubsub":
			return OutputBufferLimit{}, errors.New("only the normal class can be set: celld has no " + strings.ToLower(f[i]) + " clients")
		default:
			return OutputBufferLimit{}, errors.New("invalid client class specified in buffer limit configuration: " + strconv.Quote(f[i]))
		}
		hard, err1 := parseRedisSize(f[i+1])
		soft, err2 := parseRedisSize(f[i+2])
		secs, err3 := strconv.ParseInt(f[i+3], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil || secs < 0 {
			return OutputBufferLimit{}, errors.New("error in hard, soft or soft-seconds setting in buffer limit configuration: " + strconv.Quote(strings.Join(f[i:i+4], " ")))
		}
		lim = OutputBufferLimit{Hard: hard, Soft: soft, SoftSeconds: secs}
	}
	return lim, nil
}

// parseRedisSize is ParseBytes plus Redis's "b" unit (10b = 10 bytes).
func parseRedisSize(s string) (int64, error) {
	if t := strings.ToLower(s); strings.HasSuffix(t, "b") && len(t) > 1 && t[len(t)-2] >= '0' && t[len(t)-2] <= '9' {
		s = s[:len(s)-1]
	}
	return ParseBytes(s)
}

// outputBufferValue takes a client-output-buffer-limit.
type outputBufferValue struct{ p *OutputBufferLimit }

func (v outputBufferValue) meta() string { return "'normal HARD SOFT SECS'" }
func (v outputBufferValue) set(s string) error {
	lim, err := ParseOutputBufferLimit(s)
	if err != nil {
		return err
	}
	*v.p = lim
	return nil
}
