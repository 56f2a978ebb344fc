package sidecar

import (
	"reflect"
	"strconv"
	"testing"

	"github.com/celld/celld/cluster"
)

// TestParseValueFramesAsTheFramer: parseValue reads lines where the
// framer found them. A '\r' inside a simple string ended its line for
// decode (not for the framer), which then read the rest of that line as
// values of their own: a count of 10^8 allocated a table of that size
// (10^12 would have been a fatal out-of-memory), a length near 2^63
// sliced past the buffer (a panic).
func TestParseValueFramesAsTheFramer(t *testing.T) {
	cases := []struct {
		in   string
		want any // nil: an error
	}{
		{"*2\r\n+a\rX*100000000\r\n:1\r\n", []any{"a\rX*100000000", int64(1)}},
		{"*2\r\n+a\rX$9223372036854775806\r\n:1\r\n", []any{"a\rX$9223372036854775806", int64(1)}},
		{"*2\r\n:1\r\n$-1\r\n", []any{int64(1), nil}},
		{"*1\r\n*3\r\n:0\r\n:16383\r\n*2\r\n$9\r\n127.0.0.1\r\n:7000\r\n",
			[]any{[]any{int64(0), int64(16383), []any{"127.0.0.1", int64(7000)}}}},
		{"*1\r\n%1\r\n+a\r\n:1\r\n", nil}, // RESP3 map: not CLUSTER SLOTS
	}
	for i, c := range cases {
		var v any
		var err error
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("case %d %q: panic %v", i, c.in, p)
				}
			}()
			v, _, err = parseValue([]byte(c.in))
		}()
		if c.want == nil {
			if err == nil {
				t.Errorf("case %d %q: %v, want an error", i, c.in, v)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(v, c.want) {
			t.Errorf("case %d %q: %#v, %v; want %#v", i, c.in, v, err, c.want)
		}
	}
}

// FuzzParseValue: whatever an upstream sends, parseValue does not panic,
// and a value it decodes is the reply the framer framed.
func FuzzParseValue(f *testing.F) {
	for _, s := range []string{
		"*1\r\n*3\r\n:0\r\n:16383\r\n*2\r\n$9\r\n127.0.0.1\r\n:7000\r\n",
		"*2\r\n+a\rX*100000000\r\n:1\r\n",
		"*2\r\n+a\rX$9223372036854775806\r\n:1\r\n",
		"$9223372036854775807\r\nabc",
		"*-1\r\n", "$-1\r\n", "-ERR x\r\n", ":1\r\n", "*1\r\n%1\r\n+a\r\n:1\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		_, n, err := parseValue(b)
		if err != nil {
			return
		}
		if m, ferr := replyEnd(b); ferr != nil || m != n {
			t.Fatalf("parseValue took %d bytes, the framer %d (%v)", n, m, ferr)
		}
	})
}

// slotsReply is a CLUSTER SLOTS reply of the given entries, each
// {first, last, host, port} (host "" for an empty string).
func slotsReply(entries ...[4]string) string {
	b := "*" + strconv.Itoa(len(entries)) + "\r\n"
	for _, e := range entries {
		b += "*3\r\n:" + e[0] + "\r\n:" + e[1] + "\r\n*2\r\n$" + strconv.Itoa(len(e[2])) + "\r\n" + e[2] + "\r\n:" + e[3] + "\r\n"
	}
	return b
}

// FuzzParseSlots: whatever CLUSTER SLOTS answers, parseSlots does not
// panic, and a topology it accepts gives every slot it assigns an owner
// that the owners list holds, the same through either lookup table.
func FuzzParseSlots(f *testing.F) {
	for _, s := range []string{
		slotsReply([4]string{"0", "16383", "127.0.0.1", "7000"}),
		slotsReply([4]string{"0", "8191", "127.0.0.1", "7000"}, [4]string{"8192", "16383", "", "7001"}),
		slotsReply([4]string{"100", "50", "h", "1"}),
		slotsReply([4]string{"0", "16384", "h", "1"}),
		slotsReply([4]string{"-1", "5", "h", "1"}),
		slotsReply([4]string{"0", "10", "?", "1"}, [4]string{"5", "20", "h", "2"}),
		"-ERR cluster support disabled\r\n", ":5\r\n", "*0\r\n", "*1\r\n*2\r\n:0\r\n:1\r\n",
	} {
		f.Add([]byte(s))
	}
	sc, err := New(Config{Seeds: []string{"127.0.0.1:1"}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		topo, err := sc.parseSlots("127.0.0.1:1", b)
		if err != nil {
			return
		}
		big := &topology{slots: topo.slots, owners: topo.owners} // the pointer table only
		for slot := range cluster.SlotCount {
			o := topo.owner(slot)
			if o != big.owner(slot) {
				t.Fatalf("slot %d: the two tables disagree", slot)
			}
			if o != nil && !containsOwner(topo.owners, o) {
				t.Fatalf("slot %d: owner %s not in the owners list", slot, o.addr)
			}
		}
	})
}

func containsOwner(owners []*owner, o *owner) bool {
	for _, x := range owners {
		if x == o {
			return true
		}
	}
	return false
}
